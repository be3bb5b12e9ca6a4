"""Decode cross-attention where rows come in runs of `group` that read the same source slots (the
beams of one sentence): one new query token per row.

Meaning, as a plain loop (rows i .. i + group - 1 of a run list the same slots and length, so the
run's first row `f` speaks for all of them):

    for i in range(N):
        f = i - i % group
        for h in range(H):
            slots = slot_table[rows[f], :lens[f]]
            s = [scale * dot(q[i, h], k[slot, h]) for slot in slots]
            p = softmax(s)
            out[i, h] = sum(p[t] * v[slot, h] for t, slot in enumerate(slots))

This is `slot_attention` with the sharing made explicit: one program serves a run's queries
together, so each source K/V row is read once per sentence rather than once per beam, and the
scores of the run are one small matrix product (the run's queries padded to 16 rows, the least a
tensor-core `tl.dot` takes), as GQA flash-decoding kernels do for the query heads of one K/V head.
"""

import torch

from dragoman.kernels._triton import chained_launch, launch_options, tl, triton, wait_for_inputs
from dragoman.kernels.dispatch import dispatch
from dragoman.kernels.slot_attention import attend, check_inputs, gather_rows


@triton.jit
def load_tile(table_ptr, row, stride_table, k_ptr, v_ptr, stride_ks, stride_kh, stride_vs, stride_vh, h, start, n,
              TILE: tl.constexpr, d, d_ok):
    """Positions start .. start + TILE - 1 of a slot list: which are < n (TILE,), and their K and V
    (TILE, BLOCK_D) of head h (0 past n)."""
    pos = start + tl.arange(0, TILE)
    valid = pos < n
    # int64: slot * stride can pass 2**31 in a large cache.
    slot = tl.load(table_ptr + row * stride_table + pos, mask=valid, other=0).to(tl.int64)
    kv_mask = valid[:, None] & d_ok[None, :]
    k = tl.load(k_ptr + (slot * stride_ks + h * stride_kh)[:, None] + d[None, :], mask=kv_mask, other=0.0)
    v = tl.load(v_ptr + (slot * stride_vs + h * stride_vh)[:, None] + d[None, :], mask=kv_mask, other=0.0)
    return valid, k, v


@triton.jit
def _source_attention_kernel(
    q_ptr, k_ptr, v_ptr, table_ptr, rows_ptr, lens_ptr, out_ptr, scale, D, group,
    stride_qn, stride_qh,
    stride_ks, stride_kh,
    stride_vs, stride_vh,
    stride_table,
    stride_on, stride_oh,
    TILE: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_D: tl.constexpr, PRECISION: tl.constexpr,
    CHAINED: tl.constexpr, EARLY: tl.constexpr,
):
    # One program per (run of `group` rows, head): online softmax over TILE source tokens at a time,
    # for the run's queries together.
    first = tl.program_id(0) * group
    h = tl.program_id(1)
    n = tl.load(lens_ptr + first)
    row = tl.load(rows_ptr + first).to(tl.int64)
    g = tl.arange(0, BLOCK_G)
    d = tl.arange(0, BLOCK_D)
    d_ok = d < D
    if EARLY:
        # The source cache is written when a sentence is admitted, never during a step: read the
        # first tile while the kernel before finishes, and each next tile one step ahead.
        valid, k, v = load_tile(table_ptr, row, stride_table, k_ptr, v_ptr, stride_ks, stride_kh, stride_vs,
                                stride_vh, h, 0, n, TILE, d, d_ok)
    wait_for_inputs(CHAINED)  # q is the output of the kernel before
    # Padding query rows are 0: they score 0 on every token, so their softmax stays finite, and
    # they are never stored.
    q_mask = (g < group)[:, None] & d_ok[None, :]
    q = tl.load(q_ptr + (first + g)[:, None] * stride_qn + h * stride_qh + d[None, :], mask=q_mask, other=0.0)

    m = tl.full((BLOCK_G,), float("-inf"), tl.float32)  # running max of each query's scores
    l = tl.zeros((BLOCK_G,), tl.float32)  # running sum of exp(score - m)
    acc = tl.zeros((BLOCK_G, BLOCK_D), tl.float32)  # running sum of exp(score - m) * v
    for start in range(0, n, TILE):
        if not EARLY:
            valid, k, v = load_tile(table_ptr, row, stride_table, k_ptr, v_ptr, stride_ks, stride_kh, stride_vs,
                                    stride_vh, h, start, n, TILE, d, d_ok)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * scale  # (BLOCK_G, TILE) float32
        s = tl.where(valid[None, :], s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))
        alpha = tl.exp(m - m_new)
        p = tl.exp(s - m_new[:, None])  # (BLOCK_G, TILE)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        l = l * alpha + tl.sum(p, axis=1)
        m = m_new
        if EARLY:
            valid, k, v = load_tile(table_ptr, row, stride_table, k_ptr, v_ptr, stride_ks, stride_kh, stride_vs,
                                    stride_vh, h, start + TILE, n, TILE, d, d_ok)

    out = acc / l[:, None]
    o_off = (first + g)[:, None] * stride_on + h * stride_oh + d[None, :]
    tl.store(out_ptr + o_off, out.to(out_ptr.dtype.element_ty), mask=q_mask)


def _tile_and_warps(num_programs):
    """(source tokens per step, warps, early) for each (run, head) program, as measured fastest at
    beam 4, H=16, sources of ~40 and ~100 tokens (docs/performance.md): with many programs, one
    warp each on 16-token steps keeps many resident per SM, where four warps a program are slower;
    with few, 32-token steps over four warps, the first step's K/V read before the wait for q (as
    in slot_attention)."""
    if num_programs >= 512:
        return 16, 1, False
    return 32, 4, True


def source_attention_triton(q, k, v, slot_table, rows, lens, scale, group):
    """Triton version of `source_attention_ref`; same arguments, same result."""
    N, H, D = q.shape
    check_inputs(q, k, v, slot_table, rows, lens)
    assert q.dtype in (torch.float32, torch.float16, torch.bfloat16), "tl.dot takes float32, float16, bfloat16"
    assert group >= 1 and N % group == 0, "rows must come in whole runs of `group`"

    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    TILE, num_warps, early = _tile_and_warps(N // group * H)
    chained = chained_launch(q)
    _source_attention_kernel[(N // group, H)](
        q, k, v, slot_table, rows, lens, out, scale, D, group,
        q.stride(0), q.stride(1),
        k.stride(0), k.stride(1),
        v.stride(0), v.stride(1),
        slot_table.stride(0),
        out.stride(0), out.stride(1),
        TILE=TILE,
        BLOCK_G=max(16, triton.next_power_of_2(group)),  # tl.dot takes at least 16 rows
        BLOCK_D=max(16, triton.next_power_of_2(D)),
        # Only float32 operands read it: without "ieee" they would round to tf32 on the GPU.
        PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
        CHAINED=chained, EARLY=early, num_warps=num_warps, num_stages=2,  # 2 stages measured as good as 3 or better
        **launch_options(chained),
    )
    return out


def source_attention_ref(q, k, v, slot_table, rows, lens, scale, group):
    """Decode attention of `q` (N, H, D) over the cache `k`, `v` (slots, H, D) for rows in runs of
    `group`: row i reads the `lens[f]` (>= 1) slots listed in `slot_table[rows[f]]`, f = i - i %
    group the first row of its run, slot_table (R, T) int32. Softmax and sums in float32 (float64
    for float64 inputs); returns (N, H, D) in q's dtype."""
    N, H, D = q.shape
    assert N % group == 0, "rows must come in whole runs of `group`"
    keys, values, valid = gather_rows(k, v, slot_table, rows[::group], lens[::group])  # each source once
    return attend(q.view(N // group, group, H, D), keys, values, valid, scale).reshape(N, H, D)  # (N, H, D)


def source_attention(q, k, v, slot_table, rows, lens, scale, group):
    """Decode cross-attention for rows in runs of `group` (the beams of a sentence) that read the
    same source slots: row i reads the first lens[f] slots of slot_table[rows[f]], f = i - i % group
    the first row of its run, each slot's K/V read once per run. q (N, H, D) with N % group == 0;
    k, v (slots, H, D). Returns (N, H, D) in q's dtype."""
    return dispatch(source_attention_triton, source_attention_ref, q, q, k, v, slot_table, rows, lens, scale, group)
