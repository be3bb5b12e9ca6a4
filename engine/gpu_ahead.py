"""The GPU's driver and context started while torch is imported (`open_gpu_ahead`), and the
checkpoint's weights copied to the GPU meanwhile (`WeightsUpload`). No torch here.

torch makes the device's primary context on first use, after it is imported: the driver's start
and the context take a warm launch a few tenths of a second (docs/performance.md, "Start-up").
Made by the driver's own calls on a thread of its own, from before torch's import, the context is
the one torch then takes up. The same thread then has Triton hash its own files, which it does
once a process before the first kernel it loads from its disk cache (Triton does not import torch).

The weights' bytes, copied by the driver from the memory-mapped safetensors files to device memory
of their own while torch is imported (which holds the interpreter; the copy does not need it), are
then cast on the GPU by `load_weights`, which frees them: copied after torch's import, through
pageable memory with a cast on the CPU first, they took a warm launch 0.3 s.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import mmap
import os
import struct
import sys
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

from dragoman.engine.config import file_stamp  # (no torch there either)

DRIVER = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
# Device memory the upload leaves free beside the weights' bytes: their cast copy (half of float32's
# bytes in bfloat16, all of them in float32), and more. Without it the weights are read after torch's
# import as before.
UPLOAD_HEADROOM = 1 << 30


def read_ahead(model_dir: str | Path, device: str, gpu: bool = True) -> bool:
    """What a start can do while torch is imported: the model's tokenizer read
    (engine/tokenizer.py's `read_tokenizer_ahead`) and, with `gpu`, the device's context made and
    the weights copied there (`open_gpu_ahead`). Whether the GPU's were started."""
    from dragoman.engine.tokenizer import read_tokenizer_ahead

    read_tokenizer_ahead(model_dir)
    return gpu and open_gpu_ahead(device, model_dir) is not None


def open_gpu_ahead(device: str, model_dir: str | Path | None = None) -> threading.Thread | None:
    """Start the CUDA driver and `device`'s primary context ("auto", "cuda" or "cuda:N"), then
    Triton's key of its own files (`hash_triton`), on a thread of its own, which is returned; with
    `model_dir`, its safetensors files' bytes are copied to the device meanwhile, on another thread,
    for `take_upload`. Nothing for "cpu" or a name torch would refuse, nothing with a build of torch
    without CUDA (the app's CPU package on a machine with a GPU would hold a context for nothing),
    and nothing where the driver is missing or fails: torch starts the GPU itself then, and reports
    what is wrong."""
    if not torch_has_cuda():
        return None
    if device in ("auto", "cuda"):
        index = 0
    elif device.startswith("cuda:") and device.removeprefix("cuda:").isdigit():
        index = int(device.removeprefix("cuda:"))
    else:
        return None
    files = _weight_files(model_dir) if model_dir is not None else []
    thread = threading.Thread(target=_start_gpu, args=(index, files), name="dragoman-gpu-ahead", daemon=True)
    thread.start()
    return thread


def torch_has_cuda() -> bool:
    """Whether the installed torch is a CUDA build, by its library files: torch is not imported."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return False
    lib = Path(next(iter(spec.submodule_search_locations))) / "lib"
    return any(lib.glob("libtorch_cuda*")) or any(lib.glob("torch_cuda*"))  # Linux's, Windows' names


def _start_gpu(index: int, files: list[Path]) -> None:
    context = _retain_primary_context(index)
    if context is None:
        return
    if files:
        uploads: dict[Path, Future[WeightsUpload | None]] = {path: Future() for path in files}
        drop_uploads()  # a model started before and never loaded
        with _uploads_lock:
            _uploads.update({(path.resolve(), index): future for path, future in uploads.items()})
        threading.Thread(target=_upload, args=(context, index, uploads), name="dragoman-weights-ahead",
                         daemon=True).start()
    hash_triton()


def _driver() -> ctypes.CDLL:
    driver = ctypes.CDLL(DRIVER)
    driver.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
    driver.cuMemcpyHtoD_v2.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t]
    driver.cuMemFree_v2.argtypes = [ctypes.c_uint64]
    driver.cuMemGetInfo_v2.argtypes = [ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]
    driver.cuCtxSetCurrent.argtypes = [ctypes.c_void_p]
    return driver


def _retain_primary_context(index: int) -> ctypes.c_void_p | None:
    """The device's primary context, made; None where it could not be."""
    try:
        driver = _driver()
    except (OSError, AttributeError):
        return None  # no NVIDIA driver (a machine without a GPU), or one without these calls
    device, context = ctypes.c_int(), ctypes.c_void_p()
    # Each call releases the interpreter (ctypes): torch's import goes on meanwhile.
    made = (driver.cuInit(0) == 0 and driver.cuDeviceGet(ctypes.byref(device), index) == 0
            # kept for the process, as torch keeps it
            and driver.cuDevicePrimaryCtxRetain(ctypes.byref(context), device) == 0)
    return context if made else None


@dataclass
class WeightsUpload:
    """A safetensors file's tensor bytes in device memory of their own (`pointer`, `size` bytes):
    its header's tensors (name -> (dtype as stored, shape, begin, end), offsets into those bytes)."""

    path: Path
    file_key: tuple | None  # the copied file's `file_stamp`: a file changed since is read again
    device: int
    context: int  # the device's primary context, torch's
    pointer: int
    size: int
    tensors: dict[str, tuple[str, list[int], int, int]]

    def free(self) -> None:
        """Gives the memory back to the driver, once nothing reads it any more (the caller waits for
        the GPU's work on it first)."""
        if self.pointer:
            driver = _driver()
            driver.cuCtxSetCurrent(self.context)  # this thread's already, where torch runs
            driver.cuMemFree_v2(self.pointer)
            self.pointer = 0

    @property
    def __cuda_array_interface__(self) -> dict:
        """The bytes, for torch.as_tensor: a uint8 tensor over them, which owns nothing."""
        return {"shape": (self.size,), "typestr": "|u1", "data": (self.pointer, False), "version": 2}


_uploads: dict[tuple[Path, int], Future[WeightsUpload | None]] = {}  # (file, device) -> its upload
_uploads_lock = threading.Lock()


def take_upload(path: Path, device: int) -> WeightsUpload | None:
    """The upload of `path` to `device` that `open_gpu_ahead` made, once it is done, for the caller
    to read and free; None if none was made (none asked, or it failed, or the file changed since)."""
    with _uploads_lock:
        future = _uploads.pop((path.resolve(), device), None)
    upload = future.result() if future is not None else None
    if upload is not None and upload.file_key != file_stamp(path):
        upload.free()
        return None
    return upload


def drop_uploads() -> None:
    """Frees every upload not taken, once it is done: a model started and never loaded, a file
    `load_weights` did not read."""
    with _uploads_lock:
        left = list(_uploads.values())
        _uploads.clear()
    for future in left:
        future.add_done_callback(_free_result)


def _free_result(done: Future[WeightsUpload | None]) -> None:
    upload = done.result()
    if upload is not None:
        upload.free()


def _weight_files(model_dir: str | Path) -> list[Path]:
    """The checkpoint's safetensors files (none if it has a pytorch_model.bin, or errors: the load
    that follows reports them)."""
    from dragoman.engine.weights import weight_files  # no torch there either

    try:
        return [path for path in weight_files(model_dir) if path.suffix == ".safetensors"]
    except Exception:
        return []


def _upload(context: ctypes.c_void_p, index: int, uploads: dict[Path, Future[WeightsUpload | None]]) -> None:
    """Each file's bytes copied, one driver call each (which lets the interpreter go); a file that
    fails, or that the device has no room for, is left to be read as before (None)."""
    driver = _driver()
    ok = driver.cuCtxSetCurrent(context) == 0
    for path, future in uploads.items():
        upload = None
        try:
            upload = _upload_file(driver, context, index, path) if ok else None
        except Exception:
            upload = None
        future.set_result(upload)


def _upload_file(driver: ctypes.CDLL, context: ctypes.c_void_p, index: int, path: Path) -> WeightsUpload | None:
    key = file_stamp(path)
    with open(path, "rb") as f:
        (header_size,) = struct.unpack("<Q", f.read(8))
        if header_size > 100 << 20:
            return None  # not a header we would read: `load_weights` says what is wrong
        header = json.loads(f.read(header_size))
        start = 8 + header_size
        tensors = {name: (entry["dtype"], entry["shape"], *entry["data_offsets"])
                   for name, entry in header.items() if name != "__metadata__"}
        size = max((end for *_, end in tensors.values()), default=0)
        if size == 0 or os.fstat(f.fileno()).st_size < start + size:
            return None
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        if driver.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)) != 0 or free.value < 2 * size + UPLOAD_HEADROOM:
            return None
        pointer = ctypes.c_uint64()
        if driver.cuMemAlloc_v2(ctypes.byref(pointer), size) != 0:
            return None
        upload = WeightsUpload(path, key, index, context.value or 0, pointer.value, size, tensors)
        copied = False
        try:
            # A private mapping (pages shared with the file's cache until written, which none is),
            # for ctypes to give the driver its address.
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY) as mapped:
                host = ctypes.c_char.from_buffer(mapped, start)
                copied = driver.cuMemcpyHtoD_v2(upload.pointer, ctypes.addressof(host), size) == 0
                del host
        finally:
            if not copied:
                upload.free()
    return upload if copied else None


def hash_triton() -> bool:
    """Have Triton compute the key of its own files (its compiler library, half a gigabyte, among
    them), which it keeps for the process and puts in every kernel's disk-cache key: a few tenths
    of a second that would otherwise fall on the first sentence's first kernel. Hashing releases
    the interpreter. Whether Triton has such a key (nothing where it is missing or fails: its first
    kernel reports what is wrong)."""
    for module in ("triton.runtime.cache", "triton.compiler.compiler"):  # where later and earlier Tritons keep it
        try:
            importlib.import_module(module).triton_key()
            return True
        except Exception:  # not there; or any failure of an optional head start
            continue
    return False
