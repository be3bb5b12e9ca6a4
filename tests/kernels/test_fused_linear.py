import pytest
import torch

from dragoman.kernels.fused_linear import fused_linear_ref, fused_linear_triton
from hopper_build import chained, compile_for_hopper

DTYPES = [torch.float32, torch.float16]  # no bfloat16 under the interpreter: see conftest.py

# (M, K, N): one row to one wide row block (17-64 rows) and two, K past one BLOCK_K and not a power
# of two, N not a multiple of BLOCK_N; a wide block whose long inputs are split between programs
SHAPES = [(1, 64, 16), (4, 100, 50), (17, 512, 33), (48, 300, 40), (65, 64, 16), (33, 4096, 48)]
VARIANTS = {"bias": dict(), "no bias": dict(bias=False), "relu": dict(relu=True)}


def make_inputs(M, K, N, dtype, bias=True, relu=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(M, K, generator=g).to(dtype)
    weight = (torch.randn(N, K, generator=g) / K**0.5).to(dtype)
    return x, weight, dict(bias=torch.randn(N, generator=g).to(dtype) if bias else None, relu=relu)


@pytest.mark.parametrize("hold, chains", [(False, None), (True, 1), (True, 4)])  # weights loaded in steps, or in one tile (in 1 or 4 chunks) before the inputs
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("M, K, N", SHAPES)
def test_matches_reference(M, K, N, variant, dtype, hold, chains, poisoned_outputs, check_error):
    x, weight, args = make_inputs(M, K, N, dtype, **VARIANTS[variant])
    out = fused_linear_triton(x, weight, hold=hold, chains=chains, **args)
    ref = fused_linear_ref(x, weight, **args)
    bias = args["bias"]
    truth = fused_linear_ref(x.double(), weight.double(), None if bias is None else bias.double(), args["relu"])
    assert out.shape == (M, N) and out.dtype == dtype
    check_error(out, ref, truth, slack=1e-5)
    if args["relu"]:
        assert (out >= 0).all() and (out == 0).any()


def test_strided_rows():
    # x a column slice of a wider buffer (the attention output's heads): rows strided.
    _, weight, args = make_inputs(5, 64, 24, torch.float32)
    x = torch.randn(5, 192)[:, 64:128]
    torch.testing.assert_close(fused_linear_triton(x, weight, **args), fused_linear_ref(x, weight, **args))


@pytest.mark.parametrize("hold", [False, True])
@pytest.mark.parametrize("split", [None, 2, 3, 4])  # None: as chosen (8,192 inputs: 32 columns a program, 8 splits)
@pytest.mark.parametrize("M, K, N", [(4, 1024, 40), (17, 700, 20), (4, 8192, 70)])
def test_inputs_split_between_programs_add_up_as_one(M, K, N, split, hold, check_error):
    """Programs sharing an output block's inputs: the last to arrive adds the partial sums in split
    order and resets the count, so a second launch (reusing the counts) is right too."""
    for seed in range(2):
        x, weight, args = make_inputs(M, K, N, torch.float32, relu=True, seed=seed)
        out = fused_linear_triton(x, weight, split=split, hold=hold, **args)
        truth = fused_linear_ref(x.double(), weight.double(), args["bias"].double(), True)
        check_error(out, fused_linear_ref(x, weight, **args), truth, slack=1e-5)


def launches():
    """The wrapper on NLLB-600M's layers as its plans take them on Hopper (hopper_build.py records the
    launches), in bfloat16, chained: weights held in 4 chains (q, 1,024 -> 1,024) and in one (fc1 with
    its ReLU, 1,024 -> 4,096), held and split 8 ways (fc2, 4,096 -> 1,024), a 64-row block stepping
    through its inputs with an L2 prefetch (a typed sentence's encoder), and the output projection onto
    the vocabulary (no bias, 256,206 columns); in float16, not chained, a 64-row block split 4 ways."""
    with chained(fused_linear_triton):
        for M, K, N, variant in [(4, 1024, 1024, {}), (4, 1024, 4096, dict(relu=True)), (4, 4096, 1024, {}),
                                 (48, 1024, 1024, {})]:
            x, weight, args = make_inputs(M, K, N, torch.bfloat16, **variant)
            fused_linear_triton(x, weight, **args)
        vocabulary = torch.empty(256206, 1024, dtype=torch.bfloat16)  # its shape and layout compile, not its values
        fused_linear_triton(torch.randn(4, 1024).to(torch.bfloat16), vocabulary)
    x, weight, args = make_inputs(48, 4096, 1024, torch.float16)
    fused_linear_triton(x, weight, **args)


def test_the_kernel_compiles_for_hopper():
    """As tests/kernels/test_constrained_advance.py's: compiled for sm_90 as the wrapper launches it."""
    build = compile_for_hopper("dragoman.kernels.fused_linear", "test_fused_linear:launches", "_fused_linear_kernel")
    assert build.returncode == 0, build.stdout + build.stderr[-3000:]
    assert build.stdout.strip() == "compiled 6"
