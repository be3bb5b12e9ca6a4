"""Asks L2 for the bytes of some tensors that a later kernel will read: `l2_prefetch(tensors)`.

Meaning: nothing (a hint to the memory system; no value changes). On CUDA, one launch issues
`prefetch.global.L2` for every 128-byte line of every tensor: program p covers LINES lines of one
tensor, the tensors' programs one after another. Elsewhere it does nothing.

Why: a typed sentence's decode step is bound by the latency of its ~140 kernels, not by bandwidth,
and each projection's weights come from DRAM, as the output projection's 0.5 GB evicts L2 every
step. Weights already in L2 took a 4-row 4,096 -> 1,024 projection from 4.8 to 4.1 us (H200,
2026-11-30). Launched on a stream of its own (engine/model.py `AheadOfUse`), while a decoder layer
runs, it asks for the next layer's weights, off the chain of kernels that wait on each other.
Unmeasured in the engine (branch exp/step-results, 2026-11-30).
"""

from kernels._triton import HAVE_TRITON, prefetch_l2, tl, triton

MAX_TENSORS = 8
LINES = 256  # 128-byte lines per program: 32 KB


@triton.jit
def _l2_prefetch_kernel(
    p0, p1, p2, p3, p4, p5, p6, p7, n0, n1, n2, n3, n4, n5, n6, n7, e0, e1, e2, e3, e4, e5, e6,
    LINE: tl.constexpr, LINES: tl.constexpr,
):
    # Tensor t's programs end before e_t (the e_t ascending); its elements number n_t. Program pid
    # belongs to the first tensor whose programs end after it.
    pid = tl.program_id(0)
    base, n, first = p0, n0, pid * 0
    base, n, first = tl.where(pid >= e0, p1, base), tl.where(pid >= e0, n1, n), tl.where(pid >= e0, e0, first)
    base, n, first = tl.where(pid >= e1, p2, base), tl.where(pid >= e1, n2, n), tl.where(pid >= e1, e1, first)
    base, n, first = tl.where(pid >= e2, p3, base), tl.where(pid >= e2, n3, n), tl.where(pid >= e2, e2, first)
    base, n, first = tl.where(pid >= e3, p4, base), tl.where(pid >= e3, n4, n), tl.where(pid >= e3, e3, first)
    base, n, first = tl.where(pid >= e4, p5, base), tl.where(pid >= e4, n5, n), tl.where(pid >= e4, e4, first)
    base, n, first = tl.where(pid >= e5, p6, base), tl.where(pid >= e5, n6, n), tl.where(pid >= e5, e5, first)
    base, n, first = tl.where(pid >= e6, p7, base), tl.where(pid >= e6, n7, n), tl.where(pid >= e6, e6, first)
    line = (pid - first).to(tl.int64) * LINES + tl.arange(0, LINES)
    prefetch_l2(base + tl.minimum(line * LINE, n - 1))  # past the end: its last element again


def l2_prefetch(tensors):
    """Hints L2 to fetch the given CUDA tensors (at most MAX_TENSORS, contiguous, one dtype)."""
    if not (tensors and tensors[0].is_cuda and HAVE_TRITON):
        return
    assert len(tensors) <= MAX_TENSORS and all(t.is_contiguous() and t.dtype == tensors[0].dtype for t in tensors)
    line = 128 // tensors[0].element_size()  # elements per line
    padded = list(tensors) + [tensors[0]] * (MAX_TENSORS - len(tensors))
    programs = [triton.cdiv(triton.cdiv(t.numel(), line), LINES) if i < len(tensors) else 0 for i, t in enumerate(padded)]
    ends = [sum(programs[: i + 1]) for i in range(MAX_TENSORS)]
    _l2_prefetch_kernel[(ends[-1],)](*padded, *(t.numel() for t in padded), *ends[:-1], LINE=line, LINES=LINES, num_warps=1)
