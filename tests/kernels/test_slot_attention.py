import pytest
import torch

from kernels.slot_attention import slot_attention_ref, slot_attention_triton

DTYPES = [torch.float32, torch.float16]  # no bfloat16 under the interpreter: see conftest.py

# (lens, H, D, beam group size)
CASES = [
    ([1, 1, 16, 17, 5, 33], 2, 16, 2),  # length 1, tile boundaries
    ([40, 40, 39, 40, 3], 3, 8, 4),  # a beam group of 4 sharing most tokens
    ([70, 64, 65, 1], 2, 64, 2),  # several 64-token tiles
    ([100, 31], 1, 128, 1),  # D=128
    ([9, 20, 2], 2, 24, 3),  # head dim not a power of two
]


def make_cache(lens, H, D, group, dtype, seed=0):
    """Slot lists where rows come in beam groups that share the tokens before each one's last few.

    Slots are shuffled, slot-list entries past a row's length are garbage (-1 or 2**30), slots no row
    uses hold NaN, and rows reach their slot lists through a shuffled `rows` index with spare table
    rows between, so any read the kernel should not make spoils its output.
    """
    g = torch.Generator().manual_seed(seed)
    N, T = len(lens), max(lens) + 3
    num_slots = sum(lens) + 7
    free = torch.randperm(num_slots, generator=g).tolist()
    table = torch.full((2 * N + 1, T), -1, dtype=torch.int32)  # (R, T)
    rows = torch.randperm(2 * N + 1, generator=g)[:N].int()
    for i, n in enumerate(lens):
        leader = rows[i - i % group]
        for t in range(n):
            shared = i % group and t < min(n, lens[i - i % group]) - 2
            table[rows[i], t] = table[leader, t] if shared else free.pop()
        if i % 2:
            table[rows[i], n:] = 2**30
    used = torch.zeros(num_slots, dtype=torch.bool)
    for i, n in enumerate(lens):
        used[table[rows[i], :n].long()] = True
    k = torch.randn(num_slots, H, D, generator=g).masked_fill(~used[:, None, None], float("nan")).to(dtype)
    v = torch.randn(num_slots, H, D, generator=g).masked_fill(~used[:, None, None], float("nan")).to(dtype)
    q = torch.randn(N, H, D, generator=g).to(dtype)
    return q, k, v, table, rows, torch.tensor(lens, dtype=torch.int32)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lens, H, D, group", CASES)
def test_matches_reference(lens, H, D, group, dtype, poisoned_outputs, check_error):
    q, k, v, table, rows, lens = make_cache(lens, H, D, group, dtype)
    scale = D**-0.5
    out = slot_attention_triton(q, k, v, table, rows, lens, scale)
    ref = slot_attention_ref(q, k, v, table, rows, lens, scale)
    truth = slot_attention_ref(q.double(), k.double(), v.double(), table, rows, lens, scale)
    assert out.shape == q.shape and out.dtype == dtype
    check_error(out, ref, truth)


def test_reference_is_attention():
    # The reference against a per-row softmax(q k^T) v over the row's tokens gathered one by one.
    q, k, v, table, rows, lens = make_cache([5, 18, 1], 2, 8, 2, torch.float64)
    out = slot_attention_ref(q, k, v, table, rows, lens, 0.5)
    for i, n in enumerate(lens.tolist()):
        slots = table[rows[i], :n].long()
        p = torch.softmax(torch.einsum("hd,thd->ht", q[i], k[slots]) * 0.5, dim=-1)  # (H, n)
        torch.testing.assert_close(out[i], torch.einsum("ht,thd->hd", p, v[slots]))


def test_strided_inputs():
    # q sliced out of a fused qkv projection, k and v out of one layer of a (L, slots, H, D) cache.
    q, k, v, table, rows, lens = make_cache([7, 12], 2, 16, 1, torch.float32)
    qkv = torch.randn(2, 3, 2, 16)  # (N, 3, H, D)
    q = qkv[:, 0]  # (N, H, D)
    k, v = torch.stack([k, k]).select(0, 1), torch.stack([v, v]).select(0, 1)  # (slots, H, D)
    out = slot_attention_triton(q, k, v, table, rows, lens, 0.25)
    torch.testing.assert_close(out, slot_attention_ref(q, k, v, table, rows, lens, 0.25))
