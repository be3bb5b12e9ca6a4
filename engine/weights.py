"""Checkpoint tensors: safetensors (memory-mapped, sharded too) or pytorch_model.bin (weights only, no pickled code).

Tensors are read one at a time and cast to the engine's dtype and device straight away, so loading
never holds two full copies of the model.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Iterator

import torch

from engine.config import CheckpointError, NllbConfig

# Where the shared embedding may be stored: HF saves tied weights once, under any of these names.
EMBEDDING_NAMES = ("shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight")


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


def _shard_files(model_dir: Path) -> list[Path]:
    """The weight files of a checkpoint, preferring safetensors."""
    for index_name in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        index_path = model_dir / index_name
        if index_path.exists():
            try:
                weight_map = json.loads(index_path.read_text(encoding="utf-8"))["weight_map"]
                names = sorted(set(weight_map.values()))
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
                raise CheckpointError(f"{index_path}: not a valid weight index ({e})") from None
            for name in names:
                if "/" in name or "\\" in name or name.startswith(".."):
                    raise CheckpointError(f"{index_path}: shard name {name!r} points outside the model folder")
                if not (model_dir / name).exists():
                    raise CheckpointError(f"{model_dir / name}: shard listed in {index_name} is missing")
            return [model_dir / name for name in names]
    for name in ("model.safetensors", "pytorch_model.bin"):
        if (model_dir / name).exists():
            return [model_dir / name]
    raise CheckpointError(f"{model_dir}: no model.safetensors or pytorch_model.bin")


def _iter_file(path: Path) -> Iterator[tuple[str, torch.Tensor]]:
    if path.suffix == ".safetensors":
        from safetensors import SafetensorError, safe_open

        try:
            with safe_open(str(path), framework="pt") as f:
                for name in f.keys():
                    yield name, f.get_tensor(name)
        except (SafetensorError, OSError, ValueError) as e:
            raise CheckpointError(f"{path}: unreadable safetensors file ({e}); is it truncated?") from None
    else:
        # weights_only refuses any pickled object that is not a plain tensor container: no code runs.
        try:
            state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except (pickle.UnpicklingError, RuntimeError, OSError, EOFError, ValueError) as e:
            raise CheckpointError(f"{path}: not a plain tensor checkpoint ({str(e).splitlines()[0]})") from None
        if not isinstance(state, dict):
            raise CheckpointError(f"{path}: expected a dict of tensors")
        for name, tensor in state.items():
            if isinstance(tensor, torch.Tensor):
                yield name, tensor


def load_weights(
    model_dir: str | Path, config: NllbConfig, dtype: torch.dtype, device: torch.device
) -> dict[str, torch.Tensor]:
    """All tensors of `expected_shapes(config)` plus 'embed_tokens.weight' and 'lm_head.weight', checked."""
    model_dir = Path(model_dir)
    wanted = expected_shapes(config)
    embedding_shape = (config.vocab_size, config.d_model)
    found: dict[str, torch.Tensor] = {}
    source: dict[str, Path] = {}
    for path in _shard_files(model_dir):
        for raw_name, tensor in _iter_file(path):
            name = _canonical(raw_name)
            if name in EMBEDDING_NAMES or name == "lm_head.weight":
                shape = embedding_shape
            elif name in wanted:
                shape = wanted[name]
            else:
                continue  # e.g. fairseq's embed_positions._float_tensor: positions are computed, not stored
            if tuple(tensor.shape) != shape:
                raise CheckpointError(
                    f"{path}: tensor {raw_name!r} has shape {tuple(tensor.shape)}, expected {shape} for this config.json"
                )
            if name in EMBEDDING_NAMES and "embed_tokens.weight" in found:
                continue  # the tied copies are the same tensor
            key = "embed_tokens.weight" if name in EMBEDDING_NAMES else name
            found[key] = tensor.to(device=device, dtype=dtype)
            source[key] = path
    missing = [n for n in wanted if n not in found]
    if "embed_tokens.weight" not in found:
        if "lm_head.weight" in found:
            found["embed_tokens.weight"] = found["lm_head.weight"]
        else:
            missing.insert(0, "model.shared.weight")
    if missing:
        more = f" (and {len(missing) - 5} more)" if len(missing) > 5 else ""
        raise CheckpointError(f"{model_dir}: missing tensor(s) {', '.join(missing[:5])}{more}; truncated or wrong checkpoint?")
    if config.tie_word_embeddings or "lm_head.weight" not in found:
        found["lm_head.weight"] = found["embed_tokens.weight"]
    return found
