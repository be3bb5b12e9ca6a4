"""Decode self-attention for rows in runs of `group` that are the beams of one sentence: one new
query token per row, each row over its own slot list, as `slot_attention`.

Meaning, as a plain loop (exactly `slot_attention`'s: `lens[i]` counts the current token, whose K/V
is already cached or, given the optional `k_new`, `v_new`, `write_slots`, stored by the op first):

    if write_slots is not None:
        for i in range(N):
            k[write_slots[i]], v[write_slots[i]] = k_new[i], v_new[i]
    for i in range(N):
        for h in range(H):
            slots = slot_table[rows[i], :lens[i]]
            s = [scale * dot(q[i, h], k[slot, h]) for slot in slots]
            p = softmax(s)
            out[i, h] = sum(p[t] * v[slot, h] for t, slot in enumerate(slots))

What `group` adds is a promise about locality: rows i .. i + group - 1 (i % group == 0) are the
beams of one sentence, whose slot lists mostly name the same slots (beam search reorders beams by
copying slot lists, never K/V), differing in their recent positions. So one program serves a run's
beams, one head, each beam with its own online softmax over its own slots, in the hope that a K/V
line the beams share comes from DRAM once, for the first beam that reads it, and from the SM's L1
for the others, where `slot_attention`'s (row, head) programs each fetch it on their own
(bench/kernels_check.py measures whether it does). The program takes its
beams BEAMS at a time: BEAMS = 1 reads them one after another; BEAMS > 1 loads the beams' tiles
together as (BEAMS, TILE, D), so that beams naming the same slot ask for the same line in one
instruction.

As in `slot_attention`, each row's new token is folded in from registers and stored only after the
row's loop, and the caller guarantees write_slots[i] is row i's last slot and no other row's cached
(not last) slot.
"""

import torch

from kernels._triton import tl, triton
from kernels.slot_attention import _check_new_token, slot_attention_ref


@triton.jit
def _beam_attention_kernel(
    q_ptr, k_ptr, v_ptr, table_ptr, rows_ptr, lens_ptr, out_ptr, scale, D, group,
    k_new_ptr, v_new_ptr, write_slots_ptr,
    stride_qn, stride_qh,
    stride_ks, stride_kh,
    stride_vs, stride_vh,
    stride_table,
    stride_on, stride_oh,
    stride_kn_n, stride_kn_h,
    stride_vn_n, stride_vn_h,
    BEAMS: tl.constexpr, TILE: tl.constexpr, BLOCK_D: tl.constexpr, WRITE: tl.constexpr,
):
    # One program per (run of `group` beams, head), taking the beams BEAMS at a time, each with its
    # own online softmax over TILE of its cached tokens per step.
    run_start = tl.program_id(0) * group
    h = tl.program_id(1)
    b = tl.arange(0, BEAMS)
    t = tl.arange(0, TILE)
    d = tl.arange(0, BLOCK_D)
    d_ok = (d < D)[None, :]  # (1, BLOCK_D)
    for first in range(run_start, run_start + group, BEAMS):
        i = first + b  # (BEAMS,) rows; BEAMS divides group
        n = tl.load(lens_ptr + i)
        row = tl.load(rows_ptr + i).to(tl.int64)
        q_off = i[:, None] * stride_qn + h * stride_qh + d[None, :]
        q = tl.load(q_ptr + q_off, mask=d_ok, other=0.0).to(tl.float32) * scale  # (BEAMS, BLOCK_D)

        m = tl.full((BEAMS,), float("-inf"), tl.float32)  # running max of each beam's scores
        l = tl.zeros((BEAMS,), tl.float32)  # running sum of exp(score - m)
        acc = tl.zeros((BEAMS, BLOCK_D), tl.float32)  # running sum of exp(score - m) * v
        n_cached = n
        if WRITE:
            # The last token is the new one, folded in from registers below: the cache holds it only
            # once this program stores it (see slot_attention).
            n_cached = n - 1
        for start in range(0, tl.max(n_cached, axis=0), TILE):
            pos = start + t
            valid = pos[None, :] < n_cached[:, None]  # (BEAMS, TILE)
            # int64: slot * stride can pass 2**31 in a large cache.
            slot = tl.load(table_ptr + row[:, None] * stride_table + pos[None, :], mask=valid, other=0).to(tl.int64)
            kv_mask = valid[:, :, None] & d_ok[:, None, :]  # (BEAMS, TILE, BLOCK_D)
            k_off = (slot * stride_ks + h * stride_kh)[:, :, None] + d[None, None, :]
            k = tl.load(k_ptr + k_off, mask=kv_mask, other=0.0)
            s = tl.sum(k.to(tl.float32) * q[:, None, :], axis=2)  # (BEAMS, TILE)
            s = tl.where(valid, s, float("-inf"))

            m_new = tl.maximum(m, tl.max(s, axis=1))
            # A beam with no cached token (length 1 with WRITE) keeps m = -inf while its run's other
            # beams loop: measured from 0 instead, its exps are 0 rather than NaN.
            m_from = tl.where(m_new == float("-inf"), 0.0, m_new)
            alpha = tl.exp(m - m_from)
            p = tl.exp(s - m_from[:, None])  # (BEAMS, TILE)
            v_off = (slot * stride_vs + h * stride_vh)[:, :, None] + d[None, None, :]
            v = tl.load(v_ptr + v_off, mask=kv_mask, other=0.0)
            acc = acc * alpha[:, None] + tl.sum(p[:, :, None] * v.to(tl.float32), axis=1)
            l = l * alpha + tl.sum(p, axis=1)
            m = m_new

        if WRITE:
            k_off = i[:, None] * stride_kn_n + h * stride_kn_h + d[None, :]
            v_off = i[:, None] * stride_vn_n + h * stride_vn_h + d[None, :]
            k_new = tl.load(k_new_ptr + k_off, mask=d_ok, other=0.0)  # (BEAMS, BLOCK_D)
            v_new = tl.load(v_new_ptr + v_off, mask=d_ok, other=0.0)
            s_new = tl.sum(k_new.to(tl.float32) * q, axis=1)  # (BEAMS,)
            m_new = tl.maximum(m, s_new)
            alpha = tl.exp(m - m_new)  # 0 when no cached token came before (m = -inf)
            p_new = tl.exp(s_new - m_new)
            acc = acc * alpha[:, None] + p_new[:, None] * v_new.to(tl.float32)
            l = l * alpha + p_new
            # Stored after the beams' loop, as in slot_attention. Padding rows may share one slot;
            # their racing stores leave garbage in a block nobody reads.
            slot = tl.load(write_slots_ptr + i).to(tl.int64)  # (BEAMS,)
            tl.store(k_ptr + (slot * stride_ks + h * stride_kh)[:, None] + d[None, :], k_new, mask=d_ok)
            tl.store(v_ptr + (slot * stride_vs + h * stride_vh)[:, None] + d[None, :], v_new, mask=d_ok)

        out = acc / l[:, None]
        o_off = i[:, None] * stride_on + h * stride_oh + d[None, :]
        tl.store(out_ptr + o_off, out.to(out_ptr.dtype.element_ty), mask=d_ok)


def _beams_tile_and_warps(num_programs):
    """Beams taken together, tokens per step and warps per (run, head) program. Not yet measured:
    slot_attention's choice per beam (one warp on 16-token steps when there are many programs, a
    run of 4 beams counting as 4 of its programs; 64-token steps over 8 warps when few), the beams
    one after another. bench/kernels_check.py times the alternatives."""
    if num_programs >= 256:
        return 1, 16, 1
    return 1, 64, 8


def beam_attention_triton(q, k, v, slot_table, rows, lens, scale, group, *, k_new=None, v_new=None,
                          write_slots=None):
    """Triton version of `beam_attention_ref`; same arguments, same result."""
    N, H, D = q.shape
    _, Hk, Dk = k.shape
    assert (Hk, Dk) == (H, D) and v.shape == k.shape, "q, k, v shapes disagree"
    assert q.dtype == k.dtype == v.dtype, "q, k, v must share a dtype"
    assert q.stride(-1) == k.stride(-1) == v.stride(-1) == 1, "head dim must be contiguous"
    assert slot_table.dtype == lens.dtype == torch.int32, "slot_table and lens must be int32"
    assert slot_table.dim() == 2 and slot_table.stride(1) == 1
    assert rows.shape == lens.shape == (N,) and rows.is_contiguous() and lens.is_contiguous()
    assert group >= 1 and N % group == 0, "rows must come in whole runs of `group`"
    write = _check_new_token(q, k, k_new, v_new, write_slots)
    if not write:
        k_new, v_new, write_slots = q, q, lens  # never read: WRITE=False compiles their use out

    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    beams, TILE, num_warps = _beams_tile_and_warps(N // group * H)
    _beam_attention_kernel[(N // group, H)](
        q, k, v, slot_table, rows, lens, out, scale, D, group,
        k_new, v_new, write_slots,
        q.stride(0), q.stride(1),
        k.stride(0), k.stride(1),
        v.stride(0), v.stride(1),
        slot_table.stride(0),
        out.stride(0), out.stride(1),
        k_new.stride(0), k_new.stride(1),
        v_new.stride(0), v_new.stride(1),
        BEAMS=min(beams, group & -group),  # a power of 2 that divides group: no beams past a run
        TILE=TILE, BLOCK_D=triton.next_power_of_2(D),
        WRITE=write, num_warps=num_warps,
    )
    return out


def beam_attention_ref(q, k, v, slot_table, rows, lens, scale, group, *, k_new=None, v_new=None, write_slots=None):
    """Decode attention of `q` (N, H, D) over the cache `k`, `v` (slots, H, D), rows in runs of
    `group` beams (N % group == 0): row i reads the `lens[i]` (>= 1, current token included) slots
    listed in `slot_table[rows[i]]`, slot_table (R, T) int32; `slot_attention_ref`, whose meaning
    does not depend on the runs. Given k_new, v_new (N, H, D) and write_slots (N,) int32 or int64,
    first stores k_new[i], v_new[i] in the cache at write_slots[i], in place; row i's last slot must
    be write_slots[i]. Returns (N, H, D) in q's dtype."""
    assert q.shape[0] % group == 0, "rows must come in whole runs of `group`"
    return slot_attention_ref(q, k, v, slot_table, rows, lens, scale, k_new=k_new, v_new=v_new,
                              write_slots=write_slots)
