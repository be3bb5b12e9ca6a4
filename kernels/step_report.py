"""What the host reads after a decode step, stored by the step itself into pinned host memory.

`step_report(done, rows, state, report, every)`, over the rows' state `state` (kernels.RowState,
engine/rows.py) right after a step's search, for S sentences of B rows each (rows (S, B)), into
`report` = (done_host, best_host, length_host, score_host) (kernels.StepReport). Meaning, as a
plain loop:

    for s in range(S):
        done_host[s] = done[s]
        if done[s] or every:                       # a result, or (every) a partial result
            lead = rows[s, 0]                      # the search keeps a sentence's rows sorted
            if done[s] and fin_score[lead] > -inf:
                n, tokens = fin_len[lead], fin_hyp[lead]          # its best finished hypothesis
                score_host[s] = fin_score[lead]                   # and its normalised score
            else:
                n, tokens = kv_len[lead] + 1, hyp[lead]           # its best running one: the
                score_host[s] = score[lead]                       # positions fed, the new token;
            n = min(n, T)                                         # its sum of log-probabilities
            best_host[s, :n], length_host[s] = tokens[:n], n      # later positions keep what they held

done_host, best_host, length_host and score_host are pinned host tensors, readable once the step's
event has passed (engine/step_runner.py reads a step's results, their scores and partial results
from them).

Why: a copy of the step's `done` to the host after its CUDA graph keeps the device idle (the copy
engine's start, and the next graph's launch behind it); a kernel in the graph storing to pinned
memory costs far less. A sentence's partial result streamed to the window would cost two more
copies and a gather, and the result of a typed sentence a gather and a waiting copy after its
last step.
"""

import torch

from dragoman.kernels._triton import chained_launch, launch_options, tl, triton, wait_for_inputs
from dragoman.kernels.dispatch import dispatch

NEG_INF = float("-inf")


@triton.jit
def _step_report_kernel(
    done_ptr, rows_ptr, kv_len_ptr, hyp_ptr, score_ptr, fin_score_ptr, fin_hyp_ptr, fin_len_ptr,
    done_host_ptr, best_host_ptr, length_host_ptr, score_host_ptr, B, T, stride_hyp, stride_fin_hyp, stride_best,
    EVERY: tl.constexpr, BLOCK: tl.constexpr, CHAINED: tl.constexpr,
):
    wait_for_inputs(CHAINED)  # everything read here may be what the kernel before wrote
    s = tl.program_id(0)
    done = tl.load(done_ptr + s)
    tl.store(done_host_ptr + s, done)
    if (done != 0) | EVERY:
        lead = tl.load(rows_ptr + s * B)
        fin_score = tl.load(fin_score_ptr + lead)
        finished = (done != 0) & (fin_score > float("-inf"))
        n = tl.where(finished, tl.load(fin_len_ptr + lead), tl.load(kv_len_ptr + lead) + 1)
        n = tl.minimum(n, T)
        source = tl.where(finished, fin_hyp_ptr + lead * stride_fin_hyp, hyp_ptr + lead * stride_hyp)
        for start in range(0, n, BLOCK):
            p = start + tl.arange(0, BLOCK)
            tokens = tl.load(source + p, mask=p < n)
            tl.store(best_host_ptr + s.to(tl.int64) * stride_best + p, tokens, mask=p < n)
        tl.store(length_host_ptr + s, n)
        tl.store(score_host_ptr + s, tl.where(finished, fin_score, tl.load(score_ptr + lead)))


def _check(done, rows, kv_len, hyp, score, fin_score, fin_hyp, fin_len, done_host, best_host, length_host,
           score_host):
    S = rows.shape[0]
    assert done.shape == (S,) and done.dtype == done_host.dtype == torch.bool
    assert done_host.shape[0] >= S and best_host.shape[0] >= S and length_host.shape[0] >= S
    assert score_host.shape[0] >= S
    assert hyp.dtype == fin_hyp.dtype == best_host.dtype == torch.int64 and hyp.shape == fin_hyp.shape
    assert kv_len.dtype == fin_len.dtype == length_host.dtype == torch.int32 and rows.dtype == torch.int64
    assert score.dtype == fin_score.dtype == score_host.dtype == torch.float32


def step_report_triton(done, rows, state, report, every):
    """Triton version of `step_report_ref`; same arguments, same result."""
    kv_len, hyp, score, fin_score = state.kv_len, state.hyp, state.score, state.fin_score
    fin_hyp, fin_len = state.fin_hyp, state.fin_len
    done_host, best_host, length_host, score_host = report
    _check(done, rows, kv_len, hyp, score, fin_score, fin_hyp, fin_len, done_host, best_host, length_host, score_host)
    assert rows.is_contiguous() and hyp.stride(1) == fin_hyp.stride(1) == best_host.stride(1) == 1
    S, B = rows.shape
    if S == 0:
        return
    chained = chained_launch(rows)
    _step_report_kernel[(S,)](
        done.view(torch.uint8), rows, kv_len, hyp, score, fin_score, fin_hyp, fin_len,
        done_host.view(torch.uint8), best_host, length_host, score_host, B, min(hyp.shape[1], best_host.shape[1]),
        hyp.stride(0), fin_hyp.stride(0), best_host.stride(0), EVERY=every, BLOCK=256, CHAINED=chained, num_warps=1,
        **launch_options(chained),
    )


def step_report_ref(done, rows, state, report, every):
    """done (S,) bool; rows (S, B) int64; `state` (kernels.RowState), of which it reads kv_len,
    fin_len (R,) int32, score, fin_score (R,) float32, hyp, fin_hyp (R, T) int64; `report`
    (kernels.StepReport): done_host (>= S,) bool, best_host (>= S, T') int64, length_host (>= S,)
    int32 and score_host (>= S,) float32 in pinned host memory (any memory here); `every` a bool."""
    kv_len, hyp, score, fin_score = state.kv_len, state.hyp, state.score, state.fin_score
    fin_hyp, fin_len = state.fin_hyp, state.fin_len
    done_host, best_host, length_host, score_host = report
    _check(done, rows, kv_len, hyp, score, fin_score, fin_hyp, fin_len, done_host, best_host, length_host, score_host)
    S = rows.shape[0]
    done_host[:S].copy_(done)
    T = min(hyp.shape[1], best_host.shape[1])
    lead = rows[:, 0]  # (S,)
    finished = done & (fin_score[lead] > NEG_INF)  # (S,)
    n = torch.where(finished, fin_len[lead], kv_len[lead] + 1).clamp(max=T)  # (S,)
    tokens = torch.where(finished[:, None], fin_hyp[lead, :T], hyp[lead, :T])  # (S, T)
    report = (done | every).cpu()  # (S,)
    keep = (torch.arange(T, device=hyp.device)[None, :] < n[:, None]).cpu() & report[:, None]  # (S, T)
    best_host[:S, :T].copy_(torch.where(keep, tokens.cpu(), best_host[:S, :T]))
    length_host[:S].copy_(torch.where(report, n.cpu(), length_host[:S]))
    scores = torch.where(finished, fin_score[lead], score[lead]).cpu()  # (S,)
    score_host[:S].copy_(torch.where(report, scores, score_host[:S]))


def step_report(done, rows, state, report, every):
    """After a step's search over rows (S, B), into the pinned host memory of `report` (a
    StepReport): done[s] and, for each sentence done (or every one, with `every`), its best
    hypothesis and its length n: its best finished one where it is done and has one (fin_hyp,
    fin_len of its first row), else its best running one (hyp[rows[s, 0], :kv_len[rows[s, 0]] + 1]),
    and its score (that finished one's fin_score, else the running one's score).
    `state` a RowState (engine/rows.py)."""
    dispatch(step_report_triton, step_report_ref, done, done, rows, state, report, every)
