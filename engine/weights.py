"""Checkpoint tensors: safetensors (memory-mapped, sharded too) or pytorch_model.bin (weights only, no pickled code).

The files' headers are checked first — every tensor the config implies is there, with its shape
and a floating-point dtype — so a config.json that promises more than the files hold is refused
before anything is allocated. Tensors are then read one at a time and cast to the engine's dtype
and device straight away, so loading never holds two full copies of the model; each is checked
for NaN and infinite values on the way (one reduction each, read back once at the end).
"""

from __future__ import annotations

import math
import pickle
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    import torch  # imported where tensors are: the app reads these names before it needs torch (the
    # window's models list as it opens; torch takes over a second to import)

from dragoman.engine.config import CheckpointError, NllbConfig, read_json_object
from dragoman.engine.gpu_ahead import WeightsUpload, drop_uploads, take_upload

# Where the shared embedding may be stored: HF saves tied weights once, under any of these names.
EMBEDDING_NAMES = ("shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight")
SAFETENSORS_INDEX = "model.safetensors.index.json"
PYTORCH_BIN_INDEX = "pytorch_model.bin.index.json"
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
# Stored dtypes the engine casts from: safetensors' names and torch's (the names of `torch`'s own).
FLOAT_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16"}


def expected_shapes(config: NllbConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor the engine needs (names as in HF's M2M100 without the 'model.' prefix), with its shape."""
    C = config.d_model
    shapes: dict[str, tuple[int, ...]] = {}

    def attention(prefix: str) -> None:
        for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
            shapes[f"{prefix}.{proj}.weight"] = (C, C)
            shapes[f"{prefix}.{proj}.bias"] = (C,)

    def norm(prefix: str) -> None:
        shapes[f"{prefix}.weight"] = (C,)
        shapes[f"{prefix}.bias"] = (C,)

    def ffn(prefix: str, ffn_dim: int) -> None:
        shapes[f"{prefix}.fc1.weight"] = (ffn_dim, C)
        shapes[f"{prefix}.fc1.bias"] = (ffn_dim,)
        shapes[f"{prefix}.fc2.weight"] = (C, ffn_dim)
        shapes[f"{prefix}.fc2.bias"] = (C,)

    for i in range(config.encoder_layers):
        p = f"encoder.layers.{i}"
        attention(f"{p}.self_attn")
        norm(f"{p}.self_attn_layer_norm")
        ffn(p, config.encoder_ffn_dim)
        norm(f"{p}.final_layer_norm")
    norm("encoder.layer_norm")
    for i in range(config.decoder_layers):
        p = f"decoder.layers.{i}"
        attention(f"{p}.self_attn")
        norm(f"{p}.self_attn_layer_norm")
        attention(f"{p}.encoder_attn")
        norm(f"{p}.encoder_attn_layer_norm")
        ffn(p, config.decoder_ffn_dim)
        norm(f"{p}.final_layer_norm")
    norm("decoder.layer_norm")
    return shapes


def _canonical(name: str) -> str:
    return name.removeprefix("model.")


def read_weight_map(index_path: Path) -> dict[str, str]:
    """A sharded checkpoint's index: tensor name -> shard file name."""
    weight_map = read_json_object(index_path, CheckpointError, "a sharded checkpoint's index").get("weight_map")
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise CheckpointError(f"{index_path}: weight_map is not an object of shard file names")
    return weight_map


def weight_files(model_dir: str | Path) -> list[Path]:
    """The weight files of a checkpoint (shards listed by an index), preferring safetensors; [] if it has none."""
    model_dir = Path(model_dir)
    for index_name in (SAFETENSORS_INDEX, PYTORCH_BIN_INDEX):
        index_path = model_dir / index_name
        if index_path.is_file():
            names = sorted(set(read_weight_map(index_path).values()))
            for name in names:
                if Path(name).name != name or name in ("", ".", ".."):
                    raise CheckpointError(f"{index_path}: shard name {name!r} points outside the model folder")
                if not (model_dir / name).is_file():
                    raise CheckpointError(f"{model_dir / name}: shard listed in {index_name} is missing")
            return [model_dir / name for name in names]
    return [model_dir / name for name in WEIGHT_FILES if (model_dir / name).is_file()][:1]


def _read_bin(path: Path) -> dict[str, torch.Tensor]:
    # weights_only refuses any pickled object that is not a plain tensor container: no code runs.
    # mmap: the tensors' data stays on disk until it is used.
    import torch

    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except (pickle.UnpicklingError, RuntimeError, OSError, EOFError, ValueError) as e:
        raise CheckpointError(f"{path}: {_bin_problem(path, e)}") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{path}: expected a dict of tensors")
    return {name: tensor for name, tensor in state.items() if isinstance(tensor, torch.Tensor)}


def _bin_problem(path: Path, error: Exception) -> str:
    """What is wrong with a .bin torch.load refused, in one line (PyTorch's own text runs to several)."""
    with open(path, "rb") as f:
        head = f.read(4)
    if not head:
        return "the file is empty"
    if head == b"PK\x03\x04" and not zipfile.is_zipfile(path):
        return "the file is truncated (an incomplete download or copy?): its archive has no end"
    if isinstance(error, pickle.UnpicklingError):  # weights_only refused an object
        return "not a plain tensor checkpoint (it holds Python objects, which are never unpickled)"
    return f"not a PyTorch checkpoint, or a corrupt one ({str(error).splitlines()[0].split('. ')[0]})"


def safetensors_name(bin_shard: str, shards: int) -> str:
    """The safetensors file a .bin weight file becomes: model.safetensors, or for one of several shards
    pytorch_model-00001-of-00003.bin -> model-00001-of-00003.safetensors."""
    if shards == 1:
        return WEIGHT_FILES[0]
    return bin_shard.replace("pytorch_model", "model").removesuffix(".bin") + ".safetensors"


def convert_bin(src: Path, dst: Path) -> None:
    """A pytorch_model.bin written as safetensors. Tied tensors (stored once, under several names) are written once."""
    from safetensors.torch import save_file

    tensors: dict[str, torch.Tensor] = {}
    seen: dict[tuple, str] = {}
    storages: set[int] = set()
    for name, tensor in _read_bin(src).items():
        view = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape), tensor.stride())
        if view in seen:
            continue  # a tied copy: the engine finds it under the first name
        seen[view] = name
        if view[0] in storages or not tensor.is_contiguous():
            tensor = tensor.contiguous().clone()  # shares memory with another tensor: safetensors needs its own
        storages.add(view[0])
        tensors[name] = tensor
    save_file(tensors, str(dst), metadata={"format": "pt"})


def _headers(path: Path) -> Iterator[tuple[str, tuple[int, ...], torch.dtype | str]]:
    """(name, shape, dtype) of each tensor in a weight file, without reading its data (a dtype the
    engine cannot cast from is given by its name)."""
    if path.suffix != ".safetensors":
        for name, tensor in _read_bin(path).items():
            yield name, tuple(tensor.shape), tensor.dtype
        return
    import torch
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            for name in f.keys():
                stored = f.get_slice(name)
                dtype = stored.get_dtype()
                yield name, tuple(stored.get_shape()), getattr(torch, FLOAT_DTYPES[dtype]) if dtype in FLOAT_DTYPES else dtype
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"{path}: unreadable safetensors file ({e}); is it truncated?") from None


@dataclass(frozen=True)
class StoredTensor:
    path: Path
    name: str  # as stored, e.g. 'model.encoder.layers.0.fc1.weight'
    dtype: torch.dtype


def check_weights(model_dir: str | Path, config: NllbConfig) -> dict[str, StoredTensor]:
    """Where each tensor of `load_weights` is stored, from the files' headers only: CheckpointError
    naming the file and the tensor when one is missing, misshapen or not floating-point."""
    import torch

    model_dir = Path(model_dir)
    files = weight_files(model_dir)
    if not files:
        raise CheckpointError(f"{model_dir}: no model.safetensors or pytorch_model.bin")
    wanted = expected_shapes(config)
    embedding_shape: tuple[int, ...] = (config.vocab_size, config.d_model)
    found: dict[str, StoredTensor] = {}
    for path in files:
        for raw_name, shape, dtype in _headers(path):
            name = _canonical(raw_name)
            if name in EMBEDDING_NAMES or name == "lm_head.weight":
                expected = embedding_shape
            elif name in wanted:
                expected = wanted[name]
            else:
                continue  # e.g. fairseq's embed_positions._float_tensor: positions are computed, not stored
            if shape != expected:
                raise CheckpointError(
                    f"{path}: tensor {raw_name!r} has shape {shape}, expected {expected} for this config.json"
                )
            if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
                raise CheckpointError(f"{path}: tensor {raw_name!r} has dtype {dtype}; weights are floating-point")
            key = "embed_tokens.weight" if name in EMBEDDING_NAMES else name
            found.setdefault(key, StoredTensor(path, raw_name, dtype))  # the tied copies are the same tensor
    missing = [n for n in wanted if n not in found]
    if "embed_tokens.weight" not in found and "lm_head.weight" not in found:
        missing.insert(0, "model.shared.weight")
    if missing:
        more = f" (and {len(missing) - 5} more)" if len(missing) > 5 else ""
        raise CheckpointError(f"{model_dir}: missing tensor(s) {', '.join(missing[:5])}{more}; truncated or wrong checkpoint?")
    return found


def _read_tensors(path: Path, names: list[str], device: torch.device) -> Iterator[tuple[str, torch.Tensor]]:
    """Each named tensor of a weight file: read, or, where `open_gpu_ahead` copied the file's bytes
    to `device` while torch was imported, a view of them there, which the caller copies before it
    asks for the next (the bytes are freed after the last)."""
    if path.suffix != ".safetensors":
        state = _read_bin(path)
        for name in names:
            yield name, state[name]
        return
    upload = take_upload(path, device.index or 0) if device.type == "cuda" else None
    if upload is not None:
        if _upload_serves(upload, names):
            yield from _uploaded_tensors(upload, names)
            return
        upload.free()
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            for name in names:
                yield name, f.get_tensor(name)
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"{path}: unreadable safetensors file ({e}); is it truncated?") from None


def _upload_serves(upload: WeightsUpload, names: list[str]) -> bool:
    """Whether the upload's header places every named tensor as a float tensor of its shape, each
    aligned to its size: otherwise the file is read as before, which says what is wrong with it."""
    import torch

    for name in names:
        entry = upload.tensors.get(name)
        if entry is None or entry[0] not in FLOAT_DTYPES:
            return False
        dtype_name, shape, begin, end = entry
        itemsize = getattr(torch, FLOAT_DTYPES[dtype_name]).itemsize
        if not (0 <= begin <= end <= upload.size and begin % itemsize == 0
                and all(isinstance(n, int) and n >= 0 for n in shape) and end - begin == math.prod(shape) * itemsize):
            return False
    return True


def _uploaded_tensors(upload: WeightsUpload, names: list[str]) -> Iterator[tuple[str, torch.Tensor]]:
    import torch

    raw = torch.as_tensor(upload, device=torch.device("cuda", upload.device))  # (size,) uint8, owning nothing
    try:
        yield from upload_views(raw, upload.tensors, names)
    finally:
        torch.cuda.synchronize(raw.device)  # the caller's copies made before the bytes go
        del raw
        upload.free()


def upload_views(raw: torch.Tensor, tensors: dict[str, tuple[str, list[int], int, int]],
                 names: list[str]) -> Iterator[tuple[str, torch.Tensor]]:
    """Each named tensor as a view of `raw`, a safetensors file's data bytes (uint8), placed as its
    header says (`WeightsUpload.tensors`, checked by `_upload_serves`)."""
    import torch

    for name in names:
        dtype_name, shape, begin, end = tensors[name]
        yield name, raw[begin:end].view(getattr(torch, FLOAT_DTYPES[dtype_name])).view(shape)


def load_weights(
    model_dir: str | Path, config: NllbConfig, dtype: torch.dtype, device: torch.device,
    skip: frozenset[str] = frozenset(),
) -> dict[str, torch.Tensor]:
    """All tensors of `expected_shapes(config)` plus 'embed_tokens.weight' and 'lm_head.weight', checked.
    Those named in `skip` (of `expected_shapes`, whose values the caller has from elsewhere) are
    neither read nor checked nor returned."""
    import torch

    stored = check_weights(model_dir, config)
    if config.tie_word_embeddings and "embed_tokens.weight" in stored:
        stored.pop("lm_head.weight", None)  # the embedding serves as the output layer: not read twice
    for key in skip:
        del stored[key]
    by_file: dict[Path, dict[str, str]] = {}  # file -> stored name -> key
    for key, where in stored.items():
        by_file.setdefault(where.path, {})[where.name] = key
    found: dict[str, torch.Tensor] = {}
    extremes: list[torch.Tensor] = []  # per tensor read, (min, max): not finite if any value is not
    for path, keys in by_file.items():
        for raw_name, tensor in _read_tensors(path, list(keys), device):
            weight = tensor.to(device=device, dtype=dtype, copy=tensor.is_cuda)  # (an upload's view: its own copy)
            extremes.append(torch.stack(weight.aminmax()).float())
            found[keys[raw_name]] = weight
    if device.type == "cuda":
        drop_uploads()  # of files none of whose tensors was wanted
    finite = torch.stack(extremes).isfinite().all(dim=1).tolist()
    read = [stored[key] for keys in by_file.values() for key in keys.values()]
    for ok, where in zip(finite, read):
        if not ok:
            narrowed = torch.finfo(where.dtype).max > torch.finfo(dtype).max
            beyond = f" (or values beyond the range of {dtype})" if narrowed else ""
            raise CheckpointError(f"{where.path}: tensor {where.name!r} holds NaN or infinite values{beyond}")
    if "embed_tokens.weight" not in found:
        found["embed_tokens.weight"] = found["lm_head.weight"]
    if config.tie_word_embeddings or "lm_head.weight" not in found:
        found["lm_head.weight"] = found["embed_tokens.weight"]
    return found
