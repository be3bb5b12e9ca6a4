"""A linear layer for decode steps of few rows, with its ReLU fused in.

`fused_linear(x, weight, bias=None, relu=False) -> out`. Meaning, as a plain loop:

    for m in range(M):
        y = x[m] @ weight.T + bias              # float32 sums, rounded to x's dtype
        out[m] = max(y, 0) if relu else y

Why: at a handful of rows a decoder step is bound by kernel launches and weight reads. cuBLAS at 4
rows reads a 1024 x 1024 weight in ~7.6 us (split-K, then a reduction kernel) where one pass over
the weight takes ~3.1 us on an H200 (measured inside CUDA graphs). Each program computes BLOCK_N
output columns for all rows, reading its weight rows once; the rows' inputs (a few KB) come from
L2. Tried and dropped (2026-11-29): the layer norm in the prologue and the residual add in the
epilogue. Every program recomputing the norm's statistics in two serial passes over x made the
600M interactive step slower (44.9 against 41.1 ms).

Chained (kernels/_triton.py `chained_launch`), a program asks L2 for its weight rows while the
kernel before it still runs, then waits for x: 600M interactive 33.4 against 35.6 ms unchained,
with the other decode-step kernels chained too (H200, 2026-11-30).
"""

import torch
import torch.nn.functional as F

from kernels._triton import chained_launch, launch_options, prefetch_l2, tl, triton


@triton.jit
def _fused_linear_kernel(
    x_ptr, w_ptr, b_ptr, out_ptr, M, N, K, stride_x, stride_w, stride_o,
    HAS_BIAS: tl.constexpr, RELU: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, IEEE: tl.constexpr,
    CHAINED: tl.constexpr, LINE: tl.constexpr, K_LINES: tl.constexpr,
):
    m = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    m_ok, n_ok = m < M, n < N
    x_rows = x_ptr + m.to(tl.int64)[:, None] * stride_x
    w_rows = w_ptr + n.to(tl.int64)[:, None] * stride_w
    if CHAINED:
        # Started while the kernel before (which writes x) finishes: stream this program's weight
        # rows into L2 meanwhile, LINE elements (128 bytes) per request, then wait for x.
        line = tl.arange(0, K_LINES) * LINE
        w_safe = w_ptr + tl.minimum(n, N - 1).to(tl.int64)[:, None] * stride_w
        prefetch_l2(w_safe + tl.minimum(line, K - 1)[None, :])  # (BLOCK_N, K_LINES) addresses
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()

    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for start in range(0, K, BLOCK_K):
        k = start + tl.arange(0, BLOCK_K)
        k_ok = k < K
        h = tl.load(x_rows + k[None, :], mask=m_ok[:, None] & k_ok[None, :], other=0.0)
        w = tl.load(w_rows + k[None, :], mask=n_ok[:, None] & k_ok[None, :], other=0.0)
        if IEEE:  # float32 inputs: no TF32 rounding, so float32 results match the reference's
            acc += tl.dot(h, tl.trans(w), input_precision="ieee")
        else:
            acc += tl.dot(h, tl.trans(w))

    if HAS_BIAS:
        acc += tl.load(b_ptr + n, mask=n_ok, other=0.0).to(tl.float32)[None, :]
    y = acc.to(out_ptr.dtype.element_ty)  # rounded as the unfused linear layer rounds
    if RELU:
        y = tl.maximum(y, 0.0)
    tl.store(out_ptr + m.to(tl.int64)[:, None] * stride_o + n[None, :], y, mask=m_ok[:, None] & n_ok[None, :])


def _blocks(N):
    """(BLOCK_N, BLOCK_K, num_warps), as measured on an H200 at 4 and 16 rows: narrow column blocks
    keep >= 64 programs on the decoder's 1,024- to 4,096-wide layers; wide ones suit the output
    projection and the 3.3B model's wider layers."""
    if N >= 100_000:
        return 64, 128, 2
    if N >= 6144:
        return 64, 256, 4
    return 16, 256, 2


def fused_linear_triton(x, weight, bias=None, relu=False):
    """Triton version of `fused_linear_ref`; same arguments, same result."""
    M, K = x.shape
    N = weight.shape[0]
    assert weight.shape == (N, K) and weight.dtype == x.dtype and weight.stride(1) == 1 and x.stride(1) == 1
    assert bias is None or (bias.shape == (N,) and bias.is_contiguous())
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    BLOCK_N, BLOCK_K, num_warps = _blocks(N)
    BLOCK_M = 16  # tl.dot's smallest tile: rows past M are masked
    chained = chained_launch(x)
    line = 128 // x.element_size()  # elements per cache line
    _fused_linear_kernel[(triton.cdiv(N, BLOCK_N), triton.cdiv(M, BLOCK_M))](
        x, weight, bias if bias is not None else x, out, M, N, K, x.stride(0), weight.stride(0), out.stride(0),
        HAS_BIAS=bias is not None, RELU=relu,
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=min(BLOCK_K, triton.next_power_of_2(K)),
        IEEE=x.dtype == torch.float32, CHAINED=chained, LINE=line, K_LINES=triton.next_power_of_2(triton.cdiv(K, line)),
        num_warps=num_warps, num_stages=3, **launch_options(chained),
    )
    return out


def fused_linear_ref(x, weight, bias=None, relu=False):
    """`x` (M, K); `weight` (N, K) and `bias` (N,) or None, in x's dtype. Returns x @ weight.T +
    bias, then ReLU if `relu`: (M, N) in x's dtype."""
    y = F.linear(x, weight, bias)
    return F.relu(y) if relu else y
