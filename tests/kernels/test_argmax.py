import importlib

import pytest
import torch

pytest.importorskip("triton")  # the kernel needs triton; kernels.argmax_ref alone does not

from dragoman.kernels.argmax import argmax_ref, argmax_triton
from hopper_build import compile_for_hopper

# The module itself: the attribute kernels.argmax is the dispatching function.
argmax_module = importlib.import_module("dragoman.kernels.argmax")

# Logits are only read, so bfloat16 is exact under the interpreter too (see conftest.py).
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
INF, NAN = float("inf"), float("nan")


@pytest.fixture(params=[16, 128])
def chunk(request, monkeypatch):
    """Stage 1's chunk, fixed, so that rows of a few hundred columns span several chunks."""
    monkeypatch.setattr(argmax_module, "MIN_CHUNK", request.param)
    monkeypatch.setattr(argmax_module, "MAX_CHUNK", request.param)
    return request.param


def make_logits(V, C, dtype, seed=0):
    """Rows that exercise the tie rule, -inf and NaN over chunks of C columns (V > 3 * C, not a
    multiple of C), and each row's expected column."""
    assert V > 3 * C and V % C
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(15, V, generator=g) * 3
    expected = {}
    logits[0, [2 * C + 5, C - 1]] = 30.0  # the same max in two chunks: the lower column wins
    expected[0] = C - 1
    logits[1, [C, C - 1]] = 30.0  # on both sides of a chunk boundary
    expected[1] = C - 1
    logits[2, V - 1] = 30.0  # the max in the last, partial chunk
    expected[2] = V - 1
    logits[3] = -INF
    logits[3, C + 3] = -5.0  # one finite entry
    expected[3] = C + 3
    logits[4] = -INF  # no finite entry: column 0
    expected[4] = 0
    logits[5, [2 * C + 1, C + 2]] = NAN
    logits[5, 3] = INF  # NaN counts as -inf: +inf wins
    expected[5] = 3
    logits[6, V - 1] = NAN  # NaN in the last, partial chunk only, above the row's max
    logits[6, C + 7] = 30.0
    expected[6] = C + 7
    logits[7] = -INF
    logits[7, [2 * C, C + 1, 3]] = torch.tensor([0.0, 0.0, -0.0])  # -0.0 ties with +0.0
    expected[7] = 3
    logits[8] = 7.0  # one value everywhere
    expected[8] = 0
    logits[9] = torch.randint(-5, 5, (V,), generator=g).float()  # many equal values
    expected[9] = int((logits[9] == 4).nonzero()[0])
    logits[10, V - C // 2 :] = 40.0  # equal maxima running into the last, partial chunk
    expected[10] = V - C // 2
    logits[11, [2, C + 1]] = torch.tensor([20.0, 20.001])  # equal once rounded to 16 bits
    logits[13] = NAN  # no number at all: column 0, as a row of -inf
    expected[13] = 0
    logits[14] = NAN
    logits[14, [2 * C + 2, C + 4]] = torch.tensor([-50.0, -INF])  # the one number wins over NaN
    expected[14] = 2 * C + 2
    return logits.to(dtype), expected  # row 12: random


@pytest.mark.parametrize("dtype", DTYPES)
def test_matches_reference(dtype, chunk, poisoned_outputs):
    logits, expected = make_logits(5 * chunk + 3, chunk, dtype)
    indices = argmax_triton(logits)
    assert indices.dtype == torch.int64 and indices.shape == (15,)
    assert torch.equal(indices, argmax_ref(logits))
    for row, col in expected.items():
        assert indices[row] == col, f"row {row}: {int(indices[row])}, expected {col}"


@pytest.mark.parametrize("dtype", DTYPES)
def test_reference_rule(dtype):
    # torch.argmax's rule with NaN as -inf, which the kernel copies, as the module docstring states it.
    logits, expected = make_logits(5 * 128 + 3, 128, dtype)
    ref = argmax_ref(logits)
    for row, col in expected.items():
        assert ref[row] == col


@pytest.mark.parametrize("dtype", DTYPES)
def test_nan_counts_as_minus_infinity(dtype, chunk, poisoned_outputs):
    # NaN scattered over rows of numbers, as a forward pass that overflowed in places gives.
    g = torch.Generator().manual_seed(5)
    logits = torch.randn(6, 4 * chunk + 9, generator=g).to(dtype)
    logits[torch.rand(logits.shape, generator=g) < 0.3] = NAN
    logits[5] = NAN
    expected = logits.float().nan_to_num(nan=-INF, posinf=INF, neginf=-INF).argmax(dim=-1)
    assert torch.equal(argmax_ref(logits), expected)
    assert torch.equal(argmax_triton(logits), expected)


@pytest.mark.parametrize("V", [1, 7, 512, 513, 2500])
def test_vocab_sizes(V, poisoned_outputs):
    # The chunk as the wrapper picks it (512 columns for these few rows).
    logits = torch.randn(3, V, generator=torch.Generator().manual_seed(1))
    assert torch.equal(argmax_triton(logits), argmax_ref(logits))


@pytest.mark.parametrize("dtype", DTYPES)
def test_neighbour_rows(dtype, chunk, poisoned_outputs):
    # Rows start off 16-byte boundaries, so the first and last loads of a row read the rows beside
    # it: their NaN and +inf must not count.
    V = 3 * chunk + 5
    logits = torch.randn(4, V, generator=torch.Generator().manual_seed(3)).to(dtype)
    logits[0, -7:] = NAN
    logits[2, :7] = INF
    logits[3] = -INF  # all -inf: column 0, not a column of row 2
    assert logits.data_ptr() % 16 == 0 and (V * logits.element_size()) % 16
    indices = argmax_triton(logits)
    assert torch.equal(indices, argmax_ref(logits))
    assert indices[1] == logits[1].float().argmax() and indices[3] == 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_unaligned_start(dtype, chunk, poisoned_outputs):
    # Logits starting off a 16-byte boundary: read one element at a time.
    V = 3 * chunk + 5
    flat = torch.randn(4 * V + 1, generator=torch.Generator().manual_seed(4)).to(dtype)
    logits = flat[1:].view(4, V)
    flat[V : V + 3] = NAN  # the end of row 0
    assert logits.data_ptr() % 16
    assert torch.equal(argmax_triton(logits), argmax_ref(logits))


def test_row_stride(chunk, poisoned_outputs):
    # Rows of a wider buffer, as logits sliced off a padded vocabulary.
    wide = torch.randn(4, 4 * chunk + 64, generator=torch.Generator().manual_seed(2))
    logits = wide[:, : 3 * chunk + 5]
    assert torch.equal(argmax_triton(logits), argmax_ref(logits))


def test_chunk_size():
    # Few rows split the vocabulary finer, so that they still fill the GPU.
    assert argmax_module._chunk_size(4, 256206) == argmax_module.MIN_CHUNK
    assert argmax_module._chunk_size(512, 256206) == argmax_module.MAX_CHUNK
    assert argmax_module._chunk_size(1, 100) == 128  # never much wider than the row


def launches():
    """The wrapper on NLLB's vocabulary (hopper_build.py records the launches): a few rows of bfloat16
    and many of float32 logits, read in 16-byte vectors, and float16 logits that start off a 16-byte
    boundary, read one element at a time."""
    V = 256206
    argmax_triton(make_logits(V, 512, torch.bfloat16)[0][:4])
    argmax_triton(torch.randn(64, V))
    argmax_triton(torch.randn(4 * V + 1).to(torch.float16)[1:].view(4, V))


def test_the_kernel_compiles_for_hopper():
    """As tests/kernels/test_constrained_advance.py's: both stages compiled for sm_90 as the wrapper
    launches them."""
    build = compile_for_hopper("dragoman.kernels.argmax", "test_argmax:launches", "_chunk_argmax_kernel",
                               "_row_argmax_kernel")
    assert build.returncode == 0, build.stdout + build.stderr[-3000:]
    assert build.stdout.strip() == "compiled 6"
