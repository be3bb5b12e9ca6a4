"""Decode cross-attention: each decode row attends over the encoder K/V of its own source sentence.

The encoder K/V of one layer is packed over all sources, one row per source token; the beams of a
source point at the same span, so one copy serves all of them. Meaning, as a plain loop:

    for b in range(B):
        for h in range(H):
            span = range(src_start[b], src_start[b] + src_len[b])
            s = [scale * dot(q[b, h], k[j, h]) for j in span]
            p = softmax(s)
            out[b, h] = sum(p_j * v[j, h] for p_j, j in zip(p, span))
"""

import torch

from kernels._triton import tl, triton
from kernels.paged_attention import _tile_and_warps  # the same work per program, the same sizes


@triton.jit
def _cross_attention_kernel(
    q_ptr, k_ptr, v_ptr, src_start_ptr, src_len_ptr, out_ptr, scale, D,
    stride_qb, stride_qh,
    stride_kt, stride_kh,
    stride_vt, stride_vh,
    stride_ob, stride_oh,
    TILE: tl.constexpr, BLOCK_D: tl.constexpr,
):
    # One program per (row, head): online softmax over TILE source tokens at a time.
    b = tl.program_id(0)
    h = tl.program_id(1)
    src_start = tl.load(src_start_ptr + b)
    src_len = tl.load(src_len_ptr + b)
    d = tl.arange(0, BLOCK_D)
    d_ok = d < D
    q = tl.load(q_ptr + b * stride_qb + h * stride_qh + d, mask=d_ok, other=0.0).to(tl.float32) * scale

    m = tl.full((), float("-inf"), tl.float32)  # running max of the scores
    l = tl.full((), 0.0, tl.float32)  # running sum of exp(score - m)
    acc = tl.zeros([BLOCK_D], tl.float32)  # running sum of exp(score - m) * v
    t = tl.arange(0, TILE)
    for start in range(0, src_len, TILE):
        pos = start + t
        valid = pos < src_len
        token = (src_start + pos).to(tl.int64)  # int64: token * stride can pass 2**31
        kv_mask = valid[:, None] & d_ok[None, :]
        k_off = token * stride_kt + h * stride_kh
        k = tl.load(k_ptr + k_off[:, None] + d[None, :], mask=kv_mask, other=0.0).to(tl.float32)
        s = tl.sum(k * q[None, :], axis=1)  # (TILE,)
        s = tl.where(valid, s, float("-inf"))

        m_new = tl.maximum(m, tl.max(s, axis=0))
        alpha = tl.exp(m - m_new)
        p = tl.exp(s - m_new)  # (TILE,)
        v_off = token * stride_vt + h * stride_vh
        v = tl.load(v_ptr + v_off[:, None] + d[None, :], mask=kv_mask, other=0.0).to(tl.float32)
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        l = l * alpha + tl.sum(p, axis=0)
        m = m_new

    out = acc / l
    tl.store(out_ptr + b * stride_ob + h * stride_oh + d, out.to(out_ptr.dtype.element_ty), mask=d_ok)


def cross_attention_triton(q, k, v, src_start, src_len, scale):
    """Triton version of `cross_attention_ref`; same arguments, same result."""
    B, H, D = q.shape
    assert k.dim() == 3 and k.shape[1:] == (H, D) and v.shape == k.shape, "q, k, v shapes disagree"
    assert q.dtype == k.dtype == v.dtype, "q, k, v must share a dtype"
    assert q.stride(-1) == k.stride(-1) == v.stride(-1) == 1, "head dim must be contiguous"
    assert src_start.dtype == src_len.dtype == torch.int32, "src_start and src_len must be int32"
    assert src_start.shape == src_len.shape == (B,) and src_start.is_contiguous() and src_len.is_contiguous()

    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    BLOCK_D = triton.next_power_of_2(D)
    TILE, num_warps = _tile_and_warps(B * H)
    _cross_attention_kernel[(B, H)](
        q, k, v, src_start, src_len, out, scale, D,
        q.stride(0), q.stride(1),
        k.stride(0), k.stride(1),
        v.stride(0), v.stride(1),
        out.stride(0), out.stride(1),
        TILE=TILE, BLOCK_D=BLOCK_D, num_warps=num_warps,
    )
    return out


def cross_attention_ref(q, k, v, src_start, src_len, scale):
    """Attention of `q` (B, H, D) over the encoder K/V `k`, `v` (total_src_tokens, H, D): row b
    sees tokens src_start[b] .. src_start[b] + src_len[b] - 1 (src_len >= 1; both (B,) int32).
    Softmax and sums in float32 (float64 for float64 inputs); returns (B, H, D) in q's dtype."""
    B, H, D = q.shape
    compute_dtype = torch.promote_types(q.dtype, torch.float32)
    L = int(src_len.max())
    pos = torch.arange(L, device=q.device)  # (L,)
    valid = pos[None, :] < src_len[:, None]  # (B, L)
    tokens = (src_start[:, None] + pos).masked_fill(~valid, 0).long()  # (B, L), past the span: token 0
    k = k[tokens]  # (B, L, H, D)
    v = v[tokens].masked_fill(~valid[:, :, None, None], 0.0)  # (B, L, H, D); 0 * NaN would be NaN
    scores = torch.einsum("bhd,blhd->bhl", q.to(compute_dtype), k.to(compute_dtype)) * scale  # (B, H, L)
    scores = scores.masked_fill(~valid[:, None, :], float("-inf"))
    p = torch.softmax(scores, dim=-1)  # (B, H, L)
    return torch.einsum("bhl,blhd->bhd", p, v.to(compute_dtype)).to(q.dtype)
