"""One sentence's source folded into every decoder layer's cross-attention q and output projections
(engine.model.FoldedSources), in one launch, into the buffers a typed sentence's steps read.

`fold_source(k, v, wq, bq, wo, length, a, c, b)` writes a, c, b in place. Meaning, as a plain loop,
with H heads of D, S slots a head (S = a.shape[1] // H):

    for l in range(L):
        K, V = k[l], v[l]                                 # (T, H, D) each, T <= S
        K[length:], V[length:] = 0                        # past the sentence (and T..S) zero
        for h in range(H):
            rows = range(h * D, (h + 1) * D)              # head h's rows of W_q, columns of W_o
            a[l, h*S : (h+1)*S] = K[:, h] @ wq[l, rows]     # (S, C): K_h W_q,h
            c[l, h*S : (h+1)*S] = K[:, h] @ bq[l, rows]     # (S,) float32: K_h b_q,h
            b[l, :, h*S : (h+1)*S] = wo[l, :, rows] @ V[:, h].T   # (C, S): W_o,h V_h^T

Products sum in float32 and are rounded to a's dtype (c stays float32), as a matmul in that dtype
rounds them.

Why: torch's batched products over (layer, head) need W_o's head blocks contiguous, and copying
them (and the products into the buffers' layout) took most of the fold's time, inside the typed
sentence's encoder graph, on its critical path. Here program (layer x head, column block, part)
reads its block of W_q or W_o once and writes its block of a (with c) or b straight into place,
adding far less to the encoder graph than the torch products did (docs/performance.md).
"""

import torch

from dragoman.kernels._triton import tl, triton
from dragoman.kernels.dispatch import dispatch

BLOCK_C = 64  # columns of C a program covers


@triton.jit
def _fold_source_kernel(
    k_ptr, v_ptr, wq_ptr, bq_ptr, wo_ptr, length_ptr, a_ptr, c_ptr, b_ptr,
    T, C, stride_kl, stride_kt, stride_vl, stride_vt,
    H: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr, S: tl.constexpr, BLOCK_C: tl.constexpr,
    PRECISION: tl.constexpr,
):
    lh = tl.program_id(0)
    l, h = lh // H, lh % H
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    col_ok = cols < C
    t = tl.arange(0, S)
    d = tl.arange(0, BLOCK_D)  # (tl.dot's tiles are >= 16 wide: past D masked)
    d_ok = d < D
    source = (t < tl.minimum(tl.load(length_ptr), T))[:, None] & d_ok[None, :]  # (S, BLOCK_D): its tokens
    head = h * D + d  # (BLOCK_D,) head h's rows of W_q, columns of W_o
    l64 = l.to(tl.int64)
    if tl.program_id(2) == 0:  # a = K_h W_q,h, and c = K_h b_q,h
        keys = tl.load(k_ptr + l64 * stride_kl + t[:, None] * stride_kt + head[None, :], mask=source, other=0.0)
        wq_at = (l64 * C + head[:, None]) * C + cols[None, :]  # (BLOCK_D, BLOCK_C)
        wq = tl.load(wq_ptr + wq_at, mask=d_ok[:, None] & col_ok[None, :], other=0.0)
        a = tl.dot(keys, wq, input_precision=PRECISION)  # (S, BLOCK_C)
        rows = (l64 * H + h) * S + t  # (S,) of a's (L * H * S) rows
        tl.store(a_ptr + rows[:, None] * C + cols[None, :], a.to(a_ptr.dtype.element_ty), mask=col_ok[None, :])
        if tl.program_id(1) == 0:
            bq = tl.load(bq_ptr + l64 * C + head, mask=d_ok, other=0.0).to(tl.float32)  # (BLOCK_D,)
            tl.store(c_ptr + rows, tl.sum(keys.to(tl.float32) * bq[None, :], axis=1))
    else:  # b = W_o,h V_h^T
        values = tl.load(v_ptr + l64 * stride_vl + t[:, None] * stride_vt + head[None, :], mask=source, other=0.0)
        wo_at = (l64 * C + cols[:, None]) * C + head[None, :]  # (BLOCK_C, BLOCK_D)
        wo = tl.load(wo_ptr + wo_at, mask=col_ok[:, None] & d_ok[None, :], other=0.0)
        b = tl.dot(wo, tl.trans(values), input_precision=PRECISION)  # (BLOCK_C, S)
        b_at = (l64 * C + cols[:, None]) * (H * S) + h * S + t[None, :]  # b (L, C, H * S)
        tl.store(b_ptr + b_at, b.to(b_ptr.dtype.element_ty), mask=col_ok[:, None])


def _check(k, v, wq, bq, wo, length, a, c, b):
    L, T, H, D = k.shape
    C = H * D
    S = a.shape[1] // H
    assert v.shape == k.shape and T <= S and a.shape == (L, H * S, C) and c.shape == (L, H * S)
    assert wq.shape == wo.shape == (L, C, C) and bq.shape == (L, C) and b.shape == (L, C, H * S)
    assert c.dtype == torch.float32 and a.dtype == b.dtype == k.dtype == v.dtype == wq.dtype == wo.dtype
    assert length.numel() == 1 and length.dtype == torch.int32
    return L, T, H, D, C, S


def fold_source_triton(k, v, wq, bq, wo, length, a, c, b):
    """Triton version of `fold_source_ref`; same arguments, same result."""
    L, T, H, D, C, S = _check(k, v, wq, bq, wo, length, a, c, b)
    assert S >= 16 and S & (S - 1) == 0, "S: a power of two >= 16 (tl.dot's smallest tile)"
    assert k.stride(3) == v.stride(3) == 1 and k.stride(2) == v.stride(2) == D, "each token's heads contiguous"
    assert wq.is_contiguous() and bq.is_contiguous() and wo.is_contiguous()
    assert a.is_contiguous() and c.is_contiguous() and b.is_contiguous()
    _fold_source_kernel[(L * H, triton.cdiv(C, BLOCK_C), 2)](
        k, v, wq, bq, wo, length, a, c, b, T, C, k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        H=H, D=D, BLOCK_D=max(16, triton.next_power_of_2(D)), S=S, BLOCK_C=BLOCK_C,
        PRECISION="ieee" if k.dtype == torch.float32 else "tf32", num_warps=4,
    )


def fold_source_ref(k, v, wq, bq, wo, length, a, c, b):
    """`k`, `v` (L, T, H, D): every decoder layer's cross keys and values of one sentence, the first
    `length` (1,) int32 of T its tokens; `wq`, `wo` (L, C, C) and `bq` (L, C): the layers' cross q
    weights and bias and output weights, C = H * D, in k's dtype. Writes, S = a.shape[1] // H >= T:
    `a` (L, H * S, C), `c` (L, H * S) float32, `b` (L, C, H * S) (see the module's docstring)."""
    L, T, H, D, C, S = _check(k, v, wq, bq, wo, length, a, c, b)
    compute = torch.promote_types(k.dtype, torch.float32)
    valid = (torch.arange(S, device=k.device) < length)[None, :, None, None]  # (1, S, 1, 1)
    keys = torch.where(valid, torch.nn.functional.pad(k, (0, 0, 0, 0, 0, S - T)), 0).to(compute)  # (L, S, H, D)
    values = torch.where(valid, torch.nn.functional.pad(v, (0, 0, 0, 0, 0, S - T)), 0).to(compute)
    a.copy_(torch.einsum("lshd,lhdc->lhsc", keys, wq.to(compute).view(L, H, D, C)).reshape(L, H * S, C))
    c.copy_(torch.einsum("lshd,lhd->lhs", keys, bq.to(compute).view(L, H, D)).reshape(L, H * S))
    b.copy_(torch.einsum("lchd,lshd->lchs", wo.to(compute).view(L, C, H, D), values).reshape(L, C, H * S))


def fold_source(k, v, wq, bq, wo, length, a, c, b):
    """One sentence's cross K/V k, v (L, T, H, D), the first `length` (1,) int32 of T its tokens,
    folded into every layer's q weights and bias wq (L, C, C), bq (L, C) and output weights wo:
    writes a (L, H * S, C), c (L, H * S) float32 and b (L, C, H * S) in place, S >= T slots a head."""
    dispatch(fold_source_triton, fold_source_ref, k, k, v, wq, bq, wo, length, a, c, b)
