import pytest
import torch

from kernels.cross_attention import cross_attention_ref, cross_attention_triton

DTYPES = [torch.float32, torch.float16]  # no bfloat16 under the interpreter: see conftest.py

# (source lengths, source of each decode row, H, D)
CASES = [
    ([1, 7, 64, 70, 5], [3, 3, 3, 3, 0, 1, 1, 4], 2, 16),  # beams of a source share its span
    ([12, 3], [1, 0, 0], 3, 8),
    ([33, 64, 65], [0, 1, 2, 2], 2, 64),  # tile boundaries
    ([100, 9], [0, 1], 1, 128),
    ([6, 2], [0, 1, 1], 2, 24),  # head dim not a power of two
]


def make_sources(src_lens, row_src, H, D, dtype, seed=0):
    """Encoder K/V packed over the sources in shuffled order, with two NaN tokens between
    sources that no row may read."""
    g = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(src_lens), generator=g).tolist()
    starts, total = {}, 2
    for s in order:
        starts[s] = total
        total += src_lens[s] + 2
    k = torch.full((total, H, D), float("nan"))
    v = torch.full((total, H, D), float("nan"))
    for s, start in starts.items():
        k[start:start + src_lens[s]] = torch.randn(src_lens[s], H, D, generator=g)
        v[start:start + src_lens[s]] = torch.randn(src_lens[s], H, D, generator=g)
    q = torch.randn(len(row_src), H, D, generator=g)
    src_start = torch.tensor([starts[s] for s in row_src], dtype=torch.int32)
    src_len = torch.tensor([src_lens[s] for s in row_src], dtype=torch.int32)
    return q.to(dtype), k.to(dtype), v.to(dtype), src_start, src_len


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("src_lens, row_src, H, D", CASES)
def test_matches_reference(src_lens, row_src, H, D, dtype, poisoned_outputs, check_error):
    q, k, v, src_start, src_len = make_sources(src_lens, row_src, H, D, dtype)
    scale = D**-0.5
    out = cross_attention_triton(q, k, v, src_start, src_len, scale)
    ref = cross_attention_ref(q, k, v, src_start, src_len, scale)
    truth = cross_attention_ref(q.double(), k.double(), v.double(), src_start, src_len, scale)
    assert out.shape == q.shape and out.dtype == dtype
    check_error(out, ref, truth)


def test_reference_is_attention():
    q, k, v, src_start, src_len = make_sources([4, 9], [1, 0, 1], 2, 8, torch.float64)
    out = cross_attention_ref(q, k, v, src_start, src_len, 0.5)
    for b in range(3):
        span = slice(src_start[b], src_start[b] + src_len[b])
        p = torch.softmax(torch.einsum("hd,thd->ht", q[b], k[span]) * 0.5, dim=-1)  # (H, src_len)
        torch.testing.assert_close(out[b], torch.einsum("ht,thd->hd", p, v[span]))
