"""LoRA for a batch of rows that use different adapters: each row adds the delta of its own slot.

The adapters live in fixed slots of stacked matrices (a: (S, R, K), b: (S, N, R), rank-padded with
zeros), and each row names its slot, -1 for none, so one launch serves a mixed batch and a CUDA
graph captured once stays valid whatever adapters the slots hold. Meaning, as a plain loop:

    for i in range(M):
        s = slots[i]
        if s >= 0:
            y[i] += scale[s] * (b[s] @ (a[s] @ x[i]))

`y` is updated in place and may be a column slice of a wider output (the q, k or v part of a
stacked projection). Two kernels: a shrink x @ a[s]^T into an (M, R) float32 buffer, then an
expand of that buffer through b[s]. Each works on a tile of rows and loops over the slots present
in it, so a tile costs one small matmul per distinct adapter, none for base-model rows.
"""

import torch

from dragoman.kernels._triton import tl, triton
from dragoman.kernels.dispatch import dispatch


@triton.jit
def _lora_shrink_kernel(
    x_ptr, a_ptr, slots_ptr, t_ptr, M, K, R, num_slots,
    stride_xm, stride_as, stride_ar, stride_tm,
    BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_R: tl.constexpr, PRECISION: tl.constexpr,
):
    # t[i] = a[slots[i]] @ x[i] for the BLOCK_M rows of this program (zero for rows without a slot).
    m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    m_ok = m < M
    slot = tl.load(slots_ptr + m, mask=m_ok, other=-1)
    r = tl.arange(0, BLOCK_R)
    r_ok = r < R
    k = tl.arange(0, BLOCK_K)
    x_rows = x_ptr + m.to(tl.int64) * stride_xm  # int64: row * stride can pass 2**31 in the encoder
    t = tl.zeros([BLOCK_M, BLOCK_R], tl.float32)
    for s in range(0, num_slots):
        rows = slot == s
        if tl.sum(rows.to(tl.int32), axis=0) > 0:
            a_slot = a_ptr + s * stride_as  # a stack holds far fewer than 2**31 elements
            for start in range(0, K, BLOCK_K):
                kk = start + k
                k_ok = kk < K
                # Other slots' rows load as zeros, so they add nothing to t.
                x = tl.load(x_rows[:, None] + kk[None, :], mask=rows[:, None] & k_ok[None, :], other=0.0)
                a = tl.load(a_slot + r[None, :] * stride_ar + kk[:, None], mask=r_ok[None, :] & k_ok[:, None], other=0.0)
                t += tl.dot(x, a, input_precision=PRECISION)  # (BLOCK_M, BLOCK_R)
    tl.store(t_ptr + m[:, None].to(tl.int64) * stride_tm + r[None, :], t, mask=m_ok[:, None])


@triton.jit
def _lora_expand_kernel(
    t_ptr, b_ptr, scale_ptr, slots_ptr, y_ptr, M, N, R, num_slots,
    stride_tm, stride_bs, stride_bn, stride_ym,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_R: tl.constexpr, PRECISION: tl.constexpr,
):
    # y[i, n-block] += scale[s] * b[s, n-block] @ t[i] for the rows of this program with slot s >= 0.
    m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    m_ok = m < M
    n_ok = n < N
    slot = tl.load(slots_ptr + m, mask=m_ok, other=-1)
    r = tl.arange(0, BLOCK_R)
    r_ok = r < R
    t = tl.load(t_ptr + m[:, None].to(tl.int64) * stride_tm + r[None, :], mask=m_ok[:, None], other=0.0)
    delta = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for s in range(0, num_slots):
        rows = slot == s
        if tl.sum(rows.to(tl.int32), axis=0) > 0:
            b_slot = b_ptr + s * stride_bs
            b = tl.load(b_slot + n[None, :] * stride_bn + r[:, None], mask=r_ok[:, None] & n_ok[None, :], other=0.0)
            t_s = tl.where(rows[:, None], t, 0.0).to(b.dtype)  # (BLOCK_M, BLOCK_R): this slot's rows only
            delta += tl.dot(t_s, b, input_precision=PRECISION) * tl.load(scale_ptr + s)
    mask = (m_ok & (slot >= 0))[:, None] & n_ok[None, :]  # rows without an adapter are not written
    y_off = m[:, None].to(tl.int64) * stride_ym + n[None, :]
    y = tl.load(y_ptr + y_off, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + y_off, (y + delta).to(y_ptr.dtype.element_ty), mask=mask)


def _check(x, y, a, b, scale, slots):
    M, K = x.shape
    S, R, _ = a.shape
    assert x.dim() == 2 and y.dim() == 2 and y.shape[0] == M, "x (M, K) and y (M, N) expected"
    assert a.shape == (S, R, K) and b.shape == (S, y.shape[1], R), "a (S, R, K) and b (S, N, R) expected"
    assert scale.shape == (S,) and slots.shape == (M,), "scale (S,) and slots (M,) expected"
    return M, K, y.shape[1], S, R


def lora_triton(x, y, a, b, scale, slots):
    """Triton version of `lora_ref`; same arguments, same result (y updated in place and returned)."""
    M, K, N, S, R = _check(x, y, a, b, scale, slots)
    assert x.dtype == a.dtype == b.dtype, "x, a and b must share a dtype"
    assert scale.dtype == torch.float32 and slots.dtype == torch.int32 and slots.is_contiguous()
    assert x.stride(1) == y.stride(1) == a.stride(2) == b.stride(2) == 1, "last dims must be contiguous"
    if M == 0:
        return y
    BLOCK_M = 16 if M <= 16 else 64
    BLOCK_R = max(16, triton.next_power_of_2(R))  # tl.dot wants every side >= 16; padding is masked
    precision = "ieee" if x.dtype == torch.float32 else "tf32"  # no TF32 rounding for float32 models
    t = torch.empty((M, BLOCK_R), dtype=torch.float32, device=x.device)
    _lora_shrink_kernel[(triton.cdiv(M, BLOCK_M),)](
        x, a, slots, t, M, K, R, S,
        x.stride(0), a.stride(0), a.stride(1), t.stride(0),
        BLOCK_M=BLOCK_M, BLOCK_K=64, BLOCK_R=BLOCK_R, PRECISION=precision,
    )
    BLOCK_N = 64
    _lora_expand_kernel[(triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))](
        t, b, scale, slots, y, M, N, R, S,
        t.stride(0), b.stride(0), b.stride(1), y.stride(0),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_R=BLOCK_R, PRECISION=precision,
    )
    return y


def lora_ref(x, y, a, b, scale, slots):
    """y[i] += scale[s] * (x[i] @ a[s]^T) @ b[s]^T for each row i whose slot s = slots[i] is >= 0.

    x (M, K); y (M, N), updated in place (a column slice of a wider tensor is fine) and returned;
    a (S, R, K) and b (S, N, R) the stacked slots; scale (S,) float32; slots (M,) int32. The delta
    is computed in x's dtype, in PEFT's order (lora_B(lora_A(x)) * scaling), and added once.
    """
    _check(x, y, a, b, scale, slots)
    for s in torch.unique(slots).tolist():
        if s < 0:
            continue
        rows = (slots == s).nonzero().squeeze(1)  # (m,)
        delta = (x.index_select(0, rows) @ a[s].T) @ b[s].T * scale[s].to(x.dtype)  # (m, N)
        y.index_add_(0, rows, delta.to(y.dtype))
    return y


def lora(x, y, a, b, scale, slots):
    """Adds each row's LoRA delta to y (M, N) in place and returns it: y[i] += scale[s] *
    (x[i] @ a[s]^T) @ b[s]^T with s = slots[i] (int32, (M,)), rows with s = -1 untouched. x (M, K);
    a (S, R, K) and b (S, N, R) the slots' stacked matrices, in x's dtype; scale (S,) float32."""
    return dispatch(lora_triton, lora_ref, x, x, y, a, b, scale, slots)
