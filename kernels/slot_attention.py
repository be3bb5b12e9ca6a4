"""Decode attention where each row lists the cache slots of its tokens: one new query token per row.

Meaning, as a plain loop (`lens[i]` counts the current token, whose K/V is already cached or, given
the optional `new` (a NewTokens), stored by the op itself first):

    if new is not None:
        for i in range(N):
            k[new.write_slots[i]], v[new.write_slots[i]] = new.k[i], new.v[i]
    for i in range(N):
        for h in range(H):
            slots = slot_table[rows[i], :lens[i]]
            s = [scale * dot(q[i, h], k[slot, h]) for slot in slots]
            p = softmax(s)
            out[i, h] = sum(p[t] * v[slot, h] for t, slot in enumerate(slots))

`k`, `v` are one layer's cache as a flat array of token slots. A slot list per row, rather than a
block table, lets the beams of a sentence read the tokens they have in common from one place while
each writes only its own blocks: reordering beams is a gather of slot lists, never a copy of K/V
(FasterTransformer's cache indirection, at the granularity of tokens). Entries of a slot list
past the row's length are never read, so they may hold anything.

Given `new`, the op also stores each row's new token in the cache (in place), sparing the decode
step two scatter kernels per layer; the caller guarantees the row's last slot,
slot_table[rows[i], lens[i] - 1], is new.write_slots[i].

`new.priors` (N,) int32 may name for row i another row j = priors[i] of the same call whose new
token is row i's position before last (slot_table[rows[i], lens[i] - 2] is write_slots[j]), or -1:
a sentence's first step feeds its position 0 through one beam and position 1 through the others
(engine/admission.py). The plain loop above means the same; the kernel, which stores a row's new
token only as it reads it, folds row j's in from registers too.
"""

import torch
import torch.nn.functional as F

from dragoman.kernels._triton import chained_launch, launch_options, tl, triton, wait_for_inputs
from dragoman.kernels.dispatch import dispatch
from dragoman.kernels.row_state import NewTokens


@triton.jit
def load_heads_tile(table_ptr, row, stride_table, k_ptr, v_ptr, stride_s, head_off, start, n, TILE: tl.constexpr,
                    d_ok):
    """Positions start .. start + TILE - 1 of a slot list: which are < n (TILE,), and their K and V
    (G, TILE, BLOCK_D) of the G heads whose offsets within a slot are `head_off` (G, BLOCK_D); 0 past
    n. K and V share their layout (one offset tensor)."""
    pos = start + tl.arange(0, TILE)
    valid = pos < n
    # int64: slot * stride can pass 2**31 in a large cache.
    slot = tl.load(table_ptr + row * stride_table + pos, mask=valid, other=0).to(tl.int64)
    off = slot[None, :, None] * stride_s + head_off[:, None, :]  # (G, TILE, BLOCK_D)
    mask = valid[None, :, None] & d_ok[None, None, :]
    k = tl.load(k_ptr + off, mask=mask, other=0.0)
    v = tl.load(v_ptr + off, mask=mask, other=0.0)
    return valid, k, v


@triton.jit
def fold_new_token(q, m, l, acc, k_new_ptr, v_new_ptr, j, stride_new_n, stride_new_h, heads, d, d_ok):
    """The online softmax (m, l, acc) with row j's new token added, read from the step's new K/V;
    returns it and that token's K and V (HEADS, BLOCK_D)."""
    new_off = j * stride_new_n + heads[:, None] * stride_new_h + d[None, :]  # (HEADS, BLOCK_D)
    k_new = tl.load(k_new_ptr + new_off, mask=d_ok[None, :], other=0.0)
    v_new = tl.load(v_new_ptr + new_off, mask=d_ok[None, :], other=0.0)
    s_new = tl.sum(k_new.to(tl.float32) * q, axis=1)  # (HEADS,)
    m_new = tl.maximum(m, s_new)
    alpha = tl.exp(m - m_new)  # 0 when no token came before (m = -inf)
    p_new = tl.exp(s_new - m_new)
    acc = acc * alpha[:, None] + p_new[:, None] * v_new.to(tl.float32)
    l = l * alpha + p_new
    return m_new, l, acc, k_new, v_new


@triton.jit
def _slot_attention_kernel(
    q_ptr, k_ptr, v_ptr, table_ptr, rows_ptr, lens_ptr, out_ptr, scale, D,
    k_new_ptr, v_new_ptr, write_slots_ptr, priors_ptr,
    stride_qn, stride_qh,
    stride_ks, stride_kh,
    stride_table,
    stride_on, stride_oh,
    stride_new_n, stride_new_h,
    HEADS: tl.constexpr, TILE: tl.constexpr, BLOCK_D: tl.constexpr, WRITE: tl.constexpr, CHAINED: tl.constexpr,
    EARLY: tl.constexpr, PRIORS: tl.constexpr,
):
    # One program per (row, HEADS heads): online softmax over TILE cached tokens at a time, the
    # heads side by side (a token's K of HEADS heads is one contiguous read).
    i = tl.program_id(0)
    heads = tl.program_id(1) * HEADS + tl.arange(0, HEADS)
    n = tl.load(lens_ptr + i)
    row = tl.load(rows_ptr + i).to(tl.int64)
    d = tl.arange(0, BLOCK_D)
    d_ok = d < D
    head_off = heads[:, None] * stride_kh + d[None, :]  # (HEADS, BLOCK_D) within a cache slot
    n_cached = n
    if WRITE:
        # The last token is the new one, folded in from registers below: the cache holds it only once
        # this program stores it, and a load would need a barrier to see that store from other threads.
        n_cached = n - 1
    prior = -1
    if PRIORS:
        prior = tl.load(priors_ptr + i)  # written with the lengths, never by the kernel before this one
        n_cached -= (prior >= 0).to(tl.int32)  # that token too comes from registers, another row's
    if EARLY:
        # Lengths, slot lists and cached K/V are written before the step's first chained kernel (or
        # by earlier steps), never by the kernel before this one: read the first tile while that
        # kernel finishes, and each next tile one step ahead.
        valid, k, v = load_heads_tile(table_ptr, row, stride_table, k_ptr, v_ptr, stride_ks, head_off, 0, n_cached,
                                      TILE, d_ok)
    wait_for_inputs(CHAINED)  # q and the new K/V are the output of the kernel before
    q = tl.load(q_ptr + i * stride_qn + heads[:, None] * stride_qh + d[None, :], mask=d_ok[None, :], other=0.0)
    q = q.to(tl.float32) * scale  # (HEADS, BLOCK_D)

    m = tl.full((HEADS,), float("-inf"), tl.float32)  # running max of each head's scores
    l = tl.zeros((HEADS,), tl.float32)  # running sum of exp(score - m)
    acc = tl.zeros((HEADS, BLOCK_D), tl.float32)  # running sum of exp(score - m) * v
    for start in range(0, n_cached, TILE):
        if not EARLY:
            valid, k, v = load_heads_tile(table_ptr, row, stride_table, k_ptr, v_ptr, stride_ks, head_off, start,
                                          n_cached, TILE, d_ok)
        s = tl.sum(k.to(tl.float32) * q[:, None, :], axis=2)  # (HEADS, TILE)
        s = tl.where(valid[None, :], s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))
        alpha = tl.exp(m - m_new)
        p = tl.exp(s - m_new[:, None])  # (HEADS, TILE)
        acc = acc * alpha[:, None] + tl.sum(p[:, :, None] * v.to(tl.float32), axis=1)
        l = l * alpha + tl.sum(p, axis=1)
        m = m_new
        if EARLY:
            valid, k, v = load_heads_tile(table_ptr, row, stride_table, k_ptr, v_ptr, stride_ks, head_off,
                                          start + TILE, n_cached, TILE, d_ok)

    if WRITE:
        if prior >= 0:
            m, l, acc, _, _ = fold_new_token(q, m, l, acc, k_new_ptr, v_new_ptr, prior, stride_new_n, stride_new_h,
                                             heads, d, d_ok)
        m, l, acc, k_new, v_new = fold_new_token(q, m, l, acc, k_new_ptr, v_new_ptr, i, stride_new_n, stride_new_h,
                                                 heads, d, d_ok)
        # Stored last, after the loop: a stray read of this slot above would then see the caller's
        # old contents (NaN in the tests), not the new token. Padding rows may share one slot; their
        # racing stores leave garbage in a block nobody reads.
        slot = tl.load(write_slots_ptr + i).to(tl.int64)
        tl.store(k_ptr + slot * stride_ks + head_off, k_new, mask=d_ok[None, :])
        tl.store(v_ptr + slot * stride_ks + head_off, v_new, mask=d_ok[None, :])

    out = acc / l[:, None]
    o_off = i * stride_on + heads[:, None] * stride_oh + d[None, :]
    tl.store(out_ptr + o_off, out.to(out_ptr.dtype.element_ty), mask=d_ok[None, :])


def _config(N, H, D, write=False):
    """(heads per program, tokens per step, warps, early), as measured fastest in CUDA graphs
    (docs/performance.md). With many programs: one warp each, two heads side by side, ~1,024 K
    elements per step (2 heads x 8 tokens at D = 64, x 4 at D = 128). At most 32 programs are
    resident per SM, so a one-warp program with two heads keeps twice the loads in flight. Larger
    steps, or a program's sums split over several warps, lose by up to several times.
    Self-attention (`write`: the new token stored) takes half those steps, each next one read one
    step ahead (`EARLY`); cross-attention gains nothing by that. From 16 to 255 rows (a short document's
    step), one warp and one head each, ~1,024 elements per step (half past 128 rows at 16 heads),
    each next step read early too. With fewer programs (a typed sentence's step), one head per
    program over four warps, the first step's K/V read before the wait for q, and each next step's
    one step ahead. Early reads slow one-head programs at many rows."""
    if N * H >= 4096:
        heads = 2 if H % 2 == 0 else 1
        tile = max(1, 1024 // (heads * triton.next_power_of_2(D)))
        if write and D <= 64:  # measured at D = 64 (600M, 1.3B); 3.3B's 128 keeps the plain steps
            return heads, tile // 2, 1, True
        return heads, tile, 1, False
    if N * H >= 256:
        tile = max(1, 1024 // triton.next_power_of_2(D))
        return 1, (tile if N * H <= 2048 else max(1, tile // 2)), 1, True
    return 1, 32, 4, True


def check_inputs(q, k, v, slot_table, rows, lens):
    """Asserts what the attention kernels over slot lists (this one, source_attention) take."""
    N, H, D = q.shape
    _, Hk, Dk = k.shape
    assert (Hk, Dk) == (H, D) and v.shape == k.shape, "q, k, v shapes disagree"
    assert q.dtype == k.dtype == v.dtype, "q, k, v must share a dtype"
    assert q.stride(-1) == k.stride(-1) == v.stride(-1) == 1, "head dim must be contiguous"
    assert slot_table.dtype == lens.dtype == torch.int32, "slot_table and lens must be int32"
    assert slot_table.dim() == 2 and slot_table.stride(1) == 1
    assert rows.shape == lens.shape == (N,) and rows.is_contiguous() and lens.is_contiguous()


def _check_new_token(q, k, new: NewTokens | None):
    """Asserts the new tokens, if given, agree with q and the cache k; returns whether they are given."""
    if new is None:
        return False
    assert new.k.shape == new.v.shape == q.shape, "new.k, new.v must be (N, H, D) like q"
    assert new.k.dtype == new.v.dtype == k.dtype, "new.k, new.v must have the cache's dtype"
    assert new.k.stride(-1) == new.v.stride(-1) == 1, "head dim must be contiguous"
    assert new.write_slots.dtype in (torch.int32, torch.int64), "write_slots must be int32 or int64"
    assert new.write_slots.shape == (q.shape[0],) and new.write_slots.is_contiguous()
    if new.priors is not None:
        assert new.priors.dtype == torch.int32 and new.priors.shape == (q.shape[0],) and new.priors.is_contiguous()
    return True


def slot_attention_triton(q, k, v, slot_table, rows, lens, scale, new: NewTokens | None = None):
    """Triton version of `slot_attention_ref`; same arguments, same result."""
    N, H, D = q.shape
    check_inputs(q, k, v, slot_table, rows, lens)
    assert k.stride() == v.stride(), "k and v must share a layout"
    write = _check_new_token(q, k, new)
    # Without new tokens these stand-ins are never read: WRITE=False compiles their use out.
    k_new, v_new, write_slots, priors = new if new is not None else (q, q, lens, None)
    assert k_new.stride() == v_new.stride(), "k_new and v_new must share a layout"

    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    heads, tile, num_warps, early = _config(N, H, D, write)
    chained = chained_launch(q)
    _slot_attention_kernel[(N, H // heads)](
        q, k, v, slot_table, rows, lens, out, scale, D,
        k_new, v_new, write_slots, lens if priors is None else priors,  # (lens: never read)
        q.stride(0), q.stride(1),
        k.stride(0), k.stride(1),
        slot_table.stride(0),
        out.stride(0), out.stride(1),
        k_new.stride(0), k_new.stride(1),
        HEADS=heads, TILE=tile, BLOCK_D=triton.next_power_of_2(D), WRITE=write, CHAINED=chained, EARLY=early,
        PRIORS=priors is not None, num_warps=num_warps,
        **launch_options(chained),
    )
    return out


def slot_attention_ref(q, k, v, slot_table, rows, lens, scale, new: NewTokens | None = None):
    """Decode attention of `q` (N, H, D) over the cache `k`, `v` (slots, H, D): row i reads the
    `lens[i]` (>= 1, current token included) slots listed in `slot_table[rows[i]]`, slot_table
    (R, T) int32. Softmax and sums in float32 (float64 for float64 inputs); returns (N, H, D) in
    q's dtype.

    Given `new`, first stores new.k[i], new.v[i] in the cache at new.write_slots[i], in place; row
    i's last slot must be new.write_slots[i]. Its priors change nothing here: the cache holds every
    new token before any is read."""
    if new is not None and _check_new_token(q, k, new):
        k.index_copy_(0, new.write_slots.long(), new.k)
        v.index_copy_(0, new.write_slots.long(), new.v)
    keys, values, valid = gather_rows(k, v, slot_table, rows, lens)
    return attend(q[:, None], keys, values, valid, scale).squeeze(1)  # (N, H, D)


def gather_rows(k, v, slot_table, rows, lens):
    """The K and V (N, T, H, D) of the first lens[i] slots of slot_table[rows[i]], T = max(lens),
    and which of the T are valid (N, T). Positions past a row's length repeat its first slot, so
    whatever the cache holds elsewhere (NaN included) never reaches the sums."""
    T = int(lens.max())
    valid = torch.arange(T, device=lens.device)[None, :] < lens[:, None]  # (N, T)
    listed = slot_table[rows.long(), :T].long()  # (N, T)
    slots = torch.where(valid, listed, listed[:, :1]).view(-1)  # (N * T,)
    # index_select, not k[slots]: several times faster on the CPU, where this is the engine's path.
    shape = (*valid.shape, *k.shape[1:])  # (N, T, H, D)
    return k.index_select(0, slots).view(shape), v.index_select(0, slots).view(shape), valid


def attend(q, keys, values, valid, scale):
    """Attention of G queries per row over that row's tokens: q (N, G, H, D); keys, values (N, T,
    H, D); valid (N, T). Softmax and sums in float32 (float64 for float64 inputs); returns
    (N, G, H, D) in q's dtype."""
    compute_dtype = torch.promote_types(q.dtype, torch.float32)
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2).to(compute_dtype),  # (N, H, G, D)
        keys.transpose(1, 2).to(compute_dtype),  # (N, H, T, D)
        values.transpose(1, 2).to(compute_dtype),
        attn_mask=valid[:, None, None, :],  # (N, 1, 1, T)
        scale=scale,
    )  # (N, H, G, D)
    return out.transpose(1, 2).to(q.dtype)  # (N, G, H, D)


def slot_attention(q, k, v, slot_table, rows, lens, scale, new: NewTokens | None = None):
    """Decode attention over one layer's cache of token slots. q (N, H, D); k, v (slots, H, D); row
    i reads the first lens[i] slots of slot_table[rows[i]] (slot_table (R, T) int32, rows (N,),
    lens (N,) int32, current token included). Given `new` (a NewTokens), first stores row i's new
    token in the cache at new.write_slots[i] (in place), which must be row i's last slot; then
    new.priors may name the row j whose new token is row i's position before last (-1: none).
    Returns (N, H, D) in q's dtype."""
    return dispatch(slot_attention_triton, slot_attention_ref, q, q, k, v, slot_table, rows, lens, scale, new)
