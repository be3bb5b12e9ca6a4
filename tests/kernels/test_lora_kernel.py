import pytest
import torch

from dragoman.kernels.lora import lora_ref, lora_triton
from hopper_build import compile_for_hopper

DTYPES = [torch.float32, torch.float16]  # no bfloat16 under the interpreter: see conftest.py
# (rows M, in K, out N, slots S, padded rank R): one decode tile, several tiles with a ragged end,
# a rank that is not a power of two, an output wider than one column block.
SHAPES = [(5, 32, 48, 2, 8), (70, 100, 70, 3, 5), (33, 64, 200, 4, 16)]


def make_inputs(M, K, N, S, R, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(M, K, generator=g).to(dtype)
    a = (torch.randn(S, R, K, generator=g) / K**0.5).to(dtype)
    b = torch.randn(S, N, R, generator=g).to(dtype)
    scale = torch.rand(S, generator=g) * 2 + 0.25
    slots = torch.randint(-1, S, (M,), generator=g, dtype=torch.int32)
    wide = torch.randn(M, N + 8, generator=g).to(dtype)  # y is a column slice of it, as in q/k/v
    return x, wide, a, b, scale, slots


def truth(x, y, a, b, scale, slots):
    out = y.double().clone()
    for i, s in enumerate(slots.tolist()):
        if s >= 0:
            out[i] += scale[s].double() * (b[s].double() @ (a[s].double() @ x[i].double()))
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_matches_reference(shape, dtype, poisoned_outputs, check_error):
    x, wide, a, b, scale, slots = make_inputs(*shape, dtype)
    N = shape[2]
    expected = truth(x, wide[:, 4 : 4 + N], a, b, scale, slots)
    ours, ref = wide.clone(), wide.clone()
    assert lora_triton(x, ours[:, 4 : 4 + N], a, b, scale, slots).data_ptr() == ours[:, 4:].data_ptr()
    lora_ref(x, ref[:, 4 : 4 + N], a, b, scale, slots)
    check_error(ours[:, 4 : 4 + N], ref[:, 4 : 4 + N], expected)
    # Rows without an adapter, and the columns around the slice, are left exactly as they were.
    assert torch.equal(ours[slots < 0], wide[slots < 0])
    assert torch.equal(ours[:, :4], wide[:, :4]) and torch.equal(ours[:, 4 + N :], wide[:, 4 + N :])


def test_a_batch_without_adapters_is_untouched():
    x, wide, a, b, scale, _ = make_inputs(20, 32, 40, 2, 4, torch.float32)
    y = wide[:, :40].clone()
    lora_triton(x, y, a, b, scale, torch.full((20,), -1, dtype=torch.int32))
    assert torch.equal(y, wide[:, :40])


def test_zero_padded_rank_adds_nothing():
    """A rank-3 adapter in a rank-8 slot (zeros past rank 3) gives the rank-3 delta."""
    x, wide, a, b, scale, slots = make_inputs(24, 32, 40, 2, 8, torch.float32)
    a[:, 3:], b[:, :, 3:] = 0, 0
    small_a, small_b = a[:, :3].contiguous(), b[:, :, :3].contiguous()
    padded, small = wide[:, :40].clone(), wide[:, :40].clone()
    lora_triton(x, padded, a, b, scale, slots)
    lora_ref(x, small, small_a, small_b, scale, slots)
    torch.testing.assert_close(padded, small)


def test_each_row_uses_its_own_slot():
    """One row per slot in the same tile: swapping the slots' contents swaps the rows' deltas."""
    x, wide, a, b, scale, _ = make_inputs(3, 32, 16, 3, 4, torch.float32)
    slots = torch.tensor([0, 1, 2], dtype=torch.int32)
    y = lora_triton(x, wide[:, :16].clone(), a, b, scale, slots)
    order = torch.tensor([2, 0, 1])
    moved = torch.tensor([1, 2, 0], dtype=torch.int32)
    swapped = lora_triton(x, wide[:, :16].clone(), a[order], b[order], scale[order], moved)
    torch.testing.assert_close(y, swapped)


def launches():
    """The wrapper on a decoder step's rows (a tile of 16) in bfloat16 and an encoder's (tiles of 64)
    in float16 and float32, 1,024 wide, adapters of rank 16 (hopper_build.py records the launches)."""
    for M, dtype in [(5, torch.bfloat16), (70, torch.float16), (70, torch.float32)]:
        x, wide, a, b, scale, slots = make_inputs(M, 1024, 1024, 4, 16, dtype)
        lora_triton(x, wide[:, 4:1028], a, b, scale, slots)


def test_the_kernel_compiles_for_hopper():
    """As tests/kernels/test_constrained_advance.py's: the shrink and the expand compiled for sm_90 as
    the wrapper launches them."""
    build = compile_for_hopper("dragoman.kernels.lora", "test_lora_kernel:launches", "_lora_shrink_kernel",
                               "_lora_expand_kernel")
    assert build.returncode == 0, build.stdout + build.stderr[-3000:]
    assert build.stdout.strip() == "compiled 6"
