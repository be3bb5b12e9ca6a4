"""Token embedding + position embedding + layer norm: how a pre-norm transformer's input starts.

`embed_layer_norm(tokens, positions, table, scale, position_table, offset, weight, bias, eps) ->
(x, normed)`. Meaning, as a plain loop:

    for n in range(N):
        e = table[tokens[n]] * scale                       # rounded to the table's dtype
        x[n] = e + position_table[positions[n] + offset]   # rounded: the residual stream
        normed[n] = layer_norm(x[n]) * weight + bias       # float32 statistics, then the dtype

Why: a decode step of few rows starts with these as five small launches (two gathers, a scale, an
add, a norm), each costing more in its launch than in its work; here one program per row does them.
"""

import torch
import torch.nn.functional as F

from dragoman.kernels._triton import chained_launch, launch_options, tl, triton
from dragoman.kernels.add_layer_norm import layer_norm_row, norm_params_then_wait
from dragoman.kernels.dispatch import dispatch


@triton.jit
def _embed_layer_norm_kernel(
    tokens_ptr, positions_ptr, table_ptr, position_table_ptr, weight_ptr, bias_ptr, x_ptr, normed_ptr,
    scale, offset, C, eps, stride_table, stride_position_table, stride_x, stride_n,
    BLOCK_C: tl.constexpr, CHAINED: tl.constexpr, LEAD: tl.constexpr,
):
    row = tl.program_id(0)
    c = tl.arange(0, BLOCK_C)
    c_ok = c < C
    weight, bias = norm_params_then_wait(weight_ptr, bias_ptr, c, c_ok, CHAINED, LEAD)
    token = tl.load(tokens_ptr + row).to(tl.int64)
    position = tl.load(positions_ptr + row).to(tl.int64) + offset
    e = tl.load(table_ptr + token * stride_table + c, mask=c_ok, other=0.0)
    p = tl.load(position_table_ptr + position * stride_position_table + c, mask=c_ok, other=0.0)
    e = (e.to(tl.float32) * scale).to(e.dtype)  # rounded as the unfused scaling rounds
    x = (e.to(tl.float32) + p.to(tl.float32)).to(e.dtype)
    tl.store(x_ptr + row * stride_x + c, x, mask=c_ok)
    normed = layer_norm_row(x, weight, bias, c_ok, C, eps)
    tl.store(normed_ptr + row * stride_n + c, normed.to(normed_ptr.dtype.element_ty), mask=c_ok)


def embed_layer_norm_triton(tokens, positions, table, scale, position_table, offset, weight, bias, eps, lead=False):
    """Triton version of `embed_layer_norm_ref`; same arguments, same result; `lead` as in
    add_layer_norm_triton."""
    (N,), C = tokens.shape, table.shape[1]
    assert positions.shape == (N,) and position_table.shape[1] == C and position_table.dtype == table.dtype
    assert table.stride(1) == position_table.stride(1) == 1 and weight.is_contiguous() and bias.is_contiguous()
    x = torch.empty((N, C), dtype=table.dtype, device=table.device)
    normed = torch.empty_like(x)
    if N == 0:
        return x, normed
    BLOCK_C = triton.next_power_of_2(C)
    chained = chained_launch(table)
    _embed_layer_norm_kernel[(N,)](
        tokens, positions, table, position_table, weight, bias, x, normed,
        scale, offset, C, eps, table.stride(0), position_table.stride(0), x.stride(0), normed.stride(0),
        BLOCK_C=BLOCK_C, CHAINED=chained, LEAD=lead, num_warps=min(8, max(1, BLOCK_C // 512)),
        **launch_options(chained),
    )
    return x, normed


def embed_layer_norm_ref(tokens, positions, table, scale, position_table, offset, weight, bias, eps):
    """`tokens`, `positions` (N,) integer; `table` (V, C) and `position_table` (P, C) of one dtype;
    `scale` a float; `offset` an int added to every position; `weight`, `bias` (C,). Returns
    `(x, normed)`, (N, C) each in the table's dtype: x the scaled token embedding plus the position
    embedding, normed its layer norm (float32 statistics; float64 for float64 tables)."""
    x = F.embedding(tokens, table) * scale + F.embedding(positions + offset, position_table)
    compute_dtype = torch.promote_types(x.dtype, torch.float32)
    normed = F.layer_norm(x.to(compute_dtype), (x.shape[-1],), weight.to(compute_dtype), bias.to(compute_dtype), eps)
    return x, normed.to(x.dtype)


def embed_layer_norm(tokens, positions, table, scale, position_table, offset, weight, bias, eps, lead=False):
    """Returns (x, normed) (N, C): x = table[tokens] * scale + position_table[positions + offset],
    each rounded to the tables' dtype, and normed = layer_norm(x) * weight + bias with float32
    statistics. tokens, positions (N,) integer. `lead` as in add_layer_norm."""
    return dispatch(
        lambda: embed_layer_norm_triton(tokens, positions, table, scale, position_table, offset, weight, bias, eps,
                                        lead),
        lambda: embed_layer_norm_ref(tokens, positions, table, scale, position_table, offset, weight, bias, eps),
        table,
    )
