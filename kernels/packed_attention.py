"""Self-attention within each source of a packed batch: a typed sentence's encoder (its source and
the graph bucket's padding, engine/cuda_graphs.py `EncoderGraphs`) and a document's (hundreds of
sources, each token's source given).

`packed_attention(qkv, starts, scale, heads, sources=None) -> out`. Meaning, as a plain loop:

    for b in range(B):                                   # source b: tokens starts[b] .. starts[b + 1] - 1
        rows = range(starts[b], starts[b + 1])
        for h in range(H):
            q, k, v = (qkv[rows, j * C + h * D : j * C + (h + 1) * D] for j in range(3))   # (n, D) each
            out[rows, h * D : (h + 1) * D] = softmax(q @ k.T * scale) @ v          # float32, rounded

Why: FlashAttention's variable-length kernel cannot launch chained; with the encoder's projections
through fused_linear, this keeps the whole typed-sentence encoder chained (kernels/_triton.py).
On a document of hundreds of short sources it is also faster than FlashAttention, whose 128-query
tiles are then mostly padding (docs/performance.md). One program per (head, block of
queries) streams the keys of the block's sources with an online softmax.
"""

import torch

from dragoman.kernels._triton import chained_launch, launch_options, tl, triton, wait_for_inputs
from dragoman.kernels.dispatch import dispatch

BLOCK_Q = 32  # queries a program
BLOCK_KEYS = 32  # keys an iteration


@triton.jit
def _packed_attention_kernel(
    qkv_ptr, starts_ptr, sources_ptr, out_ptr, T, B, scale, stride_qkv, stride_o,
    C: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_KEYS: tl.constexpr,
    PRECISION: tl.constexpr, CHAINED: tl.constexpr, BY_SOURCE: tl.constexpr,
):
    h = tl.program_id(0)
    rows = tl.program_id(1) * BLOCK_Q + tl.arange(0, BLOCK_Q)
    row_ok = rows < T
    d = tl.arange(0, BLOCK_D)
    d_ok = d < D
    wait_for_inputs(CHAINED)
    if BY_SOURCE:  # each query's source given: its bounds are two loads
        source = tl.load(sources_ptr + rows, mask=row_ok, other=0)
        lo = tl.load(starts_ptr + source, mask=row_ok, other=0)
        hi = tl.load(starts_ptr + source + 1, mask=row_ok, other=0)
    else:
        # Each query's source: [lo, hi), from the boundaries starts[1..B-1] (starts[0] = 0, starts[B] = T).
        lo = tl.zeros([BLOCK_Q], tl.int32)
        hi = tl.full([BLOCK_Q], T, tl.int32)
        for b in range(1, B):
            bound = tl.load(starts_ptr + b)
            lo = tl.where(rows >= bound, bound, lo)
            hi = tl.where(rows < bound, tl.minimum(hi, bound), hi)
    lo = tl.where(row_ok, lo, T)  # rows past T read no keys
    hi = tl.where(row_ok, hi, 0)
    q = tl.load(qkv_ptr + rows.to(tl.int64)[:, None] * stride_qkv + h * D + d[None, :],
                mask=row_ok[:, None] & d_ok[None, :], other=0.0)  # (BLOCK_Q, BLOCK_D)
    best = tl.full([BLOCK_Q], float("-inf"), tl.float32)
    total = tl.zeros([BLOCK_Q], tl.float32)
    acc = tl.zeros([BLOCK_Q, BLOCK_D], tl.float32)
    for first in range(tl.min(lo), tl.max(hi), BLOCK_KEYS):
        keys = first + tl.arange(0, BLOCK_KEYS)
        at = qkv_ptr + keys.to(tl.int64)[:, None] * stride_qkv + h * D + d[None, :]
        kv_ok = (keys < T)[:, None] & d_ok[None, :]
        k = tl.load(at + C, mask=kv_ok, other=0.0)  # (BLOCK_KEYS, BLOCK_D)
        v = tl.load(at + 2 * C, mask=kv_ok, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * scale  # (BLOCK_Q, BLOCK_KEYS)
        s = tl.where((keys[None, :] >= lo[:, None]) & (keys[None, :] < hi[:, None]), s, float("-inf"))
        new_best = tl.maximum(best, tl.max(s, axis=1))
        safe = tl.where(new_best == float("-inf"), 0.0, new_best)  # a block of no key of this row's source
        p = tl.exp(s - safe[:, None])
        rescale = tl.exp(best - safe)
        total = total * rescale + tl.sum(p, axis=1)
        acc = acc * rescale[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        best = new_best
    out = acc / tl.where(total == 0.0, 1.0, total)[:, None]
    tl.store(out_ptr + rows.to(tl.int64)[:, None] * stride_o + h * D + d[None, :], out.to(out_ptr.dtype.element_ty),
             mask=row_ok[:, None] & d_ok[None, :])


def packed_attention_triton(qkv, starts, scale, heads, sources=None):
    """Triton version of `packed_attention_ref`; same arguments, same result. `sources` (T,) int32,
    each token's source, spares every program a scan of all bounds (a document's hundreds)."""
    T, C3 = qkv.shape
    C = C3 // 3
    D = C // heads
    assert qkv.stride(1) == 1 and starts.dtype == torch.int32 and starts.dim() == 1
    out = torch.empty((T, C), dtype=qkv.dtype, device=qkv.device)
    chained = chained_launch(qkv)
    _packed_attention_kernel[(heads, triton.cdiv(T, BLOCK_Q))](
        qkv, starts, starts if sources is None else sources, out, T, starts.numel() - 1, scale,  # (starts: unread)
        qkv.stride(0), out.stride(0),
        C=C, D=D, BLOCK_D=max(16, triton.next_power_of_2(D)), BLOCK_Q=BLOCK_Q, BLOCK_KEYS=BLOCK_KEYS,
        PRECISION="ieee" if qkv.dtype == torch.float32 else "tf32", CHAINED=chained,
        BY_SOURCE=sources is not None, num_warps=4,
        **launch_options(chained),
    )
    return out


def packed_attention_ref(qkv, starts, scale, heads, sources=None):
    """`qkv` (T, 3C): each token's q, k and v, heads of D = C / heads; `starts` (B + 1,) int32: the
    sources' bounds, starts[0] = 0, starts[B] = T, each source at least one token. Returns (T, C)
    in qkv's dtype: each token's attention over its own source's tokens (float32 softmax).
    `sources` (T,) int32, where given, names each token's source as `starts` does (unread here)."""
    T, C3 = qkv.shape
    C = C3 // 3
    compute = torch.promote_types(qkv.dtype, torch.float32)
    out = torch.empty((T, C), dtype=qkv.dtype, device=qkv.device)
    bounds = starts.tolist()
    for lo, hi in zip(bounds, bounds[1:]):
        q, k, v = qkv[lo:hi].to(compute).view(hi - lo, 3, heads, C // heads).unbind(1)  # (n, H, D) each
        weights = torch.softmax(torch.einsum("qhd,khd->hqk", q, k) * scale, dim=-1)  # (H, n, n)
        out[lo:hi] = torch.einsum("hqk,khd->qhd", weights, v).reshape(hi - lo, C).to(qkv.dtype)
    return out


def packed_attention(qkv, starts, scale, heads, sources=None):
    """Self-attention within each source of qkv (T, 3C) packed one after another, source b its
    tokens starts[b] .. starts[b + 1] - 1 (starts (B + 1,) int32): (T, C). `sources` (T,) int32:
    each token's source, for many sources."""
    return dispatch(packed_attention_triton, packed_attention_ref, qkv, qkv, starts, scale, heads, sources)
