"""Decode attention over a paged self-attention KV cache: one new query token per sequence.

Meaning, as a plain loop (`n = seq_lens[b]` counts the current token, whose K/V is already cached):

    for b in range(B):
        for h in range(H):
            n = seq_lens[b]
            slots = [(block_tables[b, t // block_size], t % block_size) for t in range(n)]
            s = [scale * dot(q[b, h], k_cache[blk, i, h]) for blk, i in slots]
            p = softmax(s)
            out[b, h] = sum(p[t] * v_cache[blk, i, h] for t, (blk, i) in enumerate(slots))

Block-table entries past a row's last block are never read, so they may hold anything.
"""

import torch

from kernels._triton import tl, triton


@triton.jit
def _paged_attention_kernel(
    q_ptr, k_cache_ptr, v_cache_ptr, block_tables_ptr, seq_lens_ptr, out_ptr, scale, D,
    stride_qb, stride_qh,
    stride_kn, stride_kt, stride_kh,
    stride_vn, stride_vt, stride_vh,
    stride_bt,
    stride_ob, stride_oh,
    BLOCK_SIZE: tl.constexpr, TILE: tl.constexpr, BLOCK_D: tl.constexpr,
):
    # One program per (row, head): online softmax over TILE cached tokens at a time.
    b = tl.program_id(0)
    h = tl.program_id(1)
    seq_len = tl.load(seq_lens_ptr + b)
    d = tl.arange(0, BLOCK_D)
    d_ok = d < D
    q = tl.load(q_ptr + b * stride_qb + h * stride_qh + d, mask=d_ok, other=0.0).to(tl.float32) * scale

    m = tl.full((), float("-inf"), tl.float32)  # running max of the scores
    l = tl.full((), 0.0, tl.float32)  # running sum of exp(score - m)
    acc = tl.zeros([BLOCK_D], tl.float32)  # running sum of exp(score - m) * v
    t = tl.arange(0, TILE)
    for start in range(0, seq_len, TILE):
        pos = start + t
        valid = pos < seq_len
        # Any TILE works with any BLOCK_SIZE: each token finds its own block. The mask keeps
        # block-table entries past the row's length unread.
        block = tl.load(block_tables_ptr + b * stride_bt + pos // BLOCK_SIZE, mask=valid, other=0)
        slot = pos % BLOCK_SIZE
        kv_mask = valid[:, None] & d_ok[None, :]
        # int64: block * stride can pass 2**31 in a large cache.
        k_off = block.to(tl.int64) * stride_kn + slot * stride_kt + h * stride_kh
        k = tl.load(k_cache_ptr + k_off[:, None] + d[None, :], mask=kv_mask, other=0.0).to(tl.float32)
        s = tl.sum(k * q[None, :], axis=1)  # (TILE,)
        s = tl.where(valid, s, float("-inf"))

        m_new = tl.maximum(m, tl.max(s, axis=0))
        alpha = tl.exp(m - m_new)
        p = tl.exp(s - m_new)  # (TILE,)
        v_off = block.to(tl.int64) * stride_vn + slot * stride_vt + h * stride_vh
        v = tl.load(v_cache_ptr + v_off[:, None] + d[None, :], mask=kv_mask, other=0.0).to(tl.float32)
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        l = l * alpha + tl.sum(p, axis=0)
        m = m_new

    out = acc / l
    tl.store(out_ptr + b * stride_ob + h * stride_oh + d, out.to(out_ptr.dtype.element_ty), mask=d_ok)


def _tile_and_warps(num_programs):
    """Tokens per step and warps per (row, head) program, as measured on an H200: with many
    programs, one warp each on short steps keeps many resident per SM; with few, long steps and
    more warps keep more loads in flight."""
    if num_programs >= 1024:
        return 16, 1
    return 64, 8


def paged_attention_triton(q, k_cache, v_cache, block_tables, seq_lens, scale):
    """Triton version of `paged_attention_ref`; same arguments, same result."""
    B, H, D = q.shape
    _, block_size, Hk, Dk = k_cache.shape
    assert (Hk, Dk) == (H, D) and v_cache.shape == k_cache.shape, "q, k_cache, v_cache shapes disagree"
    assert q.dtype == k_cache.dtype == v_cache.dtype, "q, k_cache, v_cache must share a dtype"
    assert q.stride(-1) == k_cache.stride(-1) == v_cache.stride(-1) == 1, "head dim must be contiguous"
    assert block_tables.dtype == seq_lens.dtype == torch.int32, "block_tables and seq_lens must be int32"
    assert block_tables.dim() == 2 and block_tables.shape[0] == B and block_tables.stride(1) == 1
    assert seq_lens.shape == (B,) and seq_lens.is_contiguous()

    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    BLOCK_D = triton.next_power_of_2(D)
    TILE, num_warps = _tile_and_warps(B * H)
    _paged_attention_kernel[(B, H)](
        q, k_cache, v_cache, block_tables, seq_lens, out, scale, D,
        q.stride(0), q.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        block_tables.stride(0),
        out.stride(0), out.stride(1),
        BLOCK_SIZE=block_size, TILE=TILE, BLOCK_D=BLOCK_D, num_warps=num_warps,
    )
    return out


def paged_attention_ref(q, k_cache, v_cache, block_tables, seq_lens, scale):
    """Decode attention of `q` (B, H, D) over the paged cache `k_cache`, `v_cache`
    (num_blocks, block_size, H, D); `block_tables` (B, max_blocks) int32 maps each row's block i to
    a cache block, `seq_lens` (B,) int32 counts each row's valid tokens (>= 1, current one
    included). Softmax and sums in float32 (float64 for float64 inputs); returns (B, H, D) in q's
    dtype."""
    B, H, D = q.shape
    compute_dtype = torch.promote_types(q.dtype, torch.float32)
    block_size = k_cache.shape[1]
    num_row_blocks = (int(seq_lens.max()) + block_size - 1) // block_size
    T = num_row_blocks * block_size
    valid = torch.arange(T, device=q.device)[None, :] < seq_lens[:, None]  # (B, T)
    blocks = block_tables[:, :num_row_blocks].long()  # (B, num_row_blocks)
    # Entries past a row's length may be garbage: point them at block 0, then mask.
    blocks = blocks.masked_fill(~valid[:, ::block_size], 0)
    k = k_cache[blocks].view(B, T, H, D)  # (B, T, H, D)
    v = v_cache[blocks].view(B, T, H, D)  # (B, T, H, D)
    v = v.masked_fill(~valid[:, :, None, None], 0.0)  # unused slots may hold NaN: 0 * NaN is NaN
    scores = torch.einsum("bhd,bthd->bht", q.to(compute_dtype), k.to(compute_dtype)) * scale  # (B, H, T)
    scores = scores.masked_fill(~valid[:, None, :], float("-inf"))
    p = torch.softmax(scores, dim=-1)  # (B, H, T)
    return torch.einsum("bht,bthd->bhd", p, v.to(compute_dtype)).to(q.dtype)
