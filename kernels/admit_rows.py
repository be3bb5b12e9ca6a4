"""The decoder rows of newly admitted sentences, set up in one launch.

`admit_rows(new, state, block_size, blocked)`, `new` the admitted rows' inputs (kernels.AdmittedRows:
rows, prefixes, beams, adapters, first_blocks, prior_offsets, source_blocks, source_lengths, limits)
and `state` the rows' state (kernels.RowState, engine/rows.py). Meaning, as a plain loop:

    for i, r in enumerate(rows):
        hyp[r, :W] = prefixes[i]                           # the decoder prefix, padded to W
        finished[r], prior_offset[r] = False, prior_offsets[i]
        if prior_offsets[i] == 0:
            kv_len[r] = 0                                  # an empty cache
        else:                                              # position 0 comes from row rows[i + offset], fed
            kv_len[r] = 1                                  # in the same first step (into its first block)
            kv_slots[r, 0] = first_blocks[i + prior_offsets[i]] * block_size
        score[r] = 0.0 if beams[i] == 0 else blocked       # as HF: every beam but the first out of the race
        fin_score[r], improvable[r] = -inf, True
        adapter[r] = adapters[i]
        if first_blocks[i] >= 0:
            write_block[r] = first_blocks[i]               # the block its first positions go into
        cross_slots[r, :P * block_size] = [b * block_size + o for b in source_blocks[i] for o in range(block_size)]
        cross_len[r] = source_lengths[i]
        limit[r] = limits[i]                               # its sentence's max_length

with P = source_blocks.shape[1] (block lists padded to the widest); later entries of a row keep
what they held. The per-row inputs are int32; rows are distinct. A row with a prior offset feeds
position 1 in its sentence's first step while the row it names feeds position 0 (engine/admission.py).

Why: as tensor operations this is ~16 small launches (index writes, fills), and with a typed
sentence the device would finish its encoder first and wait for the host's launches.
"""

import torch

from dragoman.kernels._triton import tl, triton
from dragoman.kernels.dispatch import dispatch


@triton.jit
def _admit_rows_kernel(
    rows_ptr, prefixes_ptr, beams_ptr, adapters_ptr, first_blocks_ptr, prior_offsets_ptr, source_blocks_ptr,
    source_lengths_ptr, limits_ptr, hyp_ptr, kv_len_ptr, kv_slots_ptr, finished_ptr, score_ptr, fin_score_ptr,
    improvable_ptr, adapter_ptr, write_block_ptr, prior_offset_ptr, cross_slots_ptr, cross_len_ptr, limit_ptr, W, P,
    stride_hyp, stride_kv_slots, stride_cross, block_size, blocked,
    BLOCK_W: tl.constexpr, BLOCK_SLOTS: tl.constexpr,
):
    i = tl.program_id(0)
    r = tl.load(rows_ptr + i).to(tl.int64)
    w = tl.arange(0, BLOCK_W)
    tl.store(hyp_ptr + r * stride_hyp + w, tl.load(prefixes_ptr + i * W + w, mask=w < W).to(tl.int64), mask=w < W)
    offset = tl.load(prior_offsets_ptr + i)
    tl.store(prior_offset_ptr + r, offset)
    tl.store(kv_len_ptr + r, (offset != 0).to(tl.int32))
    if offset != 0:
        tl.store(kv_slots_ptr + r * stride_kv_slots, tl.load(first_blocks_ptr + i + offset) * block_size)
    tl.store(finished_ptr + r, 0)
    tl.store(score_ptr + r, tl.where(tl.load(beams_ptr + i) == 0, 0.0, blocked))
    tl.store(fin_score_ptr + r, float("-inf"))
    tl.store(improvable_ptr + r, 1)
    tl.store(adapter_ptr + r, tl.load(adapters_ptr + i))
    first = tl.load(first_blocks_ptr + i)
    tl.store(write_block_ptr + r, first, mask=first >= 0)
    tl.store(cross_len_ptr + r, tl.load(source_lengths_ptr + i))
    tl.store(limit_ptr + r, tl.load(limits_ptr + i))
    for start in range(0, P * block_size, BLOCK_SLOTS):
        j = start + tl.arange(0, BLOCK_SLOTS)
        ok = j < P * block_size
        block = tl.load(source_blocks_ptr + i * P + j // block_size, mask=ok, other=0)
        tl.store(cross_slots_ptr + r * stride_cross + j, block * block_size + j % block_size, mask=ok)


def _check(rows, prefixes, beams, adapters, first_blocks, prior_offsets, source_blocks, source_lengths, limits, hyp,
           kv_len, kv_slots, finished, score, fin_score, improvable, adapter, write_block, prior_offset, cross_slots,
           cross_len, limit):
    n = rows.shape[0]
    for t in (rows, prefixes, beams, adapters, first_blocks, prior_offsets, source_blocks, source_lengths, limits):
        assert t.dtype == torch.int32 and t.shape[0] == n and t.is_contiguous(), "per-row inputs: int32, one row each"
    assert hyp.dtype == torch.int64 and finished.dtype == improvable.dtype == torch.bool
    for t in (kv_len, kv_slots, adapter, write_block, prior_offset, cross_slots, cross_len, limit):
        assert t.dtype == torch.int32
    assert score.dtype == fin_score.dtype == torch.float32


def admit_rows_triton(new, state, block_size, blocked):
    """Triton version of `admit_rows_ref`; same arguments, same state afterwards."""
    rows, prefixes, beams, adapters, first_blocks, prior_offsets, source_blocks, source_lengths, limits = new
    hyp, kv_len, kv_slots, finished, score = state.hyp, state.kv_len, state.kv_slots, state.finished, state.score
    fin_score, improvable, adapter, write_block = state.fin_score, state.improvable, state.adapter, state.write_block
    prior_offset, cross_slots, cross_len, limit = state.prior_offset, state.cross_slots, state.cross_len, state.limit
    _check(rows, prefixes, beams, adapters, first_blocks, prior_offsets, source_blocks, source_lengths, limits, hyp,
           kv_len, kv_slots, finished, score, fin_score, improvable, adapter, write_block, prior_offset, cross_slots,
           cross_len, limit)
    assert hyp.stride(1) == kv_slots.stride(1) == cross_slots.stride(1) == 1
    n, W = prefixes.shape
    P = source_blocks.shape[1]
    if n == 0:
        return
    _admit_rows_kernel[(n,)](
        rows, prefixes, beams, adapters, first_blocks, prior_offsets, source_blocks, source_lengths, limits, hyp, kv_len,
        kv_slots, finished.view(torch.uint8), score, fin_score, improvable.view(torch.uint8), adapter, write_block,
        prior_offset, cross_slots, cross_len, limit, W, P, hyp.stride(0), kv_slots.stride(0), cross_slots.stride(0),
        block_size, blocked,
        BLOCK_W=triton.next_power_of_2(W), BLOCK_SLOTS=256, num_warps=1,
    )


def admit_rows_ref(new, state, block_size, blocked):
    """`new` (kernels.AdmittedRows), per row i of `new.rows` (n,): prefixes (n, W), beams, adapters,
    first_blocks (-1: none), prior_offsets (0: none), source_lengths, limits (n,) and source_blocks
    (n, P), all int32; `state` (kernels.RowState), updated in place; the self-attention cache's
    block_size (the cross cache's too); HF's `blocked` beam score."""
    rows, prefixes, beams, adapters, first_blocks, prior_offsets, source_blocks, source_lengths, limits = new
    hyp, kv_len, kv_slots, finished, score = state.hyp, state.kv_len, state.kv_slots, state.finished, state.score
    fin_score, improvable, adapter, write_block = state.fin_score, state.improvable, state.adapter, state.write_block
    prior_offset, cross_slots, cross_len, limit = state.prior_offset, state.cross_slots, state.cross_len, state.limit
    _check(rows, prefixes, beams, adapters, first_blocks, prior_offsets, source_blocks, source_lengths, limits, hyp,
           kv_len, kv_slots, finished, score, fin_score, improvable, adapter, write_block, prior_offset, cross_slots,
           cross_len, limit)
    r = rows.long()  # (n,)
    hyp[r, : prefixes.shape[1]] = prefixes.long()
    # index_fill_, not `finished[r] = False`: assigning a Python number through a tensor index copies
    # it from pageable memory, which waits for the device.
    finished.index_fill_(0, r, False)
    prior_offset[r] = prior_offsets
    fed_later = prior_offsets != 0  # (n,)
    kv_len[r] = fed_later.int()
    at = torch.arange(r.shape[0], device=r.device) + prior_offsets  # (n,) where position 0 comes from
    kv_slots[r[fed_later], 0] = first_blocks[at[fed_later]] * block_size
    score[r] = torch.where(beams == 0, 0.0, blocked)
    fin_score.index_fill_(0, r, float("-inf"))
    improvable.index_fill_(0, r, True)
    adapter[r] = adapters
    taking = first_blocks >= 0
    write_block[r[taking]] = first_blocks[taking]
    offsets = torch.arange(block_size, dtype=torch.int32, device=rows.device)
    slots = (source_blocks[:, :, None] * block_size + offsets).flatten(1)  # (n, P, block) -> (n, P * block)
    cross_slots[r, : slots.shape[1]] = slots
    cross_len[r] = source_lengths
    limit[r] = limits


def admit_rows(new, state, block_size, blocked):
    """Sets up the rows new.rows (n,) of newly admitted sentences (`new` an AdmittedRows): each one's
    decoder prefix, an empty cache (or, where its prior offset is nonzero, position 0 in the first
    block of the row that feeds it in the sentence's first step), HF's starting beam score (0 for
    beam 0, else `blocked`), no finished hypothesis, its adapter, its first block where it has one,
    the cross-attention slots of its source (blocks of `block_size` slots) and its length, and its
    sentence's max_length. `state` (a RowState) is updated in place."""
    dispatch(admit_rows_triton, admit_rows_ref, new.rows, new, state, block_size, blocked)
