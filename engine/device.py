"""Where the engine runs: `device` auto|cpu|cuda[:N] and `dtype` auto|float32|bfloat16|float16."""

from __future__ import annotations

import array
import math
import mmap

import torch

from dragoman.kernels import DeviceProfile, device_profile, profile_name

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class DeviceError(ValueError):
    """A device or precision this machine cannot provide; the message says which and why."""


def resolve_device(name: str = "auto") -> torch.device:
    if name == "auto":
        return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name == "cuda" or name.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise DeviceError(f"device {name!r}: no CUDA GPU is available here (use --device cpu)")
        index = 0 if name == "cuda" else name.removeprefix("cuda:")
        if not str(index).isdigit() or int(index) >= torch.cuda.device_count():
            raise DeviceError(f"device {name!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
        return torch.device("cuda", int(index))
    raise DeviceError(f"unknown device {name!r}: expected auto, cpu, cuda or cuda:N")


def cuda_device_names() -> list[str]:
    """The name of each CUDA device, by index ("cuda:N"). Asks the driver for names only: no context is made."""
    return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    """The activations' dtype. ("int8" means int8 weights with float32 activations, CPU only.) On a
    GPU, "auto" is bfloat16 where its tensor cores have it (compute capability 8.0 and later) and
    float16 below (Turing), where bfloat16 is refused."""
    if name == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if gpu_profile(device).has_bfloat16 else torch.float16
        return torch.float32
    if name == "int8":
        if device.type != "cpu":
            raise DeviceError("int8 weights are for the CPU (use bfloat16 on a GPU)")
        return torch.float32
    if name not in DTYPES:
        raise DeviceError(f"unknown dtype {name!r}: expected auto, float32, bfloat16, float16 or int8")
    dtype = DTYPES[name]
    if device.type == "cpu" and dtype == torch.float16:
        raise DeviceError("float16 is not supported on the CPU (use float32 or bfloat16)")
    if device.type == "cuda" and dtype == torch.bfloat16 and not gpu_profile(device).has_bfloat16:
        major, minor = gpu_profile(device).capability
        raise DeviceError(f"bfloat16 needs a GPU of compute capability 8.0 or later (this one is {major}.{minor}): "
                          "use float16")
    return dtype


def gpu_profile(device: torch.device) -> DeviceProfile:
    """What the kernels may ask of the GPU `device` (kernels/gpu_profile.py; DRAGOMAN_GPU_PROFILE
    emulates a smaller card's limits)."""
    return device_profile(device.index if device.index is not None else torch.cuda.current_device())


def sum_in_float32(dtype: torch.dtype) -> None:
    """Make cuBLAS sum float16 products in float32: by default torch lets it round partial sums to
    float16, where long sums of NLLB's activations lose digits and can overflow."""
    if dtype == torch.float16:
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False


def describe(device: torch.device, dtype: torch.dtype, int8: bool = False) -> str:
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    if device.type == "cuda" and profile_name():
        where += f" as {profile_name()}"
    return f"{where}, {'int8' if int8 else str(dtype).removeprefix('torch.')}"


def zeroed(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """torch.zeros(shape), but on the CPU from an anonymous memory map, whose pages the OS zeroes as
    they are first touched: a KV cache costs nothing until its slots are used, where filling a
    published model's caches with zeros took 0.3-0.7 s of a CPU start-up."""
    count = math.prod(shape)
    if device.type != "cpu" or count == 0:
        return torch.zeros(shape, dtype=dtype, device=device)
    pages = mmap.mmap(-1, count * dtype.itemsize)  # kept alive by the tensor
    return torch.frombuffer(pages, dtype=dtype, count=count).view(shape)


def to_device(data, device: torch.device, dtype: torch.dtype | None = None) -> torch.Tensor:
    """`torch.tensor(data, dtype=dtype, device=device)` without waiting for the device.

    `torch.tensor(..., device="cuda")` copies from pageable memory and then waits until the stream
    has run everything queued before it: the host would idle while the device drains, then the
    device while the host prepares the next step. A copy from pinned memory just joins the queue."""
    return _send(torch.tensor(data, dtype=dtype), device)


def tensors_to_device(tensors: list[torch.Tensor], device: torch.device) -> list[torch.Tensor]:
    """Host tensors of one dtype on `device` in one copy (queued like `to_device`): views of one
    buffer, in their shapes. Why: each copy costs the host a pinned staging buffer and a launch."""
    flat = torch.cat([t.reshape(-1) for t in tensors])  # (sum of numels,)
    return _views(_send(flat, device), [tuple(t.shape) for t in tensors])


def _send(host: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host tensor on `device`, queued without waiting: through pinned memory on CUDA."""
    if device.type == "cuda":
        return host.pin_memory().to(device, non_blocking=True)
    return host if device.type == "cpu" else host.to(device)


def to_device_many(lists: list[list], device: torch.device) -> list[torch.Tensor]:
    """`to_device` of several lists of ints, each flat or made of equal-length lists, in one copy:
    int32 views (n,) or (n, m) of one tensor. Why: each copy costs the host a pinned staging
    buffer and a launch, and a sentence's admission made a dozen."""
    host, shapes = _pack(lists)
    return _views(_send(host, device), shapes)


def copy_many_to_device(target: torch.Tensor, lists: list[list]) -> list[torch.Tensor]:
    """`to_device_many` into the front of an existing int32 device tensor (a captured graph's
    inputs): the same views, of `target`; lists of the same shapes get the same views."""
    host, shapes = _pack(lists)
    if host.numel() > target.numel():
        raise ValueError(f"{host.numel()} ints do not fit a buffer of {target.numel()}")
    copy_to_device(target[: host.numel()], host)
    return _views(target, shapes)


def _pack(lists: list[list]) -> tuple[torch.Tensor, list[tuple[int, ...]]]:
    """The ints of `lists` one list after another, as a host int32 tensor, and each list's shape."""
    flat = array.array("i")
    assert flat.itemsize == 4, "array's C int is not 32 bits here"
    shapes: list[tuple[int, ...]] = []
    for data in lists:
        nested = bool(data) and isinstance(data[0], (list, tuple))
        shapes.append((len(data), len(data[0])) if nested else (len(data),))
        before = len(flat)
        for part in data if nested else [data]:
            flat.extend(part)
        if len(flat) - before != math.prod(shapes[-1]):
            raise ValueError("the lists of a nested list must have one length")
    return torch.frombuffer(flat, dtype=torch.int32) if flat else torch.zeros(0, dtype=torch.int32), shapes


def _views(flat: torch.Tensor, shapes: list[tuple[int, ...]]) -> list[torch.Tensor]:
    views, start = [], 0
    for shape in shapes:
        views.append(flat[start : start + math.prod(shape)].view(shape))
        start += math.prod(shape)
    return views


def tokens_to_device(sequences: list[list[int]], device: torch.device) -> torch.Tensor:
    """The token ids of all `sequences`, one after another, as an int64 tensor (T,) on `device`
    (queued like `to_device`). Why not `to_device`: `torch.tensor` reads a Python list element by
    element, long enough for a document's tokens that the GPU waited for them; `array` reads them
    several times faster, and faster again from one flat list (lists joined by `+=`, then read in
    one go) than through `itertools.chain`."""
    flat: list[int] = []
    for sequence in sequences:
        flat += sequence
    ids = array.array("q", flat)
    return _send(torch.frombuffer(ids, dtype=torch.int64) if ids else torch.zeros(0, dtype=torch.int64), device)


def copy_to_device(target: torch.Tensor, data) -> torch.Tensor:
    """`target.copy_(torch.tensor(data))` into an existing device tensor (a captured graph's input),
    without waiting for the device, as `to_device` does. `data`: nested lists, or a host tensor."""
    host = data if isinstance(data, torch.Tensor) else torch.tensor(data, dtype=target.dtype)
    return target.copy_(host.pin_memory() if target.is_cuda else host, non_blocking=True)
