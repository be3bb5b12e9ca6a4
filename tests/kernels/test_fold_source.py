import pytest
import torch

from dragoman.kernels.fold_source import fold_source_ref, fold_source_triton
from hopper_build import compile_for_hopper

DTYPES = [torch.float32, torch.float16]  # no bfloat16 under the interpreter: see conftest.py


def inputs(L, T, H, D, dtype, seed=0):
    """k, v (L, T, H, D) as strided views of a projection's (T, L, 2, H, D) output, as the
    encoder's graph hands them over; the layers' stacked q and output projections."""
    g = torch.Generator().manual_seed(seed)
    C = H * D
    kv = torch.randn(T, L, 2, H, D, generator=g).to(dtype)
    wq, wo = (torch.randn(L, C, C, generator=g) / C**0.5).to(dtype), (torch.randn(L, C, C, generator=g) / C**0.5).to(dtype)
    bq = torch.randn(L, C, generator=g).to(dtype)
    return kv[:, :, 0].transpose(0, 1), kv[:, :, 1].transpose(0, 1), wq, bq, wo


def outputs(L, H, D, S, dtype):
    """a, c, b filled with NaN: an element the kernel never writes shows up."""
    C = H * D
    return (torch.full((L, H * S, C), float("nan"), dtype=dtype), torch.full((L, H * S), float("nan")),
            torch.full((L, C, H * S), float("nan"), dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("L, T, H, D, S, length", [(2, 16, 2, 16, 16, 16), (1, 5, 4, 32, 16, 3), (2, 32, 2, 16, 64, 32),
                                                   (1, 20, 2, 64, 32, 20), (3, 9, 3, 16, 16, 1),
                                                   (2, 11, 4, 8, 16, 7)])  # D = 8: tiles padded to 16
def test_matches_reference_and_the_definition(L, T, H, D, S, length, dtype, check_error):
    k, v, wq, bq, wo = inputs(L, T, H, D, dtype)
    n = torch.tensor([length], dtype=torch.int32)
    got, ref = outputs(L, H, D, S, dtype), outputs(L, H, D, S, dtype)
    fold_source_triton(k, v, wq, bq, wo, n, *got)
    fold_source_ref(k, v, wq, bq, wo, n, *ref)
    # The truth, in float64, head by head: a = K_h W_q,h, c = K_h b_q,h, b = W_o,h V_h^T, zero past the sentence.
    C = H * D
    keys, values = torch.zeros(L, S, H, D, dtype=torch.float64), torch.zeros(L, S, H, D, dtype=torch.float64)
    keys[:, :length], values[:, :length] = k[:, :length].double(), v[:, :length].double()
    truth_a = torch.stack([torch.cat([keys[l, :, h] @ wq[l, h * D:(h + 1) * D].double() for h in range(H)]) for l in range(L)])
    truth_c = torch.stack([torch.cat([keys[l, :, h] @ bq[l, h * D:(h + 1) * D].double() for h in range(H)]) for l in range(L)])
    truth_b = torch.stack([torch.cat([wo[l, :, h * D:(h + 1) * D].double() @ values[l, :, h].T for h in range(H)], dim=1)
                           for l in range(L)])
    for out, expected, truth in zip(got, ref, (truth_a, truth_c, truth_b)):
        assert out.shape == truth.shape
        check_error(out, expected, truth, slack=1e-5)
    assert (got[0].view(L, H, S, C)[:, :, length:] == 0).all() and (got[2].view(L, C, H, S)[..., length:] == 0).all()


def launches():
    """The wrapper on one layer of NLLB's heads (hopper_build.py records the launches): 16 heads of 64
    in bfloat16 for a source of up to 32 slots, and 16 heads of 128 in float16 for up to 64."""
    for H, D, S, dtype in [(16, 64, 32, torch.bfloat16), (16, 128, 64, torch.float16)]:
        k, v, wq, bq, wo = inputs(1, S - 3, H, D, dtype)
        fold_source_triton(k, v, wq, bq, wo, torch.tensor([S - 5], dtype=torch.int32), *outputs(1, H, D, S, dtype))


def test_the_kernel_compiles_for_hopper():
    """As tests/kernels/test_constrained_advance.py's: compiled for sm_90 as the wrapper launches it."""
    build = compile_for_hopper("dragoman.kernels.fold_source", "test_fold_source:launches", "_fold_source_kernel")
    assert build.returncode == 0, build.stdout + build.stderr[-3000:]
    assert build.stdout.strip() == "compiled 2"
