import pytest
import torch

from dragoman.kernels.store_kv import store_kv_ref, store_kv_triton
from hopper_build import compile_for_hopper


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("T, L, H, D", [(1, 1, 1, 8), (37, 3, 2, 16), (70, 2, 3, 100)])  # rows past one step and a block of tokens
def test_stores_every_layers_k_and_v_at_the_slots_and_nothing_else(T, L, H, D, dtype):
    g = torch.Generator().manual_seed(T)
    kv = torch.randn(T, L, 2, H, D, generator=g).to(dtype)
    slots = torch.randperm(3 * T, generator=g)[:T]  # distinct, scattered
    k = torch.randn(L, 3 * T, H, D, generator=g).to(dtype)
    v = torch.randn(L, 3 * T, H, D, generator=g).to(dtype)
    k_ref, v_ref = k.clone(), v.clone()
    store_kv_triton(kv, slots.int(), k, v)
    store_kv_ref(kv, slots, k_ref, v_ref)
    assert torch.equal(k, k_ref) and torch.equal(v, v_ref)
    assert torch.equal(k[:, slots], kv[:, :, 0].transpose(0, 1)) and torch.equal(v[:, slots], kv[:, :, 1].transpose(0, 1))


def test_reads_a_slice_of_a_wider_projection():
    # kv as the engine has it: a view of the cross K/V projection of all layers, (T, L * 2 * C) reshaped.
    T, L, H, D = 5, 2, 2, 8
    projection = torch.randn(T, L * 2 * H * D)
    kv = projection.view(T, L, 2, H, D)
    k, v = torch.zeros(L, 8, H, D), torch.zeros(L, 8, H, D)
    slots = torch.tensor([7, 0, 3, 5, 1])
    store_kv_triton(kv, slots, k, v)
    assert torch.equal(k[1, 3], kv[2, 1, 0]) and torch.equal(v[0, 7], kv[0, 0, 1])
    assert (k[:, [2, 4, 6]] == 0).all()


def launches():
    """The wrapper on a source's cross K/V of every layer (hopper_build.py records the launches):
    NLLB-600M's 12 layers of 16 heads of 64 in bfloat16, 3.3B's 24 of 16 heads of 128 in float16."""
    for L, D, dtype in [(12, 64, torch.bfloat16), (24, 128, torch.float16)]:
        kv = torch.randn(20, L, 2, 16, D).to(dtype)
        k, v = torch.zeros(L, 64, 16, D, dtype=dtype), torch.zeros(L, 64, 16, D, dtype=dtype)
        store_kv_triton(kv, torch.randperm(64)[:20].int(), k, v)


def test_the_kernel_compiles_for_hopper():
    """As tests/kernels/test_constrained_advance.py's: compiled for sm_90 as the wrapper launches it."""
    build = compile_for_hopper("dragoman.kernels.store_kv", "test_store_kv:launches", "_store_kv_kernel")
    assert build.returncode == 0, build.stdout + build.stderr[-3000:]
    assert build.stdout.strip() == "compiled 2"
