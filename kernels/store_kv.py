"""Every decoder layer's cross-attention K and V of packed source tokens, stored at their cache slots.

`store_kv(kv, slots, k, v)`, in place. Meaning, as a plain loop:

    for t in range(T):                          # kv (T, L, 2, H, D): the projection of all layers at once
        for l in range(L):                      # k, v (L, slots, H, D): the cache
            k[l, slots[t]] = kv[t, l, 0]
            v[l, slots[t]] = kv[t, l, 1]

Why: `index_copy_` from kv's strided (L, T, H, D) views, K then V, is several times slower on a
document's tokens (docs/performance.md). Program (block of tokens, layer, K or
V) copies its tokens' rows, each C = H * D contiguous elements on both sides.
"""

from dragoman.kernels._triton import tl, triton
from dragoman.kernels.dispatch import dispatch

BLOCK_T = 16  # tokens a program
BLOCK_C = 256  # elements of a row a step


@triton.jit
def _store_kv_kernel(
    kv_ptr, slots_ptr, k_ptr, v_ptr, T, C, stride_kv_t, stride_kv_l, stride_kv_j, stride_l, stride_s,
    BLOCK_T: tl.constexpr, BLOCK_C: tl.constexpr,
):
    t = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    layer = tl.program_id(1)
    j = tl.program_id(2)  # 0: K, 1: V
    t_ok = t < T
    slot = tl.load(slots_ptr + t, mask=t_ok, other=0).to(tl.int64)
    source = kv_ptr + t.to(tl.int64)[:, None] * stride_kv_t + layer * stride_kv_l + j * stride_kv_j
    target = layer.to(tl.int64) * stride_l + slot[:, None] * stride_s  # (BLOCK_T, 1)
    for start in range(0, C, BLOCK_C):
        c = start + tl.arange(0, BLOCK_C)
        ok = t_ok[:, None] & (c < C)[None, :]
        row = tl.load(source + c[None, :], mask=ok)  # (BLOCK_T, BLOCK_C)
        if j == 0:
            tl.store(k_ptr + target + c[None, :], row, mask=ok)
        else:
            tl.store(v_ptr + target + c[None, :], row, mask=ok)


def check_inputs(kv, slots, k, v):
    """Asserts the shapes and layouts both versions take."""
    T, L, two, H, D = kv.shape
    assert two == 2 and k.shape[0] == L and k.shape[2:] == (H, D) and v.shape == k.shape
    assert slots.shape == (T,) and kv.dtype == k.dtype == v.dtype
    assert kv.stride(4) == 1 and kv.stride(3) == D, "kv's heads must be contiguous within a row"
    assert k.stride() == v.stride() and k.stride(3) == 1 and k.stride(2) == D, "the cache's rows must be contiguous"


def store_kv_triton(kv, slots, k, v):
    """Triton version of `store_kv_ref`; same arguments, same effect."""
    check_inputs(kv, slots, k, v)
    T, L = kv.shape[:2]
    C = kv.shape[3] * kv.shape[4]
    if T == 0:
        return
    _store_kv_kernel[(triton.cdiv(T, BLOCK_T), L, 2)](
        kv, slots, k, v, T, C, kv.stride(0), kv.stride(1), kv.stride(2), k.stride(0), k.stride(1),
        BLOCK_T=BLOCK_T, BLOCK_C=min(BLOCK_C, triton.next_power_of_2(C)), num_warps=4,
    )


def store_kv_ref(kv, slots, k, v):
    """`kv` (T, L, 2, H, D): each token's K and V of every layer; `slots` (T,) int32 or int64,
    distinct but for a padding slot nobody reads (a graph bucket's padding tokens share one); `k`,
    `v` (L, slots, H, D) in kv's dtype. Stores token t's layer-l K and V at
    k[l, slots[t]], v[l, slots[t]], in place."""
    check_inputs(kv, slots, k, v)
    k.index_copy_(1, slots.long(), kv[:, :, 0].transpose(0, 1))  # (L, T, H, D)
    v.index_copy_(1, slots.long(), kv[:, :, 1].transpose(0, 1))


def store_kv(kv, slots, k, v):
    """Store kv (T, L, 2, H, D), every layer's K and V of T tokens, at flat slots (T,) of the cache
    k, v (L, slots, H, D), in place."""
    dispatch(store_kv_triton, store_kv_ref, kv, kv, slots, k, v)
