import pytest
import torch
import torch.nn.functional as F

from dragoman.kernels.embed_layer_norm import embed_layer_norm_ref, embed_layer_norm_triton
from hopper_build import chained, compile_for_hopper

DTYPES = [torch.float32, torch.float16]  # no bfloat16 under the interpreter: see conftest.py


def make_inputs(N, C, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    table = torch.randn(50, C, generator=g).to(dtype)
    position_table = torch.randn(40, C, generator=g).to(dtype)
    tokens = torch.randint(0, 50, (N,), generator=g)
    positions = torch.randint(0, 38, (N,), generator=g)
    weight = (1 + torch.randn(C, generator=g) / 4).to(dtype)
    bias = torch.randn(C, generator=g).to(dtype)
    return tokens, positions, table, 3.5, position_table, 2, weight, bias, 1e-5


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("N, C", [(1, 32), (5, 100), (3, 1024)])
def test_matches_reference(N, C, dtype, poisoned_outputs, check_error):
    args = make_inputs(N, C, dtype)
    x, normed = embed_layer_norm_triton(*args)
    ref_x, ref_normed = embed_layer_norm_ref(*args)
    assert x.shape == normed.shape == (N, C) and x.dtype == normed.dtype == dtype
    assert torch.equal(x, ref_x)  # the same two roundings: the scaled embedding, then the sum
    tokens, positions, table, scale, position_table, offset, weight, bias, eps = args
    assert torch.equal(ref_x, table[tokens] * scale + position_table[positions + offset])
    truth = F.layer_norm(ref_x.double(), (C,), weight.double(), bias.double(), eps)
    check_error(normed, ref_normed, truth)


def test_int32_indices():
    tokens, positions, *rest = make_inputs(4, 64, torch.float32, seed=1)
    for got, want in zip(embed_layer_norm_triton(tokens.int(), positions.int(), *rest),
                         embed_layer_norm_ref(tokens, positions, *rest)):
        torch.testing.assert_close(got, want)


def launches():
    """The wrapper on rows of 1,024 (hopper_build.py records the launches): float16, and bfloat16
    chained, letting the next kernel start early (`lead`) or not."""
    embed_layer_norm_triton(*make_inputs(4, 1024, torch.float16))
    with chained(embed_layer_norm_triton):
        embed_layer_norm_triton(*make_inputs(4, 1024, torch.bfloat16))
        embed_layer_norm_triton(*make_inputs(4, 1024, torch.bfloat16), lead=True)


def test_the_kernel_compiles_for_hopper():
    """As tests/kernels/test_constrained_advance.py's: compiled for sm_90 as the wrapper launches it."""
    build = compile_for_hopper("dragoman.kernels.embed_layer_norm", "test_embed_layer_norm:launches",
                               "_embed_layer_norm_kernel")
    assert build.returncode == 0, build.stdout + build.stderr[-3000:]
    assert build.stdout.strip() == "compiled 3"
