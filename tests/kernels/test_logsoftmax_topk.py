import pytest
import torch

from dragoman.kernels.logsoftmax_topk import logsoftmax_topk_ref, logsoftmax_topk_triton
from hopper_build import chained, compile_for_hopper

# Logits are only read, so bfloat16 is exact under the interpreter too (see conftest.py).
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
INF, NAN = float("inf"), float("nan")

# numpy's log(0) under the interpreter: -inf for a chunk of -inf logits is intended; so are -inf - -inf
# and the max of NaN in a row without a number, which the kernel computes and then replaces by -inf.
pytestmark = [pytest.mark.filterwarnings("ignore:divide by zero encountered in log:RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:invalid value encountered in subtract:RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:All-NaN slice encountered:RuntimeWarning")]


def make_logits(V, dtype, seed=0):
    """Rows that exercise the tie rule and -inf, over a vocabulary of several chunks."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(8, V, generator=g) * 3
    logits[1, torch.rand(V, generator=g) < 0.5] = -INF  # half the vocabulary banned
    logits[2] = -INF
    logits[2, [V - 1, 17, 4100]] = torch.tensor([1.0, 2.0, 1.0])  # 3 finite: then -inf, lowest index first
    logits[3] = torch.randint(-5, 5, (V,), generator=g).float()  # hundreds of equal logits per value
    logits[4, V - 1] = 20.0  # the winner in the last, partial chunk
    logits[5] = -INF
    logits[5, [10, 5, V - 1, 3000]] = torch.tensor([-0.0, 0.0, 0.0, -0.0])  # -0.0 ties with +0.0
    logits[6] = 7.0  # one value everywhere
    logits[7, 1000:1016] = 50.0 + torch.arange(16.0)  # all winners in one slice of columns
    return logits.to(dtype)


def truth_of(logits, indices):
    """float64 log-softmax values at `indices`, and float64 logsumexp."""
    lse = torch.logsumexp(logits.double(), dim=-1)
    return logits.double().gather(1, indices) - lse[:, None], lse


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", [1, 4, 8, 16])
def test_matches_reference(k, dtype, poisoned_outputs, check_error):
    logits = make_logits(9000, dtype)  # three chunks or more
    values, indices, lse = logsoftmax_topk_triton(logits, k)
    ref_values, ref_indices, ref_lse = logsoftmax_topk_ref(logits, k)
    assert values.dtype == lse.dtype == torch.float32 and indices.dtype == torch.int64
    assert values.shape == indices.shape == (8, k) and lse.shape == (8,)
    assert torch.equal(indices, ref_indices)
    truth_values, truth_lse = truth_of(logits, ref_indices)
    check_error(lse, ref_lse, truth_lse)
    # Values near -20 carry float32 rounding of a few 1e-6 in both.
    check_error(values, ref_values, truth_values, slack=4e-6)


@pytest.mark.parametrize("V, k", [(1, 1), (20, 16), (4096, 16), (4097, 3)])
def test_vocab_sizes(V, k, poisoned_outputs, check_error):
    logits = torch.randn(3, V, generator=torch.Generator().manual_seed(1))
    values, indices, lse = logsoftmax_topk_triton(logits, k)
    ref_values, ref_indices, ref_lse = logsoftmax_topk_ref(logits, k)
    assert torch.equal(indices, ref_indices)
    truth_values, truth_lse = truth_of(logits, ref_indices)
    check_error(lse, ref_lse, truth_lse)
    check_error(values, ref_values, truth_values)


@pytest.mark.parametrize("dtype", DTYPES)
def test_reference_tie_rule(dtype):
    # The reference's order is a stable descending sort of the whole row.
    logits = make_logits(9000, dtype)
    _, indices, _ = logsoftmax_topk_ref(logits, 16)
    assert torch.equal(indices, logits.float().sort(dim=-1, descending=True, stable=True).indices[:, :16])


def make_logits_without_numbers(V, dtype, seed=0):
    """Rows as a forward pass that overflowed gives them: NaN in places or everywhere, +inf."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(6, V, generator=g) * 3
    logits[0, torch.rand(V, generator=g) < 0.3] = NAN  # NaN scattered among numbers
    logits[1] = NAN  # no number at all
    logits[2] = NAN
    logits[2, [V - 1, 300]] = torch.tensor([-2.0, -INF])  # one number, the rest NaN and -inf
    logits[3, [5, 4200]] = INF  # +inf beside numbers
    logits[4, 7] = NAN  # one NaN above a winner in the last, partial slice
    logits[4, V - 1] = 20.0
    logits[5] = -INF  # all -inf, for comparison with row 1
    return logits.to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", [1, 5, 9])
def test_nan_counts_as_minus_infinity(k, dtype, poisoned_outputs, check_error):
    logits = make_logits_without_numbers(9000, dtype)
    values, indices, lse = logsoftmax_topk_triton(logits, k)
    ref_values, ref_indices, ref_lse = logsoftmax_topk_ref(logits, k)
    assert values.shape == indices.shape == (6, k)  # k candidates on every row
    assert torch.equal(indices, ref_indices)
    # The same as for the logits with NaN and +inf made -inf, which are -inf beside the others.
    numbers = logits.masked_fill(~(logits < INF), -INF)
    same_values, same_indices, same_lse = logsoftmax_topk_ref(numbers, k)
    assert torch.equal(ref_indices, same_indices) and torch.equal(ref_values, same_values)
    assert torch.equal(ref_lse, same_lse)
    for row in (1, 5):  # no number: the lowest columns, of value -inf, and logsumexp -inf
        assert indices[row].tolist() == list(range(k))
        assert (values[row] == -INF).all() and (ref_values[row] == -INF).all()
        assert lse[row] == ref_lse[row] == -INF
    assert indices[2, 0] == 8999 and (values[2, 1:] == -INF).all()
    truth_values, truth_lse = truth_of(numbers, ref_indices)
    truth_values = truth_values.masked_fill(numbers.gather(1, ref_indices) == -INF, -INF)
    assert not ref_values.isnan().any() and not ref_lse.isnan().any()
    check_error(lse, ref_lse, truth_lse)
    check_error(values, ref_values, truth_values, slack=4e-6)


def launches():
    """The wrapper on NLLB's vocabulary as the searches call it (hopper_build.py records the launches):
    beam 4's 2 * 4 + 1 candidates a row of bfloat16 logits, chained, and greedy search's logsumexp
    (k = 1) of float16 logits, not chained."""
    with chained(logsoftmax_topk_triton):
        logsoftmax_topk_triton(make_logits(256206, torch.bfloat16), 9)
    logsoftmax_topk_triton(make_logits(256206, torch.float16), 1)


def test_the_kernel_compiles_for_hopper():
    """As tests/kernels/test_constrained_advance.py's: both stages compiled for sm_90 as the wrapper
    launches them."""
    build = compile_for_hopper("dragoman.kernels.logsoftmax_topk", "test_logsoftmax_topk:launches",
                               "_slice_max_kernel", "_topk_kernel")
    assert build.returncode == 0, build.stdout + build.stderr[-3000:]
    assert build.stdout.strip() == "compiled 4"
