"""The decoder rows of newly admitted sentences, set up in one launch.

`admit_rows(rows, prefixes, beams, adapters, first_blocks, source_blocks, source_lengths, hyp, kv_len,
finished, score, fin_score, improvable, adapter, write_block, cross_slots, cross_len, block_size,
blocked)`, over the rows' state of engine/rows.py. Meaning, as a plain loop:

    for i, r in enumerate(rows):
        hyp[r, :W] = prefixes[i]                           # the decoder prefix, padded to W
        kv_len[r], finished[r] = 0, False
        score[r] = 0.0 if beams[i] == 0 else blocked       # as HF: every beam but the first out of the race
        fin_score[r], improvable[r] = -inf, True
        adapter[r] = adapters[i]
        if first_blocks[i] >= 0:
            write_block[r] = first_blocks[i]               # the block its first positions go into
        cross_slots[r, :P * block_size] = [b * block_size + o for b in source_blocks[i] for o in range(block_size)]
        cross_len[r] = source_lengths[i]

with P = source_blocks.shape[1] (block lists padded to the widest); later entries of a row keep
what they held. The per-row inputs are int32; rows are distinct.

Why: as tensor operations this was ~16 small launches (index writes, fills), ~0.3 ms of host time
per admission, and with a typed sentence the device finished its encoder first and waited
(600M: 0.14 ms idle between the encoder and the prefix step; H200, bench.marks, 2026-11-30).
"""

import torch

from kernels._triton import tl, triton


@triton.jit
def _admit_rows_kernel(
    rows_ptr, prefixes_ptr, beams_ptr, adapters_ptr, first_blocks_ptr, source_blocks_ptr, source_lengths_ptr,
    hyp_ptr, kv_len_ptr, finished_ptr, score_ptr, fin_score_ptr, improvable_ptr, adapter_ptr, write_block_ptr,
    cross_slots_ptr, cross_len_ptr, W, P, stride_hyp, stride_cross, block_size, blocked,
    BLOCK_W: tl.constexpr, BLOCK_SLOTS: tl.constexpr,
):
    i = tl.program_id(0)
    r = tl.load(rows_ptr + i).to(tl.int64)
    w = tl.arange(0, BLOCK_W)
    tl.store(hyp_ptr + r * stride_hyp + w, tl.load(prefixes_ptr + i * W + w, mask=w < W).to(tl.int64), mask=w < W)
    tl.store(kv_len_ptr + r, 0)
    tl.store(finished_ptr + r, 0)
    tl.store(score_ptr + r, tl.where(tl.load(beams_ptr + i) == 0, 0.0, blocked))
    tl.store(fin_score_ptr + r, float("-inf"))
    tl.store(improvable_ptr + r, 1)
    tl.store(adapter_ptr + r, tl.load(adapters_ptr + i))
    first = tl.load(first_blocks_ptr + i)
    tl.store(write_block_ptr + r, first, mask=first >= 0)
    tl.store(cross_len_ptr + r, tl.load(source_lengths_ptr + i))
    for start in range(0, P * block_size, BLOCK_SLOTS):
        j = start + tl.arange(0, BLOCK_SLOTS)
        ok = j < P * block_size
        block = tl.load(source_blocks_ptr + i * P + j // block_size, mask=ok, other=0)
        tl.store(cross_slots_ptr + r * stride_cross + j, block * block_size + j % block_size, mask=ok)


def _check(rows, prefixes, beams, adapters, first_blocks, source_blocks, source_lengths, hyp, kv_len, finished,
           score, fin_score, improvable, adapter, write_block, cross_slots, cross_len):
    n = rows.shape[0]
    for t in (rows, prefixes, beams, adapters, first_blocks, source_blocks, source_lengths):
        assert t.dtype == torch.int32 and t.shape[0] == n and t.is_contiguous(), "per-row inputs: int32, one row each"
    assert hyp.dtype == torch.int64 and finished.dtype == improvable.dtype == torch.bool
    assert kv_len.dtype == adapter.dtype == write_block.dtype == cross_slots.dtype == cross_len.dtype == torch.int32
    assert score.dtype == fin_score.dtype == torch.float32


def admit_rows_triton(rows, prefixes, beams, adapters, first_blocks, source_blocks, source_lengths, hyp, kv_len,
                      finished, score, fin_score, improvable, adapter, write_block, cross_slots, cross_len,
                      block_size, blocked):
    """Triton version of `admit_rows_ref`; same arguments, same state afterwards."""
    args = (rows, prefixes, beams, adapters, first_blocks, source_blocks, source_lengths, hyp, kv_len, finished,
            score, fin_score, improvable, adapter, write_block, cross_slots, cross_len)
    _check(*args)
    assert hyp.stride(1) == cross_slots.stride(1) == 1
    n, W = prefixes.shape
    P = source_blocks.shape[1]
    if n == 0:
        return
    _admit_rows_kernel[(n,)](
        rows, prefixes, beams, adapters, first_blocks, source_blocks, source_lengths, hyp, kv_len,
        finished.view(torch.uint8), score, fin_score, improvable.view(torch.uint8), adapter, write_block,
        cross_slots, cross_len, W, P, hyp.stride(0), cross_slots.stride(0), block_size, blocked,
        BLOCK_W=triton.next_power_of_2(W), BLOCK_SLOTS=256, num_warps=1,
    )


def admit_rows_ref(rows, prefixes, beams, adapters, first_blocks, source_blocks, source_lengths, hyp, kv_len,
                   finished, score, fin_score, improvable, adapter, write_block, cross_slots, cross_len,
                   block_size, blocked):
    """Per row i of `rows` (n,): prefixes (n, W), beams, adapters, first_blocks (-1: none),
    source_lengths (n,) and source_blocks (n, P), all int32; the rows' state of engine/rows.py,
    updated in place; the cross cache's block_size; HF's `blocked` beam score."""
    _check(rows, prefixes, beams, adapters, first_blocks, source_blocks, source_lengths, hyp, kv_len, finished,
           score, fin_score, improvable, adapter, write_block, cross_slots, cross_len)
    r = rows.long()  # (n,)
    hyp[r, : prefixes.shape[1]] = prefixes.long()
    # index_fill_, not `kv_len[r] = 0`: assigning a Python number through a tensor index copies it
    # from pageable memory, which waits for the device.
    kv_len.index_fill_(0, r, 0)
    finished.index_fill_(0, r, False)
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
