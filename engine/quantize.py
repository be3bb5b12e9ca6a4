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

from dataclasses import dataclass, fields

import torch

from dragoman.engine.model import Linear, NllbModel

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
    weight: torch.Tensor  # (out, in) int8, or oneDNN's prepacked form of it when `zeros` is set
    scale: torch.Tensor  # (out,) float32: weight row r is weight[r] * scale[r]
    bias: torch.Tensor | None
    zeros: torch.Tensor | None = None  # (out,) int64, the weight's zero points for oneDNN

    @classmethod
    def from_linear(cls, linear: Linear, onednn: bool = False) -> "Int8Linear":
        """The int8 version of `linear`; with `onednn`, its weight prepacked for oneDNN's int8 linear
        (faster than torch._int_mm at a few rows, docs/performance.md "CPU")."""
        weight = linear.weight.float()
        scale = weight.abs().amax(dim=1).clamp(min=1e-12) / 127  # (out,)
        quantized = torch.round(weight / scale[:, None]).to(torch.int8)  # (out, in)
        bias = None if linear.bias is None else linear.bias.float()
        if onednn:
            zeros = torch.zeros(scale.shape, dtype=torch.int64)
            return cls(torch.ops.onednn.qlinear_prepack(quantized, None), scale, bias, zeros)
        return cls(quantized, scale, bias)

    def __call__(self, x: torch.Tensor, relu: bool = False) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])  # (R, in)
        # Each row quantised with its own scale: a row's result never depends on its batch-mates.
        row_scale = rows.abs().amax(dim=1, keepdim=True).clamp_(min=1e-12).div_(127)  # (R, 1)
        quantized = torch.div(rows, row_scale).round_()  # (R, in), integers in [-127, 127]
        if self.zeros is not None:
            out = _onednn_linear(quantized.add_(128).to(torch.uint8), self.weight, self.scale, self.zeros)  # (R, out)
            out = out.mul_(row_scale) if self.bias is None else torch.addcmul(self.bias, out, row_scale)
        else:
            quantized = quantized.to(torch.int8)
            weight = self.weight.t()  # (in, out) view
            if rows.shape[0] <= ROW_BY_ROW_ROWS and weight.numel() <= ROW_BY_ROW_WEIGHT_BYTES:
                products = torch.cat([torch._int_mm(quantized[r : r + 1], weight) for r in range(rows.shape[0])])
            else:
                products = torch._int_mm(quantized, weight)  # (R, out) int32
            out = products.float() * row_scale * self.scale  # (R, out)
            if self.bias is not None:
                out += self.bias
        if relu:
            out.relu_()
        return out.view(*x.shape[:-1], -1)  # (..., out)

    def holds_weights(self, rows: int) -> bool:
        """As Linear.holds_weights: never, int8 weights run on the CPU."""
        return False


def quantize_int8(model: NllbModel) -> None:
    """Replace every Linear of the model (projections, feed-forward, output layer) by its int8 version, in place."""
    if model.device.type != "cpu" or model.dtype != torch.float32:
        raise ValueError("int8 weights are for float32 models on the CPU")
    if not int8_supported():
        raise ValueError("this build of torch has no int8 matrix product on the CPU")
    onednn = onednn_supported()
    for layer in [*model.encoder_layers, *model.decoder_layers]:
        for f in fields(layer):
            value = getattr(layer, f.name)
            if isinstance(value, Linear):
                setattr(layer, f.name, Int8Linear.from_linear(value, onednn))
    model.cross_kv = Int8Linear.from_linear(model.cross_kv, onednn)
    model.lm_head = Int8Linear.from_linear(model.lm_head, onednn)
