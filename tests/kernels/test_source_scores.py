import pytest
import torch

from dragoman.kernels.source_scores import source_scores_ref, source_scores_triton
from hopper_build import chained, compile_for_hopper

DTYPES = [torch.float32, torch.float16]  # no bfloat16 under the interpreter: see conftest.py


def folded_inputs(M, H, S, D, length, dtype, seed=0):
    """x, and a, c from random q weights and source keys (a[h * S + t] = W_q,h^T k_t, c[...] = b_q,h .
    k_t, zero past the sentence), with the unfolded scores' ingredients for the truth."""
    g = torch.Generator().manual_seed(seed)
    C = H * D
    x = torch.randn(M, C, generator=g).to(dtype)
    wq, bq = torch.randn(C, C, generator=g) / C**0.5, torch.randn(C, generator=g)
    keys = torch.randn(S, H, D, generator=g)
    keys[length:] = 0
    a = torch.einsum("shd,hdc->hsc", keys, wq.view(H, D, C)).reshape(H * S, C)  # (H * S, C)
    c = torch.einsum("shd,hd->hs", keys, bq.view(H, D)).reshape(H * S)  # (H * S,)
    return x, a.to(dtype), c.float(), (wq, bq, keys)


@pytest.mark.parametrize("split", [None, 1, 3])  # None: ~256 inputs a program; 3 splits of 64 inputs and a shorter last
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("M, H, S, D, length", [(4, 2, 16, 32, 16), (3, 4, 32, 16, 5), (16, 2, 32, 48, 1), (4, 4, 16, 128, 9)])
def test_matches_reference_and_attention(M, H, S, D, length, dtype, split, poisoned_outputs, check_error):
    x, a, c, (wq, bq, keys) = folded_inputs(M, H, S, D, length, dtype)
    scale = D**-0.5
    n = torch.tensor([length], dtype=torch.int32)
    p = source_scores_triton(x, a, c, n, scale, S, split)
    assert torch.equal(source_scores_triton(x, a, c, n, scale, S, split), p)  # the split counts were reset
    ref = source_scores_ref(x, a, c, n, scale, S)
    # The truth: attention probabilities of q = x W_q^T + b_q against the keys, in float64.
    q = (x.double() @ wq.double().T + bq.double()).view(M, H, D)
    scores = torch.einsum("mhd,shd->mhs", q, keys.double()) * scale  # (M, H, S)
    scores[..., length:] = float("-inf")
    truth = torch.softmax(scores, dim=-1).reshape(M, H * S)
    assert p.shape == (M, H * S) and p.dtype == dtype
    assert (p.view(M, H, S)[..., length:] == 0).all()
    check_error(p, ref, truth, slack=1e-5)


def launches():
    """The wrapper on a typed sentence's 4 beams (hopper_build.py records the launches): over 16 heads
    of 64 in bfloat16, 32 slots a head, chained, and of 128 in float16, 64 slots, each head's inputs
    split between programs (4 and 8); over 2 heads of 32, too few inputs to split."""
    x, a, c, _ = folded_inputs(4, 16, 32, 64, 20, torch.bfloat16)
    with chained(source_scores_triton):
        source_scores_triton(x, a, c, torch.tensor([20], dtype=torch.int32), 0.125, 32)
    for H, S, D in [(16, 64, 128), (2, 16, 32)]:
        x, a, c, _ = folded_inputs(4, H, S, D, 9, torch.float16)
        source_scores_triton(x, a, c, torch.tensor([9], dtype=torch.int32), D**-0.5, S)


def test_the_kernel_compiles_for_hopper():
    """As tests/kernels/test_constrained_advance.py's: compiled for sm_90 as the wrapper launches it."""
    build = compile_for_hopper("dragoman.kernels.source_scores", "test_source_scores:launches", "_source_scores_kernel")
    assert build.returncode == 0, build.stdout + build.stderr[-3000:]
    assert build.stdout.strip() == "compiled 3"
