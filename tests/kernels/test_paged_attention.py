import math

import pytest
import torch

from kernels.paged_attention import paged_attention_ref, paged_attention_triton

DTYPES = [torch.float32, torch.float16]  # no bfloat16 under the interpreter: see conftest.py

# (seq_lens, H, D, block_size, beam group size)
CASES = [
    ([1, 1, 16, 17, 5, 33], 2, 16, 16, 2),  # length 1, block boundaries
    ([40, 40, 39, 40, 3], 3, 8, 4, 4),  # a beam group of 4 sharing blocks
    ([70, 64, 65, 1], 2, 64, 16, 2),  # several 64-token tiles
    ([100, 31], 1, 128, 8, 1),  # D=128: 32-token tiles
    ([9, 20, 2], 2, 24, 2, 3),  # head dim not a power of two
    ([13, 6, 25], 2, 16, 6, 3),  # block size not a power of two
]


def make_cache(seq_lens, H, D, block_size, group, dtype, seed=0):
    """A paged cache where rows come in beam groups that share all but each row's last block.

    Block ids are shuffled, table entries past a row's blocks are garbage (-1 or 2**30), and cache
    slots no row uses hold NaN, so any read the kernel should not make spoils its output.
    """
    g = torch.Generator().manual_seed(seed)
    B = len(seq_lens)
    blocks_of = [math.ceil(n / block_size) for n in seq_lens]
    num_blocks = sum(blocks_of) + 3
    free = torch.randperm(num_blocks, generator=g).tolist()
    table = torch.full((B, max(blocks_of) + 1), -1, dtype=torch.int32)
    for b, n in enumerate(blocks_of):
        leader = b - b % group
        for i in range(n):
            shared = b != leader and i < min(n, blocks_of[leader]) - 1
            table[b, i] = table[leader, i] if shared else free.pop()
        if b % 2:
            table[b, n:] = 2**30
    used = torch.zeros(num_blocks, block_size, dtype=torch.bool)
    for b, n in enumerate(seq_lens):
        t = torch.arange(n)
        used[table[b, t // block_size].long(), t % block_size] = True
    shape = (num_blocks, block_size, H, D)
    k_cache = torch.randn(shape, generator=g).masked_fill(~used[:, :, None, None], float("nan")).to(dtype)
    v_cache = torch.randn(shape, generator=g).masked_fill(~used[:, :, None, None], float("nan")).to(dtype)
    q = torch.randn(B, H, D, generator=g).to(dtype)
    return q, k_cache, v_cache, table, torch.tensor(seq_lens, dtype=torch.int32)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seq_lens, H, D, block_size, group", CASES)
def test_matches_reference(seq_lens, H, D, block_size, group, dtype, poisoned_outputs, check_error):
    q, k_cache, v_cache, table, lens = make_cache(seq_lens, H, D, block_size, group, dtype)
    scale = D**-0.5
    out = paged_attention_triton(q, k_cache, v_cache, table, lens, scale)
    ref = paged_attention_ref(q, k_cache, v_cache, table, lens, scale)
    truth = paged_attention_ref(q.double(), k_cache.double(), v_cache.double(), table, lens, scale)
    assert out.shape == q.shape and out.dtype == dtype
    check_error(out, ref, truth)


def test_reference_is_attention():
    # The reference against a per-row softmax(q k^T) v over the row's tokens gathered one by one.
    q, k_cache, v_cache, table, lens = make_cache([5, 18, 1], 2, 8, 4, 1, torch.float64)
    out = paged_attention_ref(q, k_cache, v_cache, table, lens, 0.5)
    for b, n in enumerate(lens.tolist()):
        t = torch.arange(n)
        blocks = table[b, t // 4].long()
        k, v = k_cache[blocks, t % 4], v_cache[blocks, t % 4]  # (n, H, D)
        p = torch.softmax(torch.einsum("hd,thd->ht", q[b], k) * 0.5, dim=-1)  # (H, n)
        torch.testing.assert_close(out[b], torch.einsum("ht,thd->hd", p, v))


def test_strided_inputs():
    # q sliced out of a fused qkv projection, the block table out of a wider one.
    q, k_cache, v_cache, table, lens = make_cache([7, 12], 2, 16, 4, 1, torch.float32)
    qkv = torch.randn(2, 3, 2, 16)  # (B, 3, H, D)
    q = qkv[:, 0]  # (B, H, D)
    wide = torch.full((2, 10), -1, dtype=torch.int32)
    wide[:, :table.shape[1]] = table
    table = wide[:, :table.shape[1]]
    out = paged_attention_triton(q, k_cache, v_cache, table, lens, 0.25)
    torch.testing.assert_close(out, paged_attention_ref(q, k_cache, v_cache, table, lens, 0.25))
