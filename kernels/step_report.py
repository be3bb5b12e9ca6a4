"""What the host reads after a decode step, stored by the step itself into pinned host memory.

`step_report(done, rows, kv_len, hyp, done_host, best_host)`, over the rows' state of
engine/rows.py right after a step's search, for S sentences of B rows each (rows (S, B)). Meaning,
as a plain loop:

    for s in range(S):
        done_host[s] = done[s]
        if best_host is not None:                  # the sentence's best hypothesis so far: its first
            lead = rows[s, 0]                      # row's (the search keeps a sentence's rows sorted)
            n = min(kv_len[lead] + 1, T)           # its length: the positions fed, then the new token
            best_host[s, :n] = hyp[lead, :n]       # later positions keep what they held

`done_host` and `best_host` are pinned host tensors, readable once the step's event has passed.

Why: a copy of the step's `done` to the host after its CUDA graph kept the device idle ~9.5 us per
step (the copy engine's start and the graph's launch behind it); a kernel in the graph storing to
pinned memory costs ~1 us (H200, 150-kernel graphs replayed as the engine pipelines them,
2026-11-30). A sentence's partial result streamed to the window cost two more copies and a gather.
"""

import torch

from kernels._triton import tl, triton


@triton.jit
def _step_report_kernel(
    done_ptr, rows_ptr, kv_len_ptr, hyp_ptr, done_host_ptr, best_host_ptr, B, T, stride_hyp, stride_best,
    BEST: tl.constexpr, BLOCK: tl.constexpr,
):
    s = tl.program_id(0)
    tl.store(done_host_ptr + s, tl.load(done_ptr + s))
    if BEST:
        lead = tl.load(rows_ptr + s * B)
        n = tl.minimum(tl.load(kv_len_ptr + lead) + 1, T)
        for start in range(0, n, BLOCK):
            p = start + tl.arange(0, BLOCK)
            tokens = tl.load(hyp_ptr + lead * stride_hyp + p, mask=p < n)
            tl.store(best_host_ptr + s.to(tl.int64) * stride_best + p, tokens, mask=p < n)


def _check(done, rows, kv_len, hyp, done_host, best_host):
    S = rows.shape[0]
    assert done.shape == (S,) and done.dtype == done_host.dtype == torch.bool and done_host.shape[0] >= S
    assert best_host is None or (best_host.shape[0] >= S and best_host.dtype == hyp.dtype == torch.int64)
    assert kv_len.dtype == torch.int32 and rows.dtype == torch.int64


def step_report_triton(done, rows, kv_len, hyp, done_host, best_host=None):
    """Triton version of `step_report_ref`; same arguments, same result."""
    _check(done, rows, kv_len, hyp, done_host, best_host)
    assert rows.is_contiguous() and hyp.stride(1) == 1 and (best_host is None or best_host.stride(1) == 1)
    S, B = rows.shape
    if S == 0:
        return
    T = hyp.shape[1] if best_host is None else min(hyp.shape[1], best_host.shape[1])
    _step_report_kernel[(S,)](
        done.view(torch.uint8), rows, kv_len, hyp, done_host.view(torch.uint8),
        best_host if best_host is not None else hyp, B, T, hyp.stride(0),
        best_host.stride(0) if best_host is not None else 0,
        BEST=best_host is not None, BLOCK=256, num_warps=1,
    )


def step_report_ref(done, rows, kv_len, hyp, done_host, best_host=None):
    """done (S,) bool; rows (S, B) int64; kv_len (R,) int32; hyp (R, T) int64; done_host (>= S,)
    bool and best_host (>= S, T') int64 or None, in pinned host memory (any memory here)."""
    _check(done, rows, kv_len, hyp, done_host, best_host)
    S = rows.shape[0]
    done_host[:S].copy_(done)
    if best_host is None:
        return
    T = min(hyp.shape[1], best_host.shape[1])
    lead = rows[:, 0]  # (S,)
    n = (kv_len[lead] + 1).clamp(max=T)  # (S,)
    keep = torch.arange(T, device=hyp.device)[None, :] < n[:, None]  # (S, T)
    best_host[:S, :T].copy_(torch.where(keep, hyp[lead, :T], best_host[:S, :T].to(hyp.device)))
