"""What each decoder row feeds into a decode step, and the cache bookkeeping that goes with it.

`step_inputs(rows, state, padding_row, block_size) -> StepInputs(fed_rows, tokens, positions, write_slots,
self_lens, cross_lens, priors)`, over the rows' state `state` (kernels.RowState, engine/rows.py).
Meaning, as a plain loop:

    for i, r in enumerate(rows):
        if finished[r]:                        # its sentence is done: it sits the step out as the padding row
            r = padding_row
        fed_rows[i] = r
        n = kv_len[r]                          # the position row r feeds: its hypothesis' length so far
        tokens[i], positions[i] = hyp[r, n], n
        write_slots[i] = write_block[r] * block_size + n % block_size     # where its K/V go
        kv_slots[r, n] = write_slots[i]
        self_lens[i], cross_lens[i] = n + 1, cross_len[r]
        priors[i] = i + prior_offset[r] if prior_offset[r] != 0 else -1   # the row feeding position n - 1
        if r != padding_row:
            kv_len[r], prior_offset[r] = n + 1, 0

Rows are distinct but for the padding row, which pads a step: its length must be 0 and stays 0, so
every padding row feeds position 0 afresh. All reads see the state as it was before the call.
`prior_offset` is nonzero only in a sentence's first step, for the beams whose position 0 another
beam feeds in that step (kernels.admit_rows, kernels.slot_attention's `priors`).

Why: done with tensor indexing this is ~17 small launches at the start of every step; one
program per row does it in one.
"""

import torch

from dragoman.kernels._triton import chained_launch, launch_options, tl, triton, wait_for_inputs
from dragoman.kernels.dispatch import dispatch
from dragoman.kernels.row_state import StepInputs


@triton.jit
def _step_inputs_kernel(
    rows_ptr, kv_len_ptr, write_block_ptr, kv_slots_ptr, hyp_ptr, cross_len_ptr, finished_ptr, prior_offset_ptr,
    fed_rows_ptr, tokens_ptr, positions_ptr, write_slots_ptr, self_lens_ptr, cross_lens_ptr, priors_ptr,
    N, padding_row, block_size, stride_kv_slots, stride_hyp, BLOCK: tl.constexpr, CHAINED: tl.constexpr,
):
    wait_for_inputs(CHAINED)  # everything read here may be what the step before wrote
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = i < N
    r = tl.load(rows_ptr + i, mask=ok, other=0).to(tl.int64)
    r = tl.where(tl.load(finished_ptr + r, mask=ok, other=0) != 0, padding_row, r)
    tl.store(fed_rows_ptr + i, r, mask=ok)
    n = tl.load(kv_len_ptr + r, mask=ok, other=0)  # int32
    token = tl.load(hyp_ptr + r * stride_hyp + n, mask=ok, other=0)
    write = tl.load(write_block_ptr + r, mask=ok, other=0).to(tl.int64) * block_size + n % block_size
    tl.store(kv_slots_ptr + r * stride_kv_slots + n, write.to(tl.int32), mask=ok)
    offset = tl.load(prior_offset_ptr + r, mask=ok, other=0)
    tl.store(kv_len_ptr + r, n + 1, mask=ok & (r != padding_row))
    tl.store(prior_offset_ptr + r, 0, mask=ok & (r != padding_row) & (offset != 0))
    tl.store(tokens_ptr + i, token, mask=ok)
    tl.store(positions_ptr + i, n.to(tl.int64), mask=ok)
    tl.store(write_slots_ptr + i, write, mask=ok)
    tl.store(self_lens_ptr + i, n + 1, mask=ok)
    tl.store(cross_lens_ptr + i, tl.load(cross_len_ptr + r, mask=ok, other=0), mask=ok)
    tl.store(priors_ptr + i, tl.where(offset != 0, i + offset, -1), mask=ok)


def _outputs(rows):
    """fed_rows, tokens, positions, write_slots (N,) int64; self_lens, cross_lens, priors (N,) int32."""
    N, device = rows.shape[0], rows.device
    return StepInputs(*(torch.empty(N, dtype=dtype, device=device) for dtype in (torch.int64,) * 4 + (torch.int32,) * 3))


def step_inputs_triton(rows, state, padding_row, block_size):
    """Triton version of `step_inputs_ref`; same arguments, same result, same state afterwards."""
    kv_len, write_block, kv_slots, hyp = state.kv_len, state.write_block, state.kv_slots, state.hyp
    cross_len, finished, prior_offset = state.cross_len, state.finished, state.prior_offset
    assert kv_slots.stride(1) == hyp.stride(1) == 1 and rows.is_contiguous() and finished.dtype == torch.bool
    out = _outputs(rows)
    N = rows.shape[0]
    BLOCK = 128
    chained = chained_launch(rows)
    _step_inputs_kernel[(triton.cdiv(N, BLOCK),)](
        rows, kv_len, write_block, kv_slots, hyp, cross_len, finished.view(torch.uint8), prior_offset, *out,
        N, padding_row, block_size, kv_slots.stride(0), hyp.stride(0), BLOCK=BLOCK, CHAINED=chained,
        num_warps=4, **launch_options(chained),
    )
    return out


def step_inputs_ref(rows, state, padding_row, block_size):
    """`rows` (N,) int64 row ids; `state` (kernels.RowState), of which it reads kv_len, write_block,
    cross_len, prior_offset (R,) int32, kv_slots (R, T) int32, hyp (R, T) int64, finished (R,)
    bool; `padding_row` the padding row's index. Updates kv_len, kv_slots and prior_offset in place and returns
    StepInputs: the rows fed (finished ones replaced by the padding row), tokens, positions, write_slots
    (N,) int64 and self_lens, cross_lens, priors (N,) int32."""
    kv_len, write_block, kv_slots, hyp = state.kv_len, state.write_block, state.kv_slots, state.hyp
    cross_len, finished, prior_offset = state.cross_len, state.finished, state.prior_offset
    rows = torch.where(finished[rows], padding_row, rows)  # (N,)
    n = kv_len[rows]  # (N,) int32
    position = n.long()
    write = write_block[rows].long() * block_size + position % block_size
    offset = prior_offset[rows]  # (N,)
    priors = torch.where(offset != 0, torch.arange(rows.shape[0], device=rows.device) + offset, -1).int()
    kv_slots[rows, position] = write.int()
    kv_len[rows] = torch.where(rows == padding_row, n, n + 1)
    prior_offset[rows] = torch.where(rows == padding_row, offset, 0)
    return StepInputs(rows, hyp[rows, position], position, write, n + 1, cross_len[rows], priors)


def step_inputs(rows, state, padding_row, block_size):
    """Each of the rows (N,) int64, or `padding_row` where its sentence is `finished`, feeds the token at
    its length n = kv_len[r] and claims its cache slot: kv_slots[r, n] = write_block[r] * block_size
    + n % block_size; kv_len[r] += 1 but for the padding row (length 0). Returns
    StepInputs: the rows fed r, tokens, positions (= n), write_slots (N,) int64 and self_lens
    (= n + 1), cross_lens (= cross_len[r]), priors (= i + prior_offset[r] where that is nonzero,
    else -1; the offset is spent) (N,) int32. `state` a RowState (engine/rows.py)."""
    return dispatch(step_inputs_triton, step_inputs_ref, rows, rows, state, padding_row, block_size)
