import importlib

import pytest
import torch

from dragoman.kernels import NewTokens
from dragoman.kernels.slot_attention import slot_attention_ref, slot_attention_triton
from hopper_build import chained, compile_for_hopper

slot_attention_module = importlib.import_module("dragoman.kernels.slot_attention")

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


@pytest.fixture(params=[4096, 1024, 1], ids=["many rows: heads paired, tiles in the loop", "some rows: one warp a head",
                                              "few rows: tiles one ahead"])
def config(request, monkeypatch):
    """Each kind of (heads, tile, warps, early) that `_config` chooses between, by rows x heads,
    whatever the row count."""
    chosen = slot_attention_module._config
    monkeypatch.setattr(slot_attention_module, "_config",
                        lambda N, H, D, write=False: chosen(-(-request.param // H), H, D, write))
    return chosen(request.param // 16, 16, 64)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lens, H, D, group", CASES)
def test_matches_reference(lens, H, D, group, dtype, config, poisoned_outputs, check_error):
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


# (lens, H, D): rows that store their new token and attend over it. Length 1 is the new token alone;
# 17 and 65 put it just past a tile of cached tokens (16, 64), 16 and 64 leave it inside one.
WRITE_CASES = [
    ([1, 16, 17, 64, 65, 3], 2, 16),
    ([17, 1, 9], 2, 24),  # head dim not a power of two
]


def make_new_tokens(lens, H, D, dtype, seed=1):
    """A cache from `make_cache` plus each row's new token: k_new, v_new strided slices of a fused
    (N, 3, H, D) projection, write_slots each row's last slot, holding NaN in the cache before the
    write so a kernel that reads the slot back instead of using k_new, v_new shows it."""
    q, k, v, table, rows, lens_t = make_cache(lens, H, D, 2, dtype)
    g = torch.Generator().manual_seed(seed)
    qkv = torch.randn(len(lens), 3, H, D, generator=g).to(dtype)  # (N, 3, H, D)
    q, k_new, v_new = qkv.unbind(1)  # 3 x (N, H, D), strided
    write_slots = table[rows.long(), lens_t.long() - 1].long()  # (N,)
    k[write_slots], v[write_slots] = float("nan"), float("nan")
    return q, k, v, table, rows, lens_t, k_new, v_new, write_slots


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lens, H, D", WRITE_CASES)
@pytest.mark.parametrize("slot_dtype", [torch.int64, torch.int32])
def test_writes_new_token(lens, H, D, dtype, slot_dtype, config, poisoned_outputs, check_error):
    q, k, v, table, rows, lens, k_new, v_new, write_slots = make_new_tokens(lens, H, D, dtype)
    write_slots = write_slots.to(slot_dtype)
    scale = D**-0.5
    k_ref, v_ref = k.clone(), v.clone()
    k_64, v_64 = k.double(), v.double()
    new = NewTokens(k_new, v_new, write_slots)
    out = slot_attention_triton(q, k, v, table, rows, lens, scale, new)
    ref = slot_attention_ref(q, k_ref, v_ref, table, rows, lens, scale, new)
    truth = slot_attention_ref(q.double(), k_64, v_64, table, rows, lens, scale,
                               NewTokens(k_new.double(), v_new.double(), write_slots))
    assert out.shape == q.shape and out.dtype == dtype
    check_error(out, ref, truth)
    # The cache holds the new tokens and is otherwise untouched (unused slots stay NaN).
    torch.testing.assert_close(k, k_ref, rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(v, v_ref, rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(k[write_slots.long()], k_new, rtol=0, atol=0)


def test_padding_slots_share_a_write_slot():
    # Padding rows of a captured step all write into one padding slot and attend over it alone: no
    # crash, the real rows are unaffected, and each head of the slot ends up holding one padding row's.
    q, k, v, table, rows, lens, k_new, v_new, write_slots = make_new_tokens([5, 18, 1, 1, 1], 2, 8, torch.float32)
    padding_slot = int(write_slots[2])
    table[rows[2:].long(), 0] = padding_slot
    write_slots[2:] = padding_slot
    k_ref, v_ref = k.clone(), v.clone()
    new = NewTokens(k_new, v_new, write_slots)
    out = slot_attention_triton(q, k, v, table, rows, lens, 0.5, new)
    ref = slot_attention_ref(q, k_ref, v_ref, table, rows, lens, 0.5, new)
    torch.testing.assert_close(out[:2], ref[:2])
    torch.testing.assert_close(out[2:], v_new[2:])  # one token alone: softmax weight 1 on its own value
    for h in range(2):
        assert any(torch.equal(k[padding_slot, h], k_new[i, h]) and torch.equal(v[padding_slot, h], v_new[i, h])
                   for i in range(2, 5))


@pytest.mark.parametrize("dtype", DTYPES)
def test_reads_another_rows_new_token(dtype, config, poisoned_outputs, check_error):
    # A sentence's first step: row 1 feeds position 0 while rows 0, 2, 3 feed position 1 and attend
    # over both (priors); row 5 reads row 4's new token after 4 cached ones; the others have no prior.
    lens, priors = [2, 1, 2, 2, 5, 6, 18], [1, -1, 1, 1, -1, 4, -1]
    q, k, v, table, rows, lens, k_new, v_new, write_slots = make_new_tokens(lens, 2, 16, dtype)
    for i, j in enumerate(priors):
        if j >= 0:  # the slot the prior row writes is this row's position before last (NaN until written)
            table[rows[i], lens[i] - 2] = write_slots[j]
    scale = 0.25
    k_ref, v_ref = k.clone(), v.clone()
    new = NewTokens(k_new, v_new, write_slots, torch.tensor(priors, dtype=torch.int32))
    out = slot_attention_triton(q, k, v, table, rows, lens, scale, new)
    ref = slot_attention_ref(q, k_ref, v_ref, table, rows, lens, scale, new)
    truth = slot_attention_ref(q.double(), k.double(), v.double(), table, rows, lens, scale)  # the cache as written
    check_error(out, ref, truth)
    torch.testing.assert_close(k, k_ref, rtol=0, atol=0, equal_nan=True)
    # Without priors the kernel reads those slots from the cache, where they do not hold the tokens yet.
    k[write_slots], v[write_slots] = float("nan"), float("nan")
    without_priors = new._replace(priors=None)
    assert slot_attention_triton(q, k, v, table, rows, lens, scale, without_priors)[[0, 2, 3, 5]].isnan().any()


def launches():
    """The wrapper on 16 heads in each plan `_config` makes (hopper_build.py records the launches):
    chained, in bfloat16, self-attention storing the new tokens of a typed sentence's 4 beams (one
    fed by another: priors), of 256 rows at D = 64 (heads paired, tiles read one ahead) and at D = 128
    (tiles read in the loop); in float16, not chained, cross-attention of 32 rows (one warp a head)."""
    with chained(slot_attention_triton):
        q, k, v, table, rows, lens, k_new, v_new, write_slots = make_new_tokens([2, 1, 2, 2], 16, 64, torch.bfloat16)
        priors = torch.tensor([1, -1, 1, 1], dtype=torch.int32)
        slot_attention_triton(q, k, v, table, rows, lens, 0.125, NewTokens(k_new, v_new, write_slots, priors))
        for D in (64, 128):
            q, k, v, table, rows, lens, k_new, v_new, write_slots = make_new_tokens([3] * 256, 16, D, torch.bfloat16)
            slot_attention_triton(q, k, v, table, rows, lens, D**-0.5, NewTokens(k_new, v_new, write_slots))
    slot_attention_triton(*make_cache([9] * 32, 16, 64, 4, torch.float16), 0.125)


def test_the_kernel_compiles_for_hopper():
    """As tests/kernels/test_constrained_advance.py's: compiled for sm_90 as the wrapper launches it."""
    build = compile_for_hopper("dragoman.kernels.slot_attention", "test_slot_attention:launches",
                               "_slot_attention_kernel")
    assert build.returncode == 0, build.stdout + build.stderr[-3000:]
    assert build.stdout.strip() == "compiled 4"
