"""One sentence's cross-attention probabilities by associativity (engine.model.FoldedSources: a
typed sentence's steps).

`source_scores(x, a, c, length, scale, S) -> p`. Meaning, as a plain loop, with S source slots a head:

    for m in range(M):
        for h in range(H):
            cols = range(h * S, (h + 1) * S)
            s = (x[m] @ a[cols].T + c[cols]) * scale        # float32, (S,)
            s[length:] = -inf                               # source tokens past the sentence's length
            p[m, cols] = softmax(s)                         # rounded to x's dtype

Why: with a[h * S + t] = W_q,h^T k_t and c[h * S + t] = b_q,h . k_t (k_t head h's key of source
token t), the scores of the normed hidden state x come without q: cross q and the attention
kernel become this one projection over H x S rows (1 MB at 600M with S = 32, against W_q's 2 MB),
and the attention output times W_o becomes one projection of p by V_h W_o,h^T. A head's inputs
are split between programs that hold their part of `a` in registers before waiting for x; the
last to finish adds the partial scores up (`sum_splits`, as fused_linear's splits) and takes the softmax.
(One program a head, looping over all inputs, was slower than q + attention in the engine.)
"""

import torch

from dragoman.kernels._triton import (
    ARRIVAL_SLOTS, arrivals_on, chained_launch, launch_options, sum_splits, tl, triton, wait_for_inputs,
)
from dragoman.kernels.dispatch import dispatch

BLOCK_M = 16  # tl.dot's smallest tile: rows past M are masked


@triton.jit
def _source_scores_kernel(
    x_ptr, a_ptr, c_ptr, length_ptr, p_ptr, partial_ptr, arrivals_ptr, M, C, scale, stride_x, stride_a, stride_p,
    S: tl.constexpr, BLOCK_M: tl.constexpr, K_SPLIT: tl.constexpr, SPLIT: tl.constexpr, PRECISION: tl.constexpr,
    CHAINED: tl.constexpr,
):
    # Program (head, split): the head's S rows of `a` over inputs split * K_SPLIT.. in registers
    # before the wait (a is written before the step), then x's; the last split to arrive sums the
    # partial scores in split order and takes the softmax.
    h = tl.program_id(0)
    split = tl.program_id(1)
    m = tl.arange(0, BLOCK_M)
    m_ok = m < M
    t = tl.arange(0, S)
    cols = h * S + t
    k = split * K_SPLIT + tl.arange(0, K_SPLIT)
    k_ok = k < C
    a = tl.load(a_ptr + cols[:, None].to(tl.int64) * stride_a + k[None, :], mask=k_ok[None, :], other=0.0)  # (S, K_SPLIT)
    wait_for_inputs(CHAINED)
    x = tl.load(x_ptr + m[:, None].to(tl.int64) * stride_x + k[None, :], mask=m_ok[:, None] & k_ok[None, :], other=0.0)
    acc = tl.dot(x, tl.trans(a), input_precision=PRECISION)  # (BLOCK_M, S)
    last = True
    if SPLIT > 1:  # the last split to arrive at this head adds the partial scores up
        acc, last = sum_splits(acc, partial_ptr, arrivals_ptr, h, split, SPLIT, BLOCK_M, S)
    if last:
        c = tl.load(c_ptr + cols).to(tl.float32)
        s = (acc + c[None, :]) * scale
        s = tl.where((t < tl.load(length_ptr))[None, :], s, float("-inf"))
        e = tl.exp(s - tl.max(s, axis=1)[:, None])
        p = e / tl.sum(e, axis=1)[:, None]
        tl.store(p_ptr + m[:, None].to(tl.int64) * stride_p + cols[None, :], p.to(p_ptr.dtype.element_ty),
                 mask=m_ok[:, None])


def source_scores_triton(x, a, c, length, scale, S, split=None):
    """Triton version of `source_scores_ref`; same arguments, same result. `split`: how many
    programs share a head's inputs (default: ~256 inputs each)."""
    M, C = x.shape
    HS = a.shape[0]
    assert S >= 16 and S & (S - 1) == 0 and HS % S == 0, "S: a power of two >= 16 (tl.dot's smallest tile)"
    assert M <= BLOCK_M and a.shape == (HS, C) and a.dtype == x.dtype and c.shape == (HS,) and c.dtype == torch.float32
    assert x.stride(1) == 1 and a.stride(1) == 1 and length.numel() == 1
    heads = HS // S
    split = split or max(1, C // 256)
    k_split = triton.next_power_of_2(triton.cdiv(C, split))
    split = triton.cdiv(C, k_split)
    p = torch.empty((M, HS), dtype=x.dtype, device=x.device)
    partial = arrivals = p
    if split > 1:
        partial = torch.empty((heads, split, BLOCK_M, S), dtype=torch.float32, device=x.device)
        assert heads <= ARRIVAL_SLOTS, "split launches count arrivals in 256 slots"
        arrivals = arrivals_on(x.device)  # one count per head
    chained = chained_launch(x)
    _source_scores_kernel[(heads, split)](
        x, a, c, length, p, partial, arrivals, M, C, scale, x.stride(0), a.stride(0), p.stride(0),
        S=S, BLOCK_M=BLOCK_M, K_SPLIT=k_split, SPLIT=split,
        PRECISION="ieee" if x.dtype == torch.float32 else "tf32", CHAINED=chained,
        num_warps=4, **launch_options(chained),
    )
    return p


def source_scores_ref(x, a, c, length, scale, S):
    """`x` (M, C), M <= 16; `a` (H * S, C) in x's dtype; `c` (H * S,) float32; `length` (1,) int32
    on x's device, 1 <= length <= S; S source slots a head. Returns p (M, H * S) in x's dtype: per
    row and head the softmax over the first `length` slots of (x @ a.T + c) * scale, 0 past it."""
    M, HS = x.shape[0], a.shape[0]
    compute = torch.promote_types(x.dtype, torch.float32)
    s = (x.to(compute) @ a.to(compute).T + c.to(compute)) * scale  # (M, H * S)
    s = s.view(M, HS // S, S)  # (M, H, S)
    s = s.masked_fill(torch.arange(S, device=x.device) >= length.to(x.device), float("-inf"))
    return torch.softmax(s, dim=-1).reshape(M, HS).to(x.dtype)  # (M, H * S)


def source_scores(x, a, c, length, scale, S):
    """One sentence's cross-attention probabilities (M, H * S) from the normed hidden state x (M, C)
    by associativity: a (H * S, C) = each head's W_q^T k_t, c (H * S,) float32 = b_q . k_t, the
    first `length` (1,) of each head's S slots valid."""
    return dispatch(source_scores_triton, source_scores_ref, x, x, a, c, length, scale, S)
