"""Fused log-softmax + top-k over the vocabulary, for beam search, without ever holding float32
log-probabilities for a whole row.

`logsoftmax_topk(logits, k) -> (values, indices, lse)`. Meaning, as a plain loop:

    for n in range(N):
        x = [float(v) if v < inf else -inf for v in logits[n]]   # NaN and +inf count as -inf
        lse[n] = log(sum(exp(v) for v in x))                      # -inf where every x is -inf
        order = sorted(range(V), key=lambda i: (-x[i], i))        # larger first; ties: lower index
        indices[n] = order[:k]
        values[n] = [-inf if x[i] == -inf else x[i] - lse[n] for i in order[:k]]

Tie rule: equal logits (-0.0 equals +0.0) come out lowest index first, also among -inf entries, so
a row with fewer than k finite logits still yields k distinct indices, and a row without a number
(all NaN, as a forward pass that overflowed in float16 gives) columns 0 to k - 1 of value -inf.
NaN has no rank, and a +inf logit no log-probability (inf - inf): counting them as -inf keeps
every value a log-probability or -inf, so the search goes on over the rest of the row.

The kernel runs in two stages over slices of SLICE columns. Stage 1 reads the logits once: each
program covers a few slices of one row and writes their logsumexp and each slice's largest logit.
Stage 2, one program per row, merges the logsumexps, ranks the slices by (largest logit, lower
slice first), and selects the k best columns among the k * SLICE columns of the k best slices.
That is exact: a column of any other slice ranks below the best column of each of those k slices.
Stage 2 ranks by int64 sort keys, (float bits mapped to ordered int32) << 32 | (2**31 - 1 - i),
so one max-reduction picks the larger value, and on a tie the lower column (or slice) i. Both
stages make NaN and +inf -inf in the columns they hold; stage 1 only in a program whose logsumexp
comes out NaN (one of them among its columns), so that healthy rows take no extra select.
"""

import torch

from dragoman.kernels._triton import chained_launch, launch_options, tl, triton, wait_for_inputs
from dragoman.kernels.dispatch import dispatch

INF = float("inf")

# Below every key of a real column: marks taken or missing candidates.
EMPTY_KEY = tl.constexpr(-(2**63))


@triton.jit
def sort_key(x, col):
    """int64 keys that order like (x, -col); x float32, col int32 >= 0 (a column or a slice)."""
    x = tl.where(x == 0.0, 0.0, x)  # -0.0 ties with +0.0
    bits = x.to(tl.int32, bitcast=True)
    ordered = tl.where(bits < 0, bits ^ 0x7FFFFFFF, bits)  # int32 order == float order
    return (ordered.to(tl.int64) << 32) | (0x7FFFFFFF - col).to(tl.int64)


@triton.jit
def _key_value_and_column(key):
    """Inverse of `sort_key`."""
    ordered = (key >> 32).to(tl.int32)
    bits = tl.where(ordered < 0, ordered ^ 0x7FFFFFFF, ordered)
    return bits.to(tl.float32, bitcast=True), 0x7FFFFFFF - key.to(tl.int32)  # low 32 bits


@triton.jit
def _logsumexp(x):
    m = tl.max(x, axis=0)
    m = tl.where(m == float("-inf"), 0.0, m)  # all -inf: the sum is 0, not NaN
    return m + tl.log(tl.sum(tl.exp(x - m), axis=0))


@triton.jit
def _slice_max_kernel(
    logits_ptr, slice_max_ptr, program_lse_ptr, V, stride_row, num_slices, num_programs,
    SLICE: tl.constexpr, SLICES_PER_PROGRAM: tl.constexpr, CHAINED: tl.constexpr,
):
    # Stage 1: program (row, p) writes the logsumexp of its slices and each slice's largest logit.
    wait_for_inputs(CHAINED)  # everything read here may be what the kernel before wrote
    row = tl.program_id(0)
    p = tl.program_id(1)
    first = p * SLICES_PER_PROGRAM * SLICE
    col = first + tl.arange(0, SLICES_PER_PROGRAM * SLICE)
    at = logits_ptr + row.to(tl.int64) * stride_row + col
    if first + SLICES_PER_PROGRAM * SLICE <= V:
        x = tl.load(at)  # unmasked, so the loads are 16 bytes wide (a mask ending at V splits them)
    else:
        x = tl.load(at, mask=col < V, other=float("-inf"))
    x = x.to(tl.float32)
    lse = _logsumexp(x)
    # NaN or +inf among these columns makes it NaN: only then they are made -inf and it is redone,
    # so that healthy columns pay no select each.
    if (lse != lse) | (lse == float("inf")):
        x = tl.where(x < float("inf"), x, float("-inf"))
        lse = _logsumexp(x)
    tl.store(program_lse_ptr + row * num_programs + p, lse)

    sl = p * SLICES_PER_PROGRAM + tl.arange(0, SLICES_PER_PROGRAM)  # (SLICES_PER_PROGRAM,)
    slice_max = tl.max(tl.reshape(x, (SLICES_PER_PROGRAM, SLICE)), axis=1)  # (SLICES_PER_PROGRAM,)
    tl.store(slice_max_ptr + row * num_slices + sl, slice_max, mask=sl < num_slices)


@triton.jit
def _topk_kernel(
    logits_ptr, slice_max_ptr, program_lse_ptr, values_ptr, indices_ptr, lse_ptr,
    V, stride_row, num_slices, num_programs,
    K: tl.constexpr, BLOCK_K: tl.constexpr, SLICE: tl.constexpr,
    BLOCK_SLICES: tl.constexpr, BLOCK_PROGRAMS: tl.constexpr, CHAINED: tl.constexpr,
):
    # Stage 2: program `row` writes the row's logsumexp and its K best columns.
    wait_for_inputs(CHAINED)  # everything read here may be what the kernel before wrote
    row = tl.program_id(0)
    i = tl.arange(0, BLOCK_PROGRAMS)
    program_lse = tl.load(program_lse_ptr + row * num_programs + i, mask=i < num_programs, other=float("-inf"))
    m = tl.max(program_lse, axis=0)
    m = tl.where(m == float("-inf"), 0.0, m)
    lse = m + tl.log(tl.sum(tl.exp(program_lse - m), axis=0))
    tl.store(lse_ptr + row, lse)

    # The K best slices (-1: fewer than K slices).
    sl = tl.arange(0, BLOCK_SLICES)
    slice_max = tl.load(slice_max_ptr + row * num_slices + sl, mask=sl < num_slices, other=float("-inf"))
    key = tl.where(sl < num_slices, sort_key(slice_max, sl), EMPTY_KEY)
    j = tl.arange(0, BLOCK_K)
    chosen = tl.full([BLOCK_K], -1, tl.int32)
    for n in range(K):
        best = tl.max(key, axis=0)
        key = tl.where(key == best, EMPTY_KEY, key)  # keys are unique: removes exactly one
        _, best_slice = _key_value_and_column(best)
        chosen = tl.where((j == n) & (best != EMPTY_KEY), best_slice, chosen)

    # The K best columns of those slices.
    col = chosen[:, None] * SLICE + tl.arange(0, SLICE)[None, :]  # (BLOCK_K, SLICE)
    col_ok = (chosen[:, None] >= 0) & (col < V)
    x = tl.load(logits_ptr + row.to(tl.int64) * stride_row + col, mask=col_ok, other=float("-inf"))
    x = x.to(tl.float32)
    x = tl.where(x < float("inf"), x, float("-inf"))
    key = tl.where(col_ok, sort_key(x, col), EMPTY_KEY)
    for n in range(K):
        best = tl.max(tl.max(key, axis=1), axis=0)
        key = tl.where(key == best, EMPTY_KEY, key)
        value, best_col = _key_value_and_column(best)
        tl.store(values_ptr + row * K + n, tl.where(value == float("-inf"), value, value - lse))  # lse may be -inf
        tl.store(indices_ptr + row * K + n, best_col.to(tl.int64))


def logsoftmax_topk_triton(logits, k):
    """Triton version of `logsoftmax_topk_ref`; same arguments, same result."""
    N, V = logits.shape
    assert logits.stride(1) == 1, "logits' last dim must be contiguous"
    assert 1 <= k <= V, "need 1 <= k <= V"
    # Sizes and warps as measured fastest at V = 256206, N = 1 to 256.
    SLICE = min(256, triton.next_power_of_2(V))
    num_slices = triton.cdiv(V, SLICE)
    SLICES_PER_PROGRAM = min(8, triton.next_power_of_2(num_slices))
    num_programs = triton.cdiv(num_slices, SLICES_PER_PROGRAM)
    slice_max = torch.empty((N, num_slices), dtype=torch.float32, device=logits.device)
    chained = chained_launch(logits)
    program_lse = torch.empty((N, num_programs), dtype=torch.float32, device=logits.device)
    _slice_max_kernel[(N, num_programs)](
        logits, slice_max, program_lse, V, logits.stride(0), num_slices, num_programs,
        SLICE=SLICE, SLICES_PER_PROGRAM=SLICES_PER_PROGRAM, CHAINED=chained, num_warps=1, **launch_options(chained),
    )
    values = torch.empty((N, k), dtype=torch.float32, device=logits.device)
    indices = torch.empty((N, k), dtype=torch.int64, device=logits.device)
    lse = torch.empty((N,), dtype=torch.float32, device=logits.device)
    _topk_kernel[(N,)](
        logits, slice_max, program_lse, values, indices, lse, V, logits.stride(0), num_slices, num_programs,
        K=k, BLOCK_K=triton.next_power_of_2(k), SLICE=SLICE, BLOCK_SLICES=triton.next_power_of_2(num_slices),
        BLOCK_PROGRAMS=triton.next_power_of_2(num_programs), CHAINED=chained, num_warps=4, **launch_options(chained),
    )
    return values, indices, lse


def logsoftmax_topk_ref(logits, k):
    """`logits` (N, V), any float dtype, NaN and +inf counting as -inf; 1 <= k <= V. Returns
    `values` (N, k) float32: the k largest log-softmax values of each row, descending (ties: lower
    index first); `indices` (N, k) int64: their columns; `lse` (N,) float32: each row's logsumexp
    (float64 throughout for float64 logits)."""
    N, V = logits.shape
    top = logits.topk(min(k + 1, V), dim=-1)  # (N, k + 1): one more, to see whether a tie crosses the k-th place
    if not bool((top.values[:, 0] < INF).all()):  # NaN or +inf, which topk ranks first: only then another read
        return logsoftmax_topk_ref(logits.masked_fill(~(logits < INF), -INF), k)
    compute_dtype = torch.promote_types(logits.dtype, torch.float32)
    log_probs = torch.log_softmax(logits.to(compute_dtype), dim=-1)  # (N, V)
    # Where the k-th and (k+1)-th logits differ, the k best columns are exactly those topk returned
    # (in no promised order): order them by value, then column.
    indices = top.indices[:, :k].sort(dim=-1).values  # (N, k) ascending columns
    order = logits.gather(1, indices).argsort(dim=-1, descending=True, stable=True)
    indices = indices.gather(1, order)  # (N, k)
    if k < V:
        ties = ~(top.values[:, k - 1] > top.values[:, k])  # (N,) equal logits (or -inf) straddle the k-th place
        if bool(ties.any()):
            indices[ties] = _top_columns_with_ties(logits[ties], k)
    picked = logits.gather(1, indices).to(compute_dtype)  # (N, k)
    # -inf stays -inf, also in a row of -inf, whose log-softmax is NaN (and its logsumexp -inf).
    values = log_probs.gather(1, indices).masked_fill(picked == -INF, -INF)  # (N, k)
    lse = torch.where(picked[:, 0] == -INF, -INF, picked[:, 0] - values[:, 0])  # (N,) x - log_softmax(x)
    return values, indices, lse


def _top_columns_with_ties(logits, k):
    """The k best columns of each row (N, k), by value and then lower column, when equal logits
    straddle the k-th place."""
    N = logits.shape[0]
    kth = logits.topk(k, dim=-1).values[:, -1:]  # (N, 1): the k-th largest logit of each row
    # The top k are every logit above kth plus the lowest-index ones equal to it: take all
    # candidates >= kth (row-major, so ascending columns within a row), sort each row's by value
    # with stable sorts, keep the first k.
    rows, cols = (logits >= kth).nonzero(as_tuple=True)  # (M,), (M,)
    vals = logits[rows, cols]  # (M,)
    order = vals.argsort(descending=True, stable=True)
    order = order[rows[order].argsort(stable=True)]  # by row, then value, then column
    rows, cols = rows[order], cols[order]
    counts = torch.bincount(rows, minlength=N)  # (N,) candidates per row
    rank = torch.arange(len(rows), device=logits.device) - (counts.cumsum(0) - counts)[rows]  # (M,)
    return cols[rank < k].view(N, k)  # (N, k)


def logsoftmax_topk(logits, k):
    """Returns (values (N, k) float32, indices (N, k) int64, lse (N,) float32): each row's k
    largest log-softmax values, descending, equal logits lowest index first."""
    return dispatch(logsoftmax_topk_triton, logsoftmax_topk_ref, logits, logits, k)
