"""int8 weights for the CPU: every projection and the output layer, per output channel.

A CPU decoder step is bound by reading weights from memory (the 256k-row output projection alone
is 1 GB in float32). Stored as int8 with one float scale per output row, each step reads a
quarter of that. Activations are quantised to int8 per row, with that row's own scale, and the
product runs in exact integer arithmetic, so a sentence's result never depends on what else is
in its batch. Three products give the same floats (`Int8Linear`): torch._int_mm on the weight as
it is (a start translates at once), oneDNN's int8 linear on the weight prepacked, and on x86
without VNNI, where oneDNN's is several times slower, fbgemm's, packed in pieces while the engine
has time. Without VNNI the kernels add pairs of products in 16 bits, which saturate: there the
weights take 7 bits (`weight_levels`), so that the sums stay exact. Results change by what int8
rounding changes; float32 stays the exact reference. Embedding lookups stay float32 (lookups are
cheap).
"""

from __future__ import annotations

import functools
import os
import tempfile
import warnings
from dataclasses import fields
from pathlib import Path
from typing import Callable, Sequence

import torch

from dragoman.engine.config import NllbConfig
from dragoman.engine.model import DecoderLayer, EncoderLayer, Linear, NllbModel
from dragoman.engine.weights import expected_shapes

# torch._int_mm's one-row kernel (a matrix-vector product) beats its small-batch kernel several
# times over while the weight stays in cache; integer sums are exact, so both give the same result.
ROW_BY_ROW_ROWS = 8
ROW_BY_ROW_WEIGHT_BYTES = 16 << 20

# Rows of a weight that fbgemm packs at once: the engine's loop packs a piece between steps, and
# packing is slow (the 600M output layer's 256k rows take seconds whole).
FBGEMM_PIECE_ROWS = 8192
# Rows of a weight quantised at once (`quantize_weight`): their float temporaries stay a few megabytes.
QUANTIZE_ROWS = 2048


@functools.cache
def int8_supported() -> bool:
    """Whether this torch build multiplies int8 matrices on the CPU."""
    try:
        torch._int_mm(torch.ones(17, 8, dtype=torch.int8), torch.ones(8, 8, dtype=torch.int8))
    except (AttributeError, RuntimeError, NotImplementedError):
        return False
    return True


@functools.cache
def onednn_supported() -> bool:
    """Whether this torch build has oneDNN's int8 linear with prepacked weights (x86 builds)."""
    try:
        product = OneDnnProduct(torch.ones(8, 8, dtype=torch.int8), torch.ones(8))
        product(torch.ones(2, 8))
    except (AttributeError, RuntimeError, NotImplementedError):
        return False
    return True


@functools.cache
def fbgemm_supported() -> bool:
    """Whether this torch build has fbgemm's int8 linear (x86 builds; its quantized tensors are
    deprecated, and may go)."""
    try:
        product = FbgemmProduct(torch.ones(8))
        product.pack_piece(torch.ones(8, 8, dtype=torch.int8), 0)
        product(torch.ones(2, 8))
    except (AttributeError, RuntimeError, NotImplementedError):
        return False
    return True


@functools.cache
def pairs_saturate() -> bool:
    """Whether this CPU's int8 products add each pair of products in 16 bits, with saturation:
    x86 without VNNI (AVX2 alone, as in many desktops and laptops; vpmaddubsw), where two products
    of 255 x 127 overflow. Seen by multiplying such pairs, with oneDNN's and fbgemm's products."""
    weight = torch.full((64, 256), 127, dtype=torch.int8)
    rows = torch.full((4, 256), 127.0)  # shifted by 128 to 255 (OneDnnProduct, FbgemmProduct)
    exact = rows @ weight.float().t()  # (4, 64): 256 * 127 * 127, exact in float32
    for supported, product in ((onednn_supported, lambda: OneDnnProduct(weight, torch.ones(64))),
                               (fbgemm_supported, lambda: Int8Linear(weight, torch.ones(64), None).packed_for_fbgemm())):
        if supported() and not torch.equal(product()(rows), exact):
            return True
    return False


def weight_levels() -> int:
    """The int8 weights' range, [-levels, levels]: 63 where pairs of products saturate (two of
    255 x 63 fit 16 bits: the sums stay exact), else 127."""
    return 63 if pairs_saturate() else 127


def fbgemm_serves() -> bool:
    """Whether fbgemm's product is the one to run on this CPU: without VNNI (`pairs_saturate`)
    oneDNN's int8 linear reads the weight several times slower (docs/performance.md, "CPU")."""
    return pairs_saturate() and fbgemm_supported()


class IntMMProduct:
    """torch._int_mm on the int8 weight as it is: no packing, so a start can translate at once."""

    def __init__(self, weight: torch.Tensor, scale: torch.Tensor):
        self.weight, self.scale = weight, scale  # (out, in) int8, (out,) float32

    def __call__(self, quantized: torch.Tensor) -> torch.Tensor:
        """sum_k quantized[r, k] * weight[n, k] * scale[n] as float32 (R, out), for integers in
        [-127, 127] (R, in): the integer sums are exact."""
        rows = quantized.to(torch.int8)
        weight = self.weight.t()  # (in, out) view
        if rows.shape[0] <= ROW_BY_ROW_ROWS and weight.numel() <= ROW_BY_ROW_WEIGHT_BYTES:
            products = torch.cat([torch._int_mm(rows[r : r + 1], weight) for r in range(rows.shape[0])])
        else:
            products = torch._int_mm(rows, weight)  # (R, out) int32
        return products.float().mul_(self.scale)  # (R, out): the sums scaled as oneDNN scales them


class OneDnnProduct:
    """oneDNN's int8 linear on the weight prepacked: faster than torch._int_mm at a few rows,
    the same floats."""

    def __init__(self, weight: torch.Tensor, scale: torch.Tensor):
        self.packed = torch.ops.onednn.qlinear_prepack(weight, None)
        self.scale = scale
        self.zeros = torch.zeros(scale.shape, dtype=torch.int64)  # (out,), the weight's zero points

    def __call__(self, quantized: torch.Tensor) -> torch.Tensor:
        # oneDNN's fast kernels take unsigned activations, hence the integers shifted by 128.
        shifted = quantized.add(128).to(torch.uint8)  # (R, in)
        return torch.ops.onednn.qlinear_pointwise.default(
            shifted, 1.0, 128, self.packed, self.scale, self.zeros, None, 1.0, 0, torch.float32, "none", [], ""
        )  # (R, out)


class FbgemmProduct:
    """fbgemm's int8 linear, the weight packed in pieces of FBGEMM_PIECE_ROWS rows (`pack_piece`):
    the same floats as oneDNN's and torch._int_mm's.

    fbgemm quantises its input with one scale for the whole batch, from its least and greatest
    values; two columns more, of -128 and 127 (against weight columns of zeros), make those fixed,
    so that the scale is 1 and the zero point 128 whatever the rows: each row's integers reach the
    product as they are, and a row's result never depends on its batch-mates."""

    def __init__(self, scale: torch.Tensor):
        """Nothing packed yet: `pack_piece` each of `pieces`."""
        self.scale = scale  # (out,) float32
        pieces = -(-scale.shape[0] // FBGEMM_PIECE_ROWS)
        self.pieces: list[object] = [None] * pieces  # fbgemm's packed weights, rows [i * N, (i + 1) * N)

    @property
    def packed(self) -> bool:
        return all(piece is not None for piece in self.pieces)

    def pack_piece(self, weight: torch.Tensor, i: int) -> None:
        """Pack the weight's rows of piece `i` ((out, in) int8)."""
        rows = slice(i * FBGEMM_PIECE_ROWS, (i + 1) * FBGEMM_PIECE_ROWS)
        piece = weight[rows]  # (n, in)
        anchored = torch.cat([piece, piece.new_zeros(piece.shape[0], 2)], dim=1)  # (n, in + 2)
        engine = torch.backends.quantized.engine  # "x86" may pack for oneDNN: the packing says whose product runs
        torch.backends.quantized.engine = "fbgemm"
        try:
            with warnings.catch_warnings():  # quantized tensors are deprecated: torch's warning to give, not ours
                warnings.simplefilter("ignore")
                quantized = torch._make_per_channel_quantized_tensor(
                    anchored, self.scale[rows].double(), torch.zeros(piece.shape[0], dtype=torch.int64), 0)
                self.pieces[i] = torch.ops.quantized.linear_prepack(quantized, None)
        finally:
            torch.backends.quantized.engine = engine

    def __call__(self, quantized: torch.Tensor) -> torch.Tensor:
        anchors = quantized.new_tensor([-128.0, 127.0]).expand(quantized.shape[0], 2)  # (R, 2)
        anchored = torch.cat([quantized, anchors], dim=1)  # (R, in + 2)
        outs = [torch.ops.quantized.linear_dynamic(anchored, piece, False) for piece in self.pieces]  # (R, n) each
        return outs[0] if len(outs) == 1 else torch.cat(outs, dim=1)  # (R, out)


Int8Product = IntMMProduct | OneDnnProduct | FbgemmProduct


class Int8Linear:
    """A Linear as int8 weights, one float32 scale per output row (`quantize_weight`). Its product
    starts as torch._int_mm's (`IntMMProduct`), and `packing()` gives the work that makes it
    faster, a piece at a time: oneDNN's, or where fbgemm serves this CPU (`fbgemm_serves`),
    fbgemm's. Every product gives the same floats, so the engine swaps them while it runs."""

    def __init__(self, weight: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None):
        self.scale = scale  # (out,) float32: weight row r is weight[r] * scale[r]
        self.bias = bias
        self.shape = weight.shape  # (out, in)
        self.product: Int8Product = IntMMProduct(weight, scale)

    @classmethod
    def from_linear(cls, linear: Linear, product: str = "int_mm") -> Int8Linear:
        """The int8 version of `linear`, its product "int_mm", "onednn" or "fbgemm" (packed now)."""
        int8 = cls.of(*quantize_weight(linear.weight), linear.bias)
        if product == "onednn":
            int8.pack_onednn()
        elif product == "fbgemm":
            int8.packed_for_fbgemm()
        return int8

    @classmethod
    def of(cls, quantized: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None) -> Int8Linear:
        """From `quantize_weight`'s int8 weight (out, in) and scales (out,)."""
        return cls(quantized, scale, None if bias is None else bias.float())

    def pack_onednn(self) -> None:
        """Prepack the weight for oneDNN's product, now (a fraction of a second for a 600M model's)."""
        if isinstance(self.product, IntMMProduct):
            self.product = OneDnnProduct(self.product.weight, self.scale)

    def packed_for_fbgemm(self) -> FbgemmProduct:
        """fbgemm's product of this weight, packed now."""
        for piece in self.packing(fbgemm=True):
            piece()
        assert isinstance(self.product, FbgemmProduct)
        return self.product

    def packing(self, fbgemm: bool) -> list[Callable[[], None]]:
        """The work that makes this product faster, in pieces: fbgemm's (its product swapped in once
        the last piece is packed; the int8 weight kept meanwhile), else oneDNN's prepacking."""
        if not fbgemm:
            return [self.pack_onednn]
        if not isinstance(self.product, IntMMProduct):
            raise ValueError("fbgemm packs the int8 weight: pack before any other product")
        weight, fbgemm_product = self.product.weight, FbgemmProduct(self.scale)

        def pack_piece(i: int) -> None:
            fbgemm_product.pack_piece(weight, i)
            if fbgemm_product.packed:
                self.product = fbgemm_product

        return [functools.partial(pack_piece, i) for i in range(len(fbgemm_product.pieces))]

    def __call__(self, x: torch.Tensor, relu: bool = False) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])  # (R, in)
        # Each row quantised with its own scale: a row's result never depends on its batch-mates.
        row_scale = rows.abs().amax(dim=1, keepdim=True).clamp_(min=1e-12).div_(127)  # (R, 1)
        quantized = torch.div(rows, row_scale).round_()  # (R, in), integers in [-127, 127]
        out = self.product(quantized)  # (R, out)
        out = out.mul_(row_scale) if self.bias is None else torch.addcmul(self.bias, out, row_scale)
        if relu:
            out.relu_()
        return out.view(*x.shape[:-1], -1)  # (..., out)

    def holds_weights(self, rows: int) -> bool:
        """As Linear.holds_weights: never, int8 weights run on the CPU."""
        return False


def quantize_weight(weight: torch.Tensor, levels: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """A weight (out, in) as int8 (out, in) in [-levels, levels] (`weight_levels()` unless told)
    and one float32 scale per output row (out,). Done QUANTIZE_ROWS rows at a time: whole, the
    output layer's float temporaries are a gigabyte each, and a first start on the CPU spent twice
    as long writing and faulting them in (docs/performance.md, "Start-up")."""
    levels = weight_levels() if levels is None else levels
    quantized = torch.empty(weight.shape, dtype=torch.int8, device=weight.device)  # (out, in)
    scale = torch.empty(weight.shape[0], dtype=torch.float32, device=weight.device)  # (out,)
    for start in range(0, weight.shape[0], QUANTIZE_ROWS):
        rows = weight[start:start + QUANTIZE_ROWS].float()  # (n, in)
        row_scale = rows.abs().amax(dim=1).clamp_(min=1e-12).div_(levels)  # (n,)
        scale[start:start + QUANTIZE_ROWS] = row_scale
        quantized[start:start + QUANTIZE_ROWS] = (rows / row_scale[:, None]).round_()
    return quantized, scale


class StoredInt8Unusable(ValueError):
    """The stored int8 weights do not fit the model (damaged or foreign), whose projections were
    not read (`NllbModel.unread`): nothing was replaced."""


def projection_weights(config: NllbConfig) -> frozenset[str]:
    """The checkpoint's names of the weights that `quantize_int8` replaces: every layer's
    projections (the output layer's is the embedding, which lookups read)."""
    return frozenset(name for name in expected_shapes(config)
                     if name.endswith(("_proj.weight", ".fc1.weight", ".fc2.weight")))


def quantize_int8(model: NllbModel, stored: Path | None = None, pack_now: bool = True) -> list[Callable[[], None]]:
    """Replace every Linear of the model (projections, feed-forward, output layer) by its int8
    version, in place; returns the work left that makes their products faster (`Int8Linear.packing`),
    in pieces, the smallest weights first: none with `pack_now`. Prepacking a 600M model for oneDNN
    takes a second of two cores' time, which a start can spend translating first (EngineLoop packs
    later). Where fbgemm serves the CPU (`fbgemm_serves`: torch._int_mm is slower there than oneDNN
    by an order of magnitude) the weights are prepacked for oneDNN now, and fbgemm's packing, ten
    times longer, is what is left.

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
    int8s = []
    for name, (owner, field) in linears.items():
        int8s.append(Int8Linear.of(*quantized[name], getattr(owner, field).bias))
        setattr(owner, field, int8s[-1])
    model.unread = frozenset()
    # The smallest first: a sentence that comes while one is packed waits for it (the output layer, last, ~0.5 s).
    int8s.sort(key=lambda int8: int8.shape.numel())
    fbgemm, onednn = fbgemm_serves(), onednn_supported()
    later = [piece for int8 in int8s for piece in int8.packing(fbgemm)] if fbgemm or onednn else []
    if fbgemm and onednn:
        for int8 in int8s:
            int8.pack_onednn()
    if pack_now:
        for piece in later:
            piece()
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
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="pt") as stored_file:
            # Written before the range was recorded: 127.
            if (stored_file.metadata() or {}).get("levels", "127") != str(weight_levels()):
                return None  # quantised for a CPU of another kind
            tensors = {name: stored_file.get_tensor(name) for name in stored_file.keys()}
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
        save_file(tensors, name, metadata={"format": "dragoman-int8", "levels": str(weight_levels())})
        os.replace(name, path)
    except OSError:
        Path(name).unlink(missing_ok=True)
