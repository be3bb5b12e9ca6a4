import pytest
import torch

from dragoman.kernels.packed_attention import packed_attention_ref, packed_attention_triton
from hopper_build import chained, compile_for_hopper

DTYPES = [torch.float32, torch.float16]  # no bfloat16 under the interpreter: see conftest.py


@pytest.mark.parametrize("by_source", [False, True])  # bounds scanned, or each token's source given
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lengths, H, D", [([25, 7], 2, 16), ([32, 16], 4, 16), ([1, 40, 3, 9], 2, 32), ([5], 3, 8),
                                           ([70, 2], 2, 16)])  # D = 8: tiles padded to 16; 70: keys past one block
def test_matches_reference_and_the_definition(lengths, H, D, dtype, by_source, poisoned_outputs, check_error):
    g = torch.Generator().manual_seed(len(lengths) + H)
    C, T = H * D, sum(lengths)
    qkv = torch.randn(T, 3 * C, generator=g).to(dtype)
    starts = torch.tensor([0] + torch.tensor(lengths).cumsum(0).tolist(), dtype=torch.int32)
    scale = D**-0.5
    sources = torch.repeat_interleave(torch.arange(len(lengths), dtype=torch.int32), torch.tensor(lengths)) if by_source else None
    out = packed_attention_triton(qkv, starts, scale, H, sources)
    ref = packed_attention_ref(qkv, starts, scale, H)
    truth = packed_attention_ref(qkv.double(), starts, scale, H)
    assert out.shape == (T, C) and out.dtype == dtype
    check_error(out, ref, truth, slack=1e-5)
    # A source attends to its own tokens only: changing another source's keys changes nothing of it.
    changed = qkv.clone()
    changed[lengths[0]:, C:] += 1
    assert torch.equal(packed_attention_triton(changed, starts, scale, H, sources)[: lengths[0]], out[: lengths[0]])


def launches():
    """The wrapper on 16 heads (hopper_build.py records the launches): of 64 in bfloat16, chained, a
    typed sentence's source and its padding, bounds scanned; of 128 in float16, a document's sources,
    each token's given."""
    H, D, lengths = 16, 64, [25, 7]
    qkv = torch.randn(sum(lengths), 3 * H * D).to(torch.bfloat16)
    starts = torch.tensor([0, 25, 32], dtype=torch.int32)
    with chained(packed_attention_triton):
        packed_attention_triton(qkv, starts, D**-0.5, H)
    D, lengths = 128, [5, 40, 3]
    qkv = torch.randn(sum(lengths), 3 * H * D).to(torch.float16)
    starts = torch.tensor([0, 5, 45, 48], dtype=torch.int32)
    sources = torch.repeat_interleave(torch.arange(3, dtype=torch.int32), torch.tensor(lengths))
    packed_attention_triton(qkv, starts, D**-0.5, H, sources)


def test_the_kernel_compiles_for_hopper():
    """As tests/kernels/test_constrained_advance.py's: compiled for sm_90 as the wrapper launches it."""
    build = compile_for_hopper("dragoman.kernels.packed_attention", "test_packed_attention:launches",
                               "_packed_attention_kernel")
    assert build.returncode == 0, build.stdout + build.stderr[-3000:]
    assert build.stdout.strip() == "compiled 2"
