"""int8 weights for the CPU: every projection and the output layer, per output channel.

A CPU decoder step is bound by reading weights from memory (the 256k-row output projection alone
is 1 GB in float32). Stored as int8 with one float scale per output row, each step reads a
quarter of that. Activations are quantised to int8 per row, with that row's own scale, and the
product runs in exact integer arithmetic (oneDNN's int8 linear on prepacked weights where torch
has it, as on x86; torch._int_mm otherwise), so a sentence's result never depends on what else is
in its batch. Results change by what int8 rounding changes; float32 stays the exact reference.
Embedding lookups stay float32 (lookups are cheap).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Sequence

import torch

from dragoman.engine.config import NllbConfig
from dragoman.engine.model import DecoderLayer, EncoderLayer, Linear, NllbModel
from dragoman.engine.weights import expected_shapes

# torch._int_mm's one-row kernel (a matrix-vector product) beats its small-batch kernel several
# times over while the weight stays in cache; integer sums are exact, so both give the same result.
ROW_BY_ROW_ROWS = 8
ROW_BY_ROW_WEIGHT_BYTES = 16 << 20


def int8_supported() -> bool:
    """Whether this torch build multiplies int8 matrices on the CPU."""
    try:
        torch._int_mm(torch.ones(17, 8, dtype=torch.int8), torch.ones(8, 8, dtype=torch.int8))
    except (AttributeError, RuntimeError, NotImplementedError):
        return False
    return True


def onednn_supported() -> bool:
    """Whether this torch build has oneDNN's int8 linear with prepacked weights (x86 builds)."""
    try:
        weight = torch.ops.onednn.qlinear_prepack(torch.ones(8, 8, dtype=torch.int8), None)
        _onednn_linear(torch.ones(2, 8, dtype=torch.uint8), weight, torch.ones(8), torch.zeros(8, dtype=torch.int64))
    except (AttributeError, RuntimeError, NotImplementedError):
        return False
    return True


def _onednn_linear(shifted: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor, zeros: torch.Tensor) -> torch.Tensor:
    """sum_k (shifted[r, k] - 128) * weight[n, k] * scale[n] as float32 (R, N): the integer sums are
    exact. oneDNN's fast kernels take unsigned activations, hence int8 values shifted by 128."""
    return torch.ops.onednn.qlinear_pointwise.default(
        shifted, 1.0, 128, packed, scale, zeros, None, 1.0, 0, torch.float32, "none", [], ""
    )


@dataclass
class Int8Linear:
    weight: torch.Tensor  # (out, in) int8, or oneDNN's prepacked form of it once `pack` made it (`zeros` set)
    scale: torch.Tensor  # (out,) float32: weight row r is weight[r] * scale[r]
    bias: torch.Tensor | None
    zeros: torch.Tensor | None = None  # (out,) int64, the weight's zero points for oneDNN

    @classmethod
    def from_linear(cls, linear: Linear, onednn: bool = False) -> "Int8Linear":
        """The int8 version of `linear`; with `onednn`, its weight prepacked (`pack`)."""
        int8 = cls.of(*quantize_weight(linear.weight), linear.bias)
        if onednn:
            int8.pack()
        return int8

    @classmethod
    def of(cls, quantized: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None) -> "Int8Linear":
        """From `quantize_weight`'s int8 weight (out, in) and scales (out,)."""
        return cls(quantized, scale, None if bias is None else bias.float())

    def pack(self) -> None:
        """Prepack the weight for oneDNN's int8 linear, faster than torch._int_mm at a few rows
        (docs/performance.md "CPU"); the results stay the same to the bit."""
        if self.zeros is None:
            self.weight = torch.ops.onednn.qlinear_prepack(self.weight, None)
            self.zeros = torch.zeros(self.scale.shape, dtype=torch.int64)

    def __call__(self, x: torch.Tensor, relu: bool = False) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])  # (R, in)
        # Each row quantised with its own scale: a row's result never depends on its batch-mates.
        row_scale = rows.abs().amax(dim=1, keepdim=True).clamp_(min=1e-12).div_(127)  # (R, 1)
        quantized = torch.div(rows, row_scale).round_()  # (R, in), integers in [-127, 127]
        if self.zeros is not None:
            out = _onednn_linear(quantized.add_(128).to(torch.uint8), self.weight, self.scale, self.zeros)  # (R, out)
        else:
            quantized = quantized.to(torch.int8)
            weight = self.weight.t()  # (in, out) view
            if rows.shape[0] <= ROW_BY_ROW_ROWS and weight.numel() <= ROW_BY_ROW_WEIGHT_BYTES:
                products = torch.cat([torch._int_mm(quantized[r : r + 1], weight) for r in range(rows.shape[0])])
            else:
                products = torch._int_mm(quantized, weight)  # (R, out) int32
            out = products.float().mul_(self.scale)  # (R, out): the sums scaled as oneDNN scales them
        out = out.mul_(row_scale) if self.bias is None else torch.addcmul(self.bias, out, row_scale)
        if relu:
            out.relu_()
        return out.view(*x.shape[:-1], -1)  # (..., out)

    def holds_weights(self, rows: int) -> bool:
        """As Linear.holds_weights: never, int8 weights run on the CPU."""
        return False


def quantize_weight(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A weight (out, in) as int8 (out, in) and one float32 scale per output row (out,)."""
    weight = weight.float()
    scale = weight.abs().amax(dim=1).clamp(min=1e-12) / 127  # (out,)
    return torch.round(weight / scale[:, None]).to(torch.int8), scale  # (out, in), (out,)


class StoredInt8Unusable(ValueError):
    """The stored int8 weights do not fit the model (damaged or foreign), whose projections were
    not read (`NllbModel.unread`): nothing was replaced."""


def projection_weights(config: NllbConfig) -> frozenset[str]:
    """The checkpoint's names of the weights that `quantize_int8` replaces: every layer's
    projections (the output layer's is the embedding, which lookups read)."""
    return frozenset(name for name in expected_shapes(config)
                     if name.endswith(("_proj.weight", ".fc1.weight", ".fc2.weight")))


def quantize_int8(model: NllbModel, stored: Path | None = None, pack_now: bool = True) -> list[Int8Linear]:
    """Replace every Linear of the model (projections, feed-forward, output layer) by its int8
    version, in place; returns those whose weights are left to prepack for oneDNN (`Int8Linear.pack`),
    the smallest first: none with `pack_now` (or without oneDNN). Prepacking a 600M model takes a
    second of two cores' time, which a start can spend translating first (EngineLoop packs later).

    With `stored`, a safetensors file of the model's int8 weights and scales: read when it holds
    this model's shapes, else written (quantising a 600M model takes seconds, reading its int8
    weights a fraction of one). The caller names the file by the checkpoint it came from, and may
    then leave the projections unread (`projection_weights`: StoredInt8Unusable if the file does
    not serve).
    """
    if model.device.type != "cpu" or model.dtype != torch.float32:
        raise ValueError("int8 weights are for float32 models on the CPU")
    if not int8_supported():
        raise ValueError("this build of torch has no int8 matrix product on the CPU")
    linears = {name: (owner, field) for name, owner, field in _linear_fields(model)}
    quantized = _read_stored(stored, model, linears) if stored is not None else None
    if quantized is None and model.unread:
        raise StoredInt8Unusable(f"{stored}: not int8 weights of this model")
    if quantized is None:
        quantized = {name: quantize_weight(getattr(owner, field).weight) for name, (owner, field) in linears.items()}
        if stored is not None:
            _write_stored(stored, quantized)
    for name, (owner, field) in linears.items():
        setattr(owner, field, Int8Linear.of(*quantized[name], getattr(owner, field).bias))
    model.unread = frozenset()
    # The smallest first: a sentence that comes while one is packed waits for it (the output layer, last, ~0.5 s).
    later = sorted((getattr(owner, field) for owner, field in linears.values()),
                   key=lambda int8: int8.weight.numel()) if onednn_supported() else []
    if pack_now:
        for int8 in later:
            int8.pack()
        return []
    return later


def _linear_fields(model: NllbModel) -> list[tuple[str, object, str]]:
    """(a name for it, the object holding it, its field) for every Linear of the model."""
    found: list[tuple[str, object, str]] = []
    sides: tuple[tuple[str, Sequence[EncoderLayer | DecoderLayer]], ...] = (
        ("encoder", model.encoder_layers), ("decoder", model.decoder_layers))
    for side, layers in sides:
        for number, layer in enumerate(layers):
            found += [(f"{side}.{number}.{f.name}", layer, f.name) for f in fields(layer)
                      if isinstance(getattr(layer, f.name), Linear)]
    return found + [("cross_kv", model, "cross_kv"), ("lm_head", model, "lm_head")]


def _read_stored(path: Path, model: NllbModel, linears: dict) -> dict[str, tuple[torch.Tensor, torch.Tensor]] | None:
    """The stored int8 weights when the file holds every Linear of `model` in its shape; else None
    (a missing, damaged or foreign file is quantised again and replaced)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        tensors = load_file(str(path))
    except (OSError, SafetensorError, ValueError, RuntimeError):
        return None
    stored = {}
    for name, (owner, field) in linears.items():
        weight, scale = tensors.get(f"{name}.weight"), tensors.get(f"{name}.scale")
        shape = getattr(owner, field).weight.shape
        if (weight is None or scale is None or weight.dtype != torch.int8 or scale.dtype != torch.float32
                or weight.shape != shape or scale.shape != shape[:1]):
            return None
        stored[name] = (weight, scale)
    return stored


def _write_stored(path: Path, quantized: dict[str, tuple[torch.Tensor, torch.Tensor]]) -> None:
    """Written under a temporary name and renamed: a reader never sees half a file. A folder that
    cannot be written leaves the model quantised, only not stored."""
    from safetensors.torch import save_file

    tensors = {f"{name}.{part}": t.contiguous() for name, pair in quantized.items() for part, t in zip(("weight", "scale"), pair)}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
        os.close(handle)
    except OSError:
        return
    try:
        save_file(tensors, name, metadata={"format": "dragoman-int8"})
        os.replace(name, path)
    except OSError:
        Path(name).unlink(missing_ok=True)
