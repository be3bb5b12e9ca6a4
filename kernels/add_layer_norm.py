"""Fused residual add + layer norm, the step between two sublayers of a pre-norm transformer.

`add_layer_norm(x, residual, weight, bias, eps) -> (summed, normed)`. Meaning, as a plain loop:

    for n in range(N):
        summed[n] = x[n] + residual[n]          # rounded to x's dtype: the new residual stream
        s = summed[n].float()
        mean = sum(s) / C
        var = sum((s - mean) ** 2) / C
        normed[n] = (s - mean) / sqrt(var + eps) * weight + bias    # in float32, then x's dtype

With `residual=None` there is nothing to add: `summed` is `x` itself and only `normed` is computed.
"""

import torch
import torch.nn.functional as F

from dragoman.kernels._triton import chained_launch, launch_options, tl, triton
from dragoman.kernels.dispatch import dispatch


@triton.jit
def _add_layer_norm_kernel(
    x_ptr, residual_ptr, weight_ptr, bias_ptr, summed_ptr, normed_ptr, C, eps,
    stride_x, stride_r, stride_s, stride_n,
    HAS_RESIDUAL: tl.constexpr, BLOCK_C: tl.constexpr, CHAINED: tl.constexpr, LEAD: tl.constexpr,
):
    # One program per row; the whole row stays in registers.
    row = tl.program_id(0)
    c = tl.arange(0, BLOCK_C)
    c_ok = c < C
    weight, bias = norm_params_then_wait(weight_ptr, bias_ptr, c, c_ok, CHAINED, LEAD)
    x = tl.load(x_ptr + row * stride_x + c, mask=c_ok, other=0.0)
    if HAS_RESIDUAL:
        residual = tl.load(residual_ptr + row * stride_r + c, mask=c_ok, other=0.0)
        # Round the sum to x's dtype before normalising, as the unfused `x + residual` does.
        x = (x.to(tl.float32) + residual.to(tl.float32)).to(x.dtype)
        tl.store(summed_ptr + row * stride_s + c, x, mask=c_ok)
    normed = layer_norm_row(x, weight, bias, c_ok, C, eps)
    tl.store(normed_ptr + row * stride_n + c, normed.to(normed_ptr.dtype.element_ty), mask=c_ok)


@triton.jit
def norm_params_then_wait(weight_ptr, bias_ptr, c, c_ok, CHAINED: tl.constexpr, LEAD: tl.constexpr):
    """The norm's weight and bias (BLOCK_C,) as float32; chained, read while the kernel before
    finishes, then waits for it. With LEAD the kernel after may start at once, not only once this
    one has waited (kernels/_triton.py)."""
    if CHAINED and LEAD:
        tl.extra.cuda.gdc_launch_dependents()
    weight = tl.load(weight_ptr + c, mask=c_ok, other=0.0).to(tl.float32)
    bias = tl.load(bias_ptr + c, mask=c_ok, other=0.0).to(tl.float32)
    if CHAINED:
        tl.extra.cuda.gdc_wait()
        if not LEAD:
            tl.extra.cuda.gdc_launch_dependents()
    return weight, bias


@triton.jit
def layer_norm_row(x, weight, bias, c_ok, C, eps):
    """One row's layer norm in float32: x (BLOCK_C,) in its dtype, zeros past C (c_ok false);
    weight and bias (BLOCK_C,) float32."""
    s = x.to(tl.float32)
    mean = tl.sum(s, axis=0) / C
    centered = tl.where(c_ok, s - mean, 0.0)
    var = tl.sum(centered * centered, axis=0) / C
    return centered * (1.0 / tl.sqrt(var + eps)) * weight + bias


def add_layer_norm_triton(x, residual, weight, bias, eps, lead=False):
    """Triton version of `add_layer_norm_ref`; same arguments, same result. `lead`: the kernel after
    reads only weights before waiting, so may start before this one waits (kernels/_triton.py)."""
    C = x.shape[-1]
    assert weight.shape == bias.shape == (C,) and weight.is_contiguous() and bias.is_contiguous()
    assert residual is None or (residual.shape == x.shape and residual.dtype == x.dtype), \
        "residual must match x in shape and dtype"
    x2 = x.reshape(-1, C)  # (N, C)
    assert x2.stride(-1) == 1, "x's last dim must be contiguous"
    N = x2.shape[0]
    normed = torch.empty((N, C), dtype=x.dtype, device=x.device)
    if residual is None:
        r2, summed = x2, x2  # unused by the kernel
    else:
        r2 = residual.reshape(-1, C)  # (N, C)
        assert r2.stride(-1) == 1, "residual's last dim must be contiguous"
        summed = torch.empty((N, C), dtype=x.dtype, device=x.device)
    BLOCK_C = triton.next_power_of_2(C)
    chained = chained_launch(x)
    _add_layer_norm_kernel[(N,)](
        x2, r2, weight, bias, summed, normed, C, eps,
        x2.stride(0), r2.stride(0), summed.stride(0), normed.stride(0),
        HAS_RESIDUAL=residual is not None, BLOCK_C=BLOCK_C, CHAINED=chained, LEAD=lead,
        num_warps=min(8, max(1, BLOCK_C // 512)), **launch_options(chained),
    )
    if residual is None:
        return x, normed.view(x.shape)  # (..., C)
    return summed.view(x.shape), normed.view(x.shape)  # (..., C) each


def add_layer_norm_ref(x, residual, weight, bias, eps):
    """`x`, `residual` (..., C), same dtype; `weight`, `bias` (C,). Returns `(summed, normed)`:
    `summed = x + residual` in x's dtype (or `x` itself when `residual` is None) and
    `normed = layer_norm(summed) * weight + bias`, statistics in float32 (float64 for float64
    inputs), in x's dtype."""
    summed = x if residual is None else x + residual
    compute_dtype = torch.promote_types(x.dtype, torch.float32)
    weight, bias = weight.to(compute_dtype), bias.to(compute_dtype)
    normed = F.layer_norm(summed.to(compute_dtype), (x.shape[-1],), weight, bias, eps)
    return summed, normed.to(x.dtype)


def add_layer_norm(x, residual, weight, bias, eps, lead=False):
    """Returns (summed, normed): summed = x + residual in x's dtype (x itself when residual is
    None), normed = layer_norm(summed) * weight + bias with float32 statistics. `lead`: the kernel
    after reads nothing but weights before waiting, so may start first (kernels/_triton.py)."""
    return dispatch(lambda: add_layer_norm_triton(x, residual, weight, bias, eps, lead),
                    lambda: add_layer_norm_ref(x, residual, weight, bias, eps), x)
