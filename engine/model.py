"""The NLLB (M2M100) transformer, bottom-up: embeddings, attention, layers, encoder, one decoder step.

Pre-norm layers with final layer norms, ReLU feed-forward, sinusoidal positions offset by
padding_idx + 1, embeddings scaled by sqrt(d_model), output projection tied to the embedding.
No training code. The decoder runs one token per row per step over a paged self-attention cache;
cross-attention K/V are computed once per source sentence and read from their own paged cache.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from dragoman import kernels
from dragoman.engine.config import NllbConfig
from dragoman.engine.device import to_device
from dragoman.engine.kv_cache import PagedKVCache
from dragoman.engine.packing import packed_positions
from dragoman.engine.weights import expected_shapes
from dragoman.kernels.source_scores import BLOCK_M as SOURCE_SCORES_ROWS

if TYPE_CHECKING:
    from dragoman.engine.lora_layers import LoraRows

LAYER_NORM_EPS = 1e-5
# Projections of at most FUSED_MAX_ROWS rows and FUSED_MAX_IN inputs (a decode step of a typed
# sentence) in half precision run through kernels.fused_linear: one pass over the weight, where
# cuBLAS at a few rows splits K and reduces in a second kernel. Up to 64 rows (a typed sentence's
# encoder, a few sentences' beams) fused_linear reads each weight block once for all of them
# (kernels.fused_linear's wide row block), which beats cuBLAS on a short document's steps and the
# typed sentence's encoder too (docs/performance.md). float32 keeps cuBLAS's exact float32 matmuls,
# the parity target.
FUSED_MAX_ROWS = 64
FUSED_MAX_IN = 8192
FUSED_DTYPES = (torch.bfloat16, torch.float16)
# A typed sentence's source of at most FOLD_SLOTS[-1] tokens is folded into the cross-attention
# (FoldedSources), padded to the first of these that holds it. Past ~head_dim tokens a head's folded
# keys and values outweigh W_q and W_o, yet the fold still saves a kernel a layer and stays faster
# at 64 and at 128 (docs/performance.md); 64 holds most typed sentences, and a slot of 128 would
# double the buffers.
FOLD_SLOTS = (16, 32, 64)
FOLD_MAX_ROWS = SOURCE_SCORES_ROWS  # the rows kernels.source_scores scores in one tile


def sinusoidal_positions(num_positions: int, dim: int, padding_idx: int) -> torch.Tensor:
    """fairseq's table (tensor2tensor layout: all sines, then all cosines); the padding row is zero."""
    half = dim // 2
    step = math.log(10000) / (half - 1)
    freqs = torch.exp(torch.arange(half, dtype=torch.int64).float() * -step)
    angles = torch.arange(num_positions, dtype=torch.int64).float().unsqueeze(1) * freqs.unsqueeze(0)
    table = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)  # (P, 2 * half)
    if dim % 2:
        table = torch.cat([table, torch.zeros(num_positions, 1)], dim=1)  # (P, dim)
    table[padding_idx] = 0
    return table


# Every backend but cuDNN's: it plans anew for each (sources, width) shape, at the cost of many
# steps each time, and with continuous batching nearly every admission brings a new shape.
ENCODER_ATTENTION = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


@dataclass
class Linear:
    weight: torch.Tensor  # (out, in)
    bias: torch.Tensor | None

    def __call__(self, x: torch.Tensor, relu: bool = False) -> torch.Tensor:
        """x @ weight.T + bias, then ReLU if asked."""
        if x.dim() == 2 and self._fused(x.shape[0], x.dtype):
            return kernels.fused_linear(x, self.weight, self.bias, relu=relu)
        if relu and x.is_cuda and x.dim() == 2 and self.bias is not None and x.dtype in FUSED_DTYPES:
            return torch._addmm_activation(self.bias, x, self.weight.t())  # ReLU in cuBLASLt's epilogue
        y = F.linear(x, self.weight, self.bias)
        return F.relu(y) if relu else y

    def _fused(self, rows: int, dtype: torch.dtype) -> bool:
        """Whether `rows` rows of `dtype` go through kernels.fused_linear."""
        return rows <= FUSED_MAX_ROWS and self.weight.shape[1] <= FUSED_MAX_IN and dtype in FUSED_DTYPES

    def holds_weights(self, rows: int) -> bool:
        """Whether self(x) of `rows` rows loads its weights before it waits for x, on the GPU: a
        layer norm before it may then let it start early (`lead`, kernels/_triton.py)."""
        w = self.weight
        return w.is_cuda and self._fused(rows, w.dtype) and kernels.fused_linear_holds_weights(w, rows)


@dataclass
class LayerNorm:
    weight: torch.Tensor
    bias: torch.Tensor

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, x.shape[-1:], self.weight, self.bias, LAYER_NORM_EPS)

    def add(self, delta: torch.Tensor, residual: torch.Tensor, lead: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """(residual + delta, its layer norm) in one fused pass: the pre-norm residual stream's step.
        `lead`: what follows is a projection that holds its weights (Linear.holds_weights)."""
        return kernels.add_layer_norm(delta, residual, self.weight, self.bias, LAYER_NORM_EPS, lead)


def project(linear: Linear, x: torch.Tensor, lora: LoraRows | None, site: str, relu: bool = False) -> torch.Tensor:
    """linear(x), plus each row's LoRA delta for the module(s) computed at `site` (engine/lora_layers.py),
    then ReLU if asked."""
    if lora is None:
        return linear(x, relu)
    y = linear(x)
    lora.add(site, x, y)
    return F.relu(y) if relu else y


def normalize(norm: LayerNorm, x: torch.Tensor, lora: LoraRows | None, site: str) -> torch.Tensor:
    """norm(x), with each row's adapter's own copy of the norm where it has one (modules_to_save)."""
    h = norm(x)
    return h if lora is None else lora.norm(site, x, h)


def leads_into(then: Linear | None, rows: int) -> bool:
    """Whether a layer norm of `rows` rows may let `then`, the projection after it, start before it
    waits (`lead`): where that projection holds its weights."""
    return then is not None and then.holds_weights(rows)


def add_normalize(
    norm: LayerNorm, delta: torch.Tensor, residual: torch.Tensor, lora: LoraRows | None, site: str,
    then: Linear | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """norm.add(delta, residual), with the adapters' own copies of the norm as in `normalize`.
    `then`: the projection that follows, which may start early where it holds its weights."""
    x, h = norm.add(delta, residual, lead=leads_into(then, residual.shape[0]))
    return x, (h if lora is None else lora.norm(site, x, h))


@dataclass(frozen=True)
class LoraSites:
    """A layer's LoRA sites (engine/lora_layers.py `fused_sites`): what its projections ask for
    deltas by, and its norms for an adapter's own copies; named once, as the model is built."""

    self_attn_norm: str
    qkv: str
    self_attn_out: str
    ffn_norm: str
    fc1: str
    fc2: str
    next_norm: str  # the norm after the layer: the next layer's first, or the side's final one
    cross_attn_norm: str = ""
    cross_q: str = ""
    cross_out: str = ""

    @classmethod
    def of(cls, side: str, i: int, layers: int) -> "LoraSites":
        """Layer i of the `layers` of `side` ("encoder" or "decoder")."""
        p = f"{side}.layers.{i}"
        cross = {}
        if side == "decoder":
            cross = dict(cross_attn_norm=f"{p}.encoder_attn_layer_norm", cross_q=f"{p}.encoder_attn.q_proj",
                         cross_out=f"{p}.encoder_attn.out_proj")
        next_norm = f"{side}.layer_norm" if i + 1 == layers else f"{side}.layers.{i + 1}.self_attn_layer_norm"
        return cls(f"{p}.self_attn_layer_norm", f"{p}.self_attn.qkv", f"{p}.self_attn.out_proj",
                   f"{p}.final_layer_norm", f"{p}.fc1", f"{p}.fc2", next_norm, **cross)


CROSS_KV_SITE = "decoder.cross_kv"  # every decoder layer's cross-attention K and V, one matmul


@dataclass
class EncoderLayer:
    sites: LoraSites
    self_attn_norm: LayerNorm
    qkv: Linear  # q, k and v projections stacked: one matmul
    self_attn_out: Linear
    ffn_norm: LayerNorm
    fc1: Linear
    fc2: Linear


@dataclass
class DecoderLayer:
    sites: LoraSites
    self_attn_norm: LayerNorm
    qkv: Linear
    self_attn_out: Linear
    cross_attn_norm: LayerNorm
    cross_q: Linear
    cross_out: Linear
    ffn_norm: LayerNorm
    fc1: Linear
    fc2: Linear


class NllbModel:
    def __init__(self, config: NllbConfig, weights: dict[str, torch.Tensor], max_positions: int,
                 unread: frozenset[str] = frozenset()):
        """`unread`: the projections' weights left out of `weights` (`quantize.projection_weights`),
        for `quantize_int8` to replace from its stored int8 weights: meanwhile each Linear holds
        memory of its weight's shape, uninitialised and untouched."""
        self.config = config
        self.max_positions = max_positions  # decoder and source lengths the engine's tables are sized for
        self.unread = unread
        w = weights
        shapes = expected_shapes(config) if unread else {}

        def stacked_weight(names: list[str]) -> torch.Tensor:
            if not unread.intersection(names):
                return torch.cat([w[name] for name in names]) if len(names) > 1 else w[names[0]]
            rows = sum(shapes[name][0] for name in names)
            embedding = w["embed_tokens.weight"]
            return torch.empty(rows, shapes[names[0]][1], dtype=embedding.dtype, device=embedding.device)  # (rows, in)

        def linear(name: str) -> Linear:
            return Linear(stacked_weight([f"{name}.weight"]), w[f"{name}.bias"])

        def stacked(prefix: str, projections: tuple[str, ...]) -> Linear:
            return Linear(
                stacked_weight([f"{prefix}.{p}.weight" for p in projections]),
                torch.cat([w[f"{prefix}.{p}.bias"] for p in projections]),
            )

        def norm(name: str) -> LayerNorm:
            return LayerNorm(w[f"{name}.weight"], w[f"{name}.bias"])

        self.embed_tokens = w["embed_tokens.weight"]
        output = w["lm_head.weight"]  # tied: the embedding matrix itself
        vocab = config.vocab_size
        if output.is_cuda and vocab % 64:
            # Logits rows of 256,206 bf16 values are not 16-byte aligned, which keeps cuBLAS off its
            # fastest kernels (docs/performance.md). Pad the projection with zero rows; decode_step
            # slices their logits off.
            padded = output.new_zeros(-(-vocab // 64) * 64, output.shape[1])  # (V rounded up, C)
            padded[:vocab] = output
            if output is self.embed_tokens:
                self.embed_tokens = padded[:vocab]
            output = padded
        self.lm_head = Linear(output, None)
        self.embed_scale = math.sqrt(config.d_model) if config.scale_embedding else 1.0
        device, dtype = self.embed_tokens.device, self.embed_tokens.dtype
        # Row p is position p; tokens start at padding_idx + 1 (HF computes in float32, then casts).
        self.positions = sinusoidal_positions(max_positions + config.pad_id + 2, config.d_model, config.pad_id).to(
            device=device, dtype=dtype
        )
        qkv = ("q_proj", "k_proj", "v_proj")
        self.encoder_layers = [
            EncoderLayer(
                sites=LoraSites.of("encoder", i, config.encoder_layers),
                self_attn_norm=norm(f"encoder.layers.{i}.self_attn_layer_norm"),
                qkv=stacked(f"encoder.layers.{i}.self_attn", qkv),
                self_attn_out=linear(f"encoder.layers.{i}.self_attn.out_proj"),
                ffn_norm=norm(f"encoder.layers.{i}.final_layer_norm"),
                fc1=linear(f"encoder.layers.{i}.fc1"),
                fc2=linear(f"encoder.layers.{i}.fc2"),
            )
            for i in range(config.encoder_layers)
        ]
        self.encoder_norm = norm("encoder.layer_norm")
        self.decoder_layers = [
            DecoderLayer(
                sites=LoraSites.of("decoder", i, config.decoder_layers),
                self_attn_norm=norm(f"decoder.layers.{i}.self_attn_layer_norm"),
                qkv=stacked(f"decoder.layers.{i}.self_attn", qkv),
                self_attn_out=linear(f"decoder.layers.{i}.self_attn.out_proj"),
                cross_attn_norm=norm(f"decoder.layers.{i}.encoder_attn_layer_norm"),
                cross_q=linear(f"decoder.layers.{i}.encoder_attn.q_proj"),
                cross_out=linear(f"decoder.layers.{i}.encoder_attn.out_proj"),
                ffn_norm=norm(f"decoder.layers.{i}.final_layer_norm"),
                fc1=linear(f"decoder.layers.{i}.fc1"),
                fc2=linear(f"decoder.layers.{i}.fc2"),
            )
            for i in range(config.decoder_layers)
        ]
        self.decoder_norm = norm("decoder.layer_norm")
        # K and V of every decoder layer's cross-attention in one matrix: the encoder output is
        # projected for all layers with a single matmul when a sentence is admitted.
        kv_names = [f"decoder.layers.{i}.encoder_attn.{p}" for i in range(config.decoder_layers) for p in ("k_proj", "v_proj")]
        self.cross_kv = Linear(
            stacked_weight([f"{n}.weight" for n in kv_names]), torch.cat([w[f"{n}.bias"] for n in kv_names])
        )
        # (cross_projections): W_q, b_q, W_o, b_o
        self._cross_projections: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor] | None = None
        self.heads = config.decoder_heads
        self.head_dim = config.d_model // config.decoder_heads
        self.scale = self.head_dim**-0.5

    def cross_projections(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Every decoder layer's cross-attention q and output projections stacked: W_q (L, C, C), b_q
        (L, C), W_o (L, C, C), b_o (L, C). Stacked on the first call, after which the layers'
        own weights are views of the stacks (no second copy)."""
        if self._cross_projections is None:
            q = [layer.cross_q for layer in self.decoder_layers]
            out = [layer.cross_out for layer in self.decoder_layers]
            w_q, b_q, w_o, b_o = (torch.stack([getattr(linear, part) for linear in linears])
                                  for linears in (q, out) for part in ("weight", "bias"))
            self._cross_projections = (w_q, b_q, w_o, b_o)
            for i, (q_i, out_i) in enumerate(zip(q, out)):
                q_i.weight, q_i.bias, out_i.weight, out_i.bias = (stack[i] for stack in self._cross_projections)
        return self._cross_projections

    @property
    def device(self) -> torch.device:
        return self.embed_tokens.device

    @property
    def dtype(self) -> torch.dtype:
        return self.embed_tokens.dtype

    def ensure_positions(self, max_index: int) -> None:
        """Grow the position table to cover `max_index` (HF grows its table the same way)."""
        if max_index >= self.positions.shape[0]:
            table = sinusoidal_positions(2 * max_index, self.config.d_model, self.config.pad_id)
            self.positions = table.to(device=self.device, dtype=self.dtype)

    def embed(
        self, tokens: torch.Tensor, positions: torch.Tensor, norm: LayerNorm, lora: LoraRows | None, site: str,
        then: Linear | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The scaled token embeddings plus those of their positions (0 for a sentence's first
        token), and their first layer norm (`normalize`): (x, h), (N, C) each. `then` as in
        `add_normalize`."""
        x, h = kernels.embed_layer_norm(tokens, positions, self.embed_tokens, self.embed_scale, self.positions,
                                        self.config.pad_id + 1, norm.weight, norm.bias, LAYER_NORM_EPS,
                                        leads_into(then, tokens.shape[0]))
        return x, (h if lora is None else lora.norm(site, x, h))

    # -- encoder ---------------------------------------------------------------------------------

    def encode(self, tokens: torch.Tensor, lengths: list[int], lora: LoraRows | None = None) -> torch.Tensor:
        """Sources packed one after another, tokens (T,) with their lengths (T = sum(lengths)) ->
        final hidden states (T, C) in the same order.

        Everything runs on the T real tokens, with no padding (a document's sentences vary in
        length, and padding would be much of the encoder's work), but attention where
        kernels.packed_attention cannot run, which runs on a padded grid. `lora` gives each token
        its source's adapter slot.
        """
        source, position = packed_positions(lengths, tokens.device)  # (T,) each
        if self.attends_packed():
            starts = to_device([0, *itertools.accumulate(lengths)], tokens.device, torch.int32)
            attend = self.packed_attention(starts, source.to(torch.int32))
        else:
            attend = self._padded_attention(lengths, source, position)
        return self.encode_packed(tokens, position, attend, lora)

    def encode_packed(self, tokens: torch.Tensor, position: torch.Tensor, attend, lora: LoraRows | None = None) -> torch.Tensor:
        """The encoder over packed tokens (T,) at their positions in their sources (T,), with
        `attend` the self-attention of their stacked q, k, v (T, 3C) -> (T, C): hidden states (T, C).
        Device work only, so a CUDA graph can hold it (engine/cuda_graphs.py `EncoderGraphs`)."""
        first = self.encoder_layers[0]
        x, h = self.embed(tokens, position, first.self_attn_norm, lora, first.sites.self_attn_norm)
        for i, layer in enumerate(self.encoder_layers):
            s = layer.sites
            a = attend(project(layer.qkv, h, lora, s.qkv))  # (T, 3C) -> (T, C)
            a = project(layer.self_attn_out, a, lora, s.self_attn_out)
            x, h = add_normalize(layer.ffn_norm, a, x, lora, s.ffn_norm)  # (T, C) each
            last = i + 1 == len(self.encoder_layers)
            next_norm = self.encoder_norm if last else self.encoder_layers[i + 1].self_attn_norm
            f = project(layer.fc2, project(layer.fc1, h, lora, s.fc1, relu=True), lora, s.fc2)
            if x.dtype == torch.float16:  # as HF: keep fp16 activations finite, and normalise them clamped
                limit = torch.finfo(torch.float16).max - 1000
                x = (x + f).clamp(-limit, limit)
                h = normalize(next_norm, x, lora, s.next_norm)
            else:
                x, h = add_normalize(next_norm, f, x, lora, s.next_norm)
        return h

    def attends_packed(self) -> bool:
        """Whether the encoder's attention runs on packed sources (kernels.packed_attention: half
        precision on a GPU with Triton); elsewhere (float32, the parity target, and the CPU) it runs
        on a padded grid."""
        return self.device.type == "cuda" and self.dtype in (torch.float16, torch.bfloat16) and kernels.HAVE_TRITON

    def packed_attention(self, starts: torch.Tensor, sources: torch.Tensor | None = None):
        """Self-attention within each packed source: a function of stacked q, k, v (T, 3C) -> (T, C).
        Source i holds tokens starts[i] .. starts[i + 1] - 1 (starts (B + 1,) int32 on the device);
        `sources` (T,) int32, each token's source, where there are many (a document's; a typed
        sentence's encoder graph has two: the sentence and its bucket's padding)."""
        H = self.config.encoder_heads
        scale = (self.config.d_model // H) ** -0.5
        return lambda qkv: kernels.packed_attention(qkv, starts, scale, H, sources)

    def _padded_attention(self, lengths: list[int], source: torch.Tensor, position: torch.Tensor):
        """`packed_attention`'s meaning on a padded (B, S) grid through SDPA. Token i is at
        `position[i]` of source `source[i]`."""
        B, S = len(lengths), max(lengths)
        C, H = self.config.d_model, self.config.encoder_heads
        D = C // H
        device = source.device
        key_mask = (torch.arange(S, device=device)[None, :] < to_device(lengths, device)[:, None])[
            :, None, None, :
        ]  # (B, 1, 1, S): keys a query may attend to
        real = source * S + position  # (T,) where each token sits in the (B * S,) grid

        def attend(qkv: torch.Tensor) -> torch.Tensor:
            grid = qkv.new_zeros(B * S, 3 * C).index_copy_(0, real, qkv)  # (B * S, 3C), padding zero
            q, k, v = grid.view(B, S, 3, H, D).permute(2, 0, 3, 1, 4)  # 3 x (B, H, S, D)
            with sdpa_kernel(ENCODER_ATTENTION):
                a = F.scaled_dot_product_attention(q, k, v, attn_mask=key_mask, scale=D**-0.5)  # (B, H, S, D)
            return a.transpose(1, 2).reshape(B * S, C).index_select(0, real)  # (T, C)

        return attend

    def write_cross_kv(
        self, hidden: torch.Tensor, cache: PagedKVCache, slots: torch.Tensor, lora: LoraRows | None = None
    ) -> torch.Tensor:
        """Project packed encoder states (T, C) to every decoder layer's cross K/V and store them at
        `slots` (T,); returns them, (T, L, 2, H, D).

        `lora` gives each of the T tokens its source's adapter slot.
        """
        T = hidden.shape[0]
        L, H, D = self.config.decoder_layers, self.heads, self.head_dim
        kv = project(self.cross_kv, hidden, lora, CROSS_KV_SITE).view(T, L, 2, H, D)  # (T, L, 2, H, D)
        cache.write(slots, kv)
        return kv

    # -- decoder ---------------------------------------------------------------------------------

    def decode_step(
        self,
        tokens: torch.Tensor,
        positions: torch.Tensor,
        rows: torch.Tensor,
        self_cache: PagedKVCache,
        write_slots: torch.Tensor,
        self_slots: torch.Tensor,
        self_lens: torch.Tensor,
        self_priors: torch.Tensor | None,
        cross_cache: PagedKVCache,
        cross_slots: torch.Tensor,
        cross_lens: torch.Tensor,
        with_logits: bool = True,
        lora: LoraRows | None = None,
        group: int = 1,
        folded: FoldedSources | None = None,
    ) -> torch.Tensor | None:
        """One new token for each of N rows, row i's at position `positions[i]` of its hypothesis
        (0 for the first) -> logits (N, V).

        Row i writes its K/V at flat slot `write_slots[i]` of the self-attention cache, attends over
        the first `self_lens[i]` slots listed in `self_slots[rows[i]]` (the one before last may be
        row `self_priors[i]`'s new token: kernels.NewTokens' `priors`), and over the first
        `cross_lens[i]` source slots in `cross_slots[rows[i]]` (beams of one sentence list the same
        source slots). `lora` gives each row its adapter slot. With `group` > 1 the rows come in
        runs of `group` that share a source (a sentence's beams), and cross-attention reads each
        source once per run. With `folded`, every row belongs to the sentence it holds (padding
        rows aside), and cross-attention reads that instead of the source cache.
        """
        N = tokens.shape[0]
        H, D = self.heads, self.head_dim
        layers = self.decoder_layers
        # Each norm names the projection after it, which may then start early (Linear.holds_weights).
        x, h = self.embed(tokens, positions, layers[0].self_attn_norm, lora, layers[0].sites.self_attn_norm,
                          layers[0].qkv)
        for i, layer in enumerate(layers):
            s = layer.sites
            q, k, v = project(layer.qkv, h, lora, s.qkv).view(N, 3, H, D).unbind(1)  # 3 x (N, H, D)
            # The attention kernel stores the new token's K/V in the cache as it reads them.
            a = kernels.slot_attention(q, self_cache.k[i], self_cache.v[i], self_slots, rows, self_lens, self.scale,
                                       kernels.NewTokens(k, v, write_slots, self_priors))
            if not with_logits and i + 1 == len(layers):
                return None  # a prefix step only fills the cache: the rest of the last layer feeds the logits alone
            a = project(layer.self_attn_out, a.reshape(N, H * D), lora, s.self_attn_out)
            # (Folded, the scores kernel holds its part of the folded keys before it waits, as cross_q
            # would its weights: the norm may lead into it alike.)
            x, h = add_normalize(layer.cross_attn_norm, a, x, lora, s.cross_attn_norm, layer.cross_q)  # (N, C) each
            if folded is not None:
                a = folded.attend(i, h, self.scale)
            else:
                q = project(layer.cross_q, h, lora, s.cross_q).view(N, H, D)  # (N, H, D)
                if group > 1:
                    a = kernels.source_attention(q, cross_cache.k[i], cross_cache.v[i], cross_slots, rows, cross_lens, self.scale, group)
                else:
                    a = kernels.slot_attention(q, cross_cache.k[i], cross_cache.v[i], cross_slots, rows, cross_lens, self.scale)
                a = project(layer.cross_out, a.reshape(N, H * D), lora, s.cross_out)
            x, h = add_normalize(layer.ffn_norm, a, x, lora, s.ffn_norm, layer.fc1)
            last = i + 1 == len(layers)
            next_norm = self.decoder_norm if last else layers[i + 1].self_attn_norm
            f = project(layer.fc2, project(layer.fc1, h, lora, s.fc1, relu=True), lora, s.fc2)
            x, h = add_normalize(next_norm, f, x, lora, s.next_norm, None if last else layers[i + 1].qkv)
        return self.lm_head(h)[:, : self.config.vocab_size]  # (N, V)


class FoldedSources:
    """One sentence's source folded into every decoder layer's cross-attention (its attention by
    associativity), for the steps whose rows all belong to that sentence: a typed sentence's.

    With K_h, V_h (S, D) head h's source keys and values, padded with zeros to S slots, layer i holds
        a[i] (H * S, C): K_h W_q,h, head by head (W_q,h: the head's D rows of W_q),
        c[i] (H * S,) float32: K_h b_q,h,
        b[i] (C, H * S): W_o,h V_h^T, head by head (W_o,h: the head's D columns of W_o),
    so that the scores of the normed hidden state x are x a^T + c, with no q (kernels.source_scores
    masks the slots past `length` and takes the softmax), and the sublayer's output is p b^T + b_o.
    Two small projections replace three kernels (q projection, attention, output projection) and
    read 2 H S C values where those read W_q and W_o, 2 C^2: half at 600M with S = 32. It rounds
    otherwise than the plain path (a and b are stored in the weights' dtype), so it is for half
    precision on the GPU; float32 keeps the plain path, the parity target.

    `fold` fills them in one launch (kernels.fold_source), inside the typed sentence's encoder
    graph. Buffers for S = FOLD_SLOTS[-1], viewed at the `slots` of the sentence held (a step that
    reads them is captured per S).
    """

    def __init__(self, model: NllbModel):
        config = model.config
        L, H, C, S = config.decoder_layers, model.heads, config.d_model, FOLD_SLOTS[-1]
        self.wq, self.bq, self.wo, self.bo = model.cross_projections()  # stacked: one launch folds every layer
        device, dtype = model.device, model.dtype
        # Flat, so that the sentence's a (L, H * S, C), c and b at its S are the leading elements (`_at`).
        self.a = torch.zeros(L * H * S * C, device=device, dtype=dtype)
        self.c = torch.zeros(L * H * S, device=device, dtype=torch.float32)
        self.b = torch.zeros(L * C * H * S, device=device, dtype=dtype)
        self.length = torch.ones(1, dtype=torch.int32, device=device)
        self.layers, self.heads, self.d_model = L, H, C
        self.slots = 0  # S of the sentence held

    @staticmethod
    def slots_for(length: int) -> int:
        """The S a source of `length` tokens is folded at; 0: too long to fold."""
        return next((S for S in FOLD_SLOTS if length <= S), 0)

    def _at(self, S: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The buffers at S slots a head: a (L, H * S, C), c (L, H * S), b (L, C, H * S)."""
        L, HS, C = self.layers, self.heads * S, self.d_model
        return self.a[: L * HS * C].view(L, HS, C), self.c[: L * HS].view(L, HS), self.b[: L * C * HS].view(L, C, HS)

    def fold(self, k: torch.Tensor, v: torch.Tensor, length: torch.Tensor, S: int) -> None:
        """Hold the sentence of cross K and V k, v (L, T, H, D) at S slots a head: its source tokens
        are the first `length` (1,) int32 of the T <= S (the others may hold anything)."""
        kernels.fold_source(k, v, self.wq, self.bq, self.wo, length, *self._at(S))
        self.length.copy_(length)
        self.slots = S

    def attend(self, i: int, h: torch.Tensor, scale: float) -> torch.Tensor:
        """Layer i's cross-attention sublayer, its output projection included, for rows h (N, C) of
        the sentence held, normed."""
        a, c, b = (t[i] for t in self._at(self.slots))  # (H * S, C), (H * S,), (C, H * S)
        p = kernels.source_scores(h, a, c, self.length, scale, self.slots)  # (N, H * S)
        return Linear(b, self.bo[i])(p)  # (N, C)
