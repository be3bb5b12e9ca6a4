import pytest
import torch
import torch.nn.functional as F

from dragoman.kernels.add_layer_norm import add_layer_norm_ref, add_layer_norm_triton
from hopper_build import chained, compile_for_hopper

DTYPES = [torch.float32, torch.float16]  # no bfloat16 under the interpreter: see conftest.py
SHAPES = [(5, 32), (3, 100), (2, 3, 1024)]


def make_inputs(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    C = shape[-1]
    x = (torch.randn(shape, generator=g) * 2 + 3).to(dtype)  # off-centre: the mean matters
    residual = torch.randn(shape, generator=g).to(dtype)
    weight = (1 + torch.randn(C, generator=g) / 4).to(dtype)
    bias = torch.randn(C, generator=g).to(dtype)
    return x, residual, weight, bias


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_matches_reference(shape, dtype, poisoned_outputs, check_error):
    x, residual, weight, bias = make_inputs(shape, dtype)
    summed, normed = add_layer_norm_triton(x, residual, weight, bias, 1e-5)
    ref_summed, ref_normed = add_layer_norm_ref(x, residual, weight, bias, 1e-5)
    assert torch.equal(summed, ref_summed)  # one rounding of x + residual, in both
    truth = F.layer_norm(ref_summed.double(), shape[-1:], weight.double(), bias.double(), 1e-5)
    assert normed.shape == x.shape and normed.dtype == dtype
    check_error(normed, ref_normed, truth)


@pytest.mark.parametrize("dtype", DTYPES)
def test_without_residual(dtype, poisoned_outputs, check_error):
    x, _, weight, bias = make_inputs((4, 96), dtype)
    summed, normed = add_layer_norm_triton(x, None, weight, bias, 1e-5)
    ref_summed, ref_normed = add_layer_norm_ref(x, None, weight, bias, 1e-5)
    assert summed is x and ref_summed is x
    truth = F.layer_norm(x.double(), (96,), weight.double(), bias.double(), 1e-5)
    check_error(normed, ref_normed, truth)


def test_strided_rows():
    # x a column slice of a wider buffer: rows strided, last dim contiguous.
    x, residual, weight, bias = make_inputs((6, 64), torch.float32)
    wide = torch.randn(6, 128)
    x = wide[:, :64]
    summed, normed = add_layer_norm_triton(x, residual, weight, bias, 1e-5)
    ref_summed, ref_normed = add_layer_norm_ref(x, residual, weight, bias, 1e-5)
    torch.testing.assert_close(summed, ref_summed)
    torch.testing.assert_close(normed, ref_normed)


def launches():
    """The wrapper as the engine calls it (hopper_build.py records the launches): on rows of 1,024 in
    float16, and in bfloat16 chained, with and without a residual, letting the next kernel start early
    (`lead`) or not."""
    x, residual, weight, bias = make_inputs((4, 1024), torch.float16)
    add_layer_norm_triton(x, residual, weight, bias, 1e-5)
    x, residual, weight, bias = make_inputs((4, 1024), torch.bfloat16)
    with chained(add_layer_norm_triton):
        add_layer_norm_triton(x, residual, weight, bias, 1e-5, lead=True)
        add_layer_norm_triton(x, None, weight, bias, 1e-5)


def test_the_kernel_compiles_for_hopper():
    """As tests/kernels/test_constrained_advance.py's: compiled for sm_90 as the wrapper launches it."""
    build = compile_for_hopper("dragoman.kernels.add_layer_norm", "test_add_layer_norm:launches",
                               "_add_layer_norm_kernel")
    assert build.returncode == 0, build.stdout + build.stderr[-3000:]
    assert build.stdout.strip() == "compiled 3"
