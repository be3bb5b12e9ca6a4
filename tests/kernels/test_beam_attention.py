import importlib

import pytest
import torch

import kernels
from kernels.beam_attention import beam_attention_ref, beam_attention_triton
from kernels.slot_attention import slot_attention_ref

# tests/kernels/conftest.py skips the other kernels' tests where triton is missing; this one itself.
pytest.importorskip("triton")

# The module itself: `kernels.beam_attention` is the dispatching function of the same name.
beam_attention_module = importlib.import_module("kernels.beam_attention")

# bfloat16 with one bfloat16 step of slack for the interpreter's truncation (see conftest.py).
DTYPES = [torch.float32, torch.bfloat16]

# (beams taken together, tokens per step), as _beams_tile_and_warps picks them: the beams one after
# another, and as many together as divide the run's (4 and 2, then 1 for runs of 3 or 1).
CONFIGS = [(1, 16), (4, 64)]

# (lens, shared, H, D, group): row i reads lens[i] slots, the first shared[i] of them those of its
# run's first row (the beams' common prefix), the others its own. Each row's last slot is its own.
CASES = [
    ([1, 1, 16, 17, 5, 33], [0, 0, 0, 15, 0, 4], 2, 16, 2),  # length 1, 16-token boundaries
    ([40, 40, 39, 40, 3, 9, 2, 3], [0, 32, 38, 0, 0, 2, 1, 2], 2, 8, 4),  # beam 4; a beam sharing nothing
    ([70, 64, 65, 1], [0, 63, 0, 0], 2, 64, 2),  # 64-token boundaries; a length-1 beam by a long one
    ([100, 31], [0, 0], 1, 128, 1),  # one row per run, D=128
    ([9, 20, 2, 9, 9, 4], [0, 8, 1, 0, 8, 3], 2, 24, 3),  # runs of 3, head dim not a power of two
]


def make_runs(lens, shared, H, D, group, dtype, seed=0):
    """Runs of `group` rows whose slot lists start with `shared` slots of their run's first row.

    Slots are shuffled, slot-list entries past a row's length are garbage (-1 or 2**30), slots no row
    uses hold NaN, and rows reach their slot lists through a shuffled `rows` index with spare table
    rows between, so any read the kernel should not make (another beam's slots, past a length)
    spoils its output.
    """
    g = torch.Generator().manual_seed(seed)
    N, T = len(lens), max(lens) + 3
    assert N % group == 0
    num_slots = sum(lens) + 7
    free = torch.randperm(num_slots, generator=g).tolist()
    table = torch.full((2 * N + 1, T), -1, dtype=torch.int32)  # (R, T)
    rows = torch.randperm(2 * N + 1, generator=g)[:N].int()
    for i, (n, common) in enumerate(zip(lens, shared)):
        first = i - i % group
        assert common <= min(n, lens[first]) and (i > first or common == 0)
        table[rows[i], :common] = table[rows[first], :common]
        table[rows[i], common:n] = torch.tensor([free.pop() for _ in range(common, n)], dtype=torch.int32)
        if i % 2:
            table[rows[i], n:] = 2**30
    used = torch.zeros(num_slots, dtype=torch.bool)
    for i, n in enumerate(lens):
        used[table[rows[i], :n].long()] = True
    k = torch.randn(num_slots, H, D, generator=g).masked_fill(~used[:, None, None], float("nan")).to(dtype)
    v = torch.randn(num_slots, H, D, generator=g).masked_fill(~used[:, None, None], float("nan")).to(dtype)
    q = torch.randn(N, H, D, generator=g).to(dtype)
    return q, k, v, table, rows, torch.tensor(lens, dtype=torch.int32)


def make_new_tokens(lens, shared, H, D, group, dtype, seed=1):
    """Runs from `make_runs` plus each row's new token: k_new, v_new strided slices of a fused
    (N, 3, H, D) projection, write_slots each row's last slot, holding NaN in the cache before the
    write so a kernel that reads the slot back instead of using k_new, v_new shows it."""
    q, k, v, table, rows, lens_t = make_runs(lens, shared, H, D, group, dtype)
    g = torch.Generator().manual_seed(seed)
    qkv = torch.randn(len(lens), 3, H, D, generator=g).to(dtype)  # (N, 3, H, D)
    q, k_new, v_new = qkv.unbind(1)  # 3 x (N, H, D), strided
    write_slots = table[rows.long(), lens_t.long() - 1].long()  # (N,)
    assert write_slots.unique().numel() == len(lens), "each row's last slot must be its own"
    k[write_slots], v[write_slots] = float("nan"), float("nan")
    return q, k, v, table, rows, lens_t, k_new, v_new, write_slots


def slack(truth, dtype):
    """The interpreter truncates float32 -> bfloat16 (conftest.py): allow one bfloat16 step more."""
    return 2**-7 * truth.abs().max().item() if dtype == torch.bfloat16 else 1e-6


@pytest.fixture(params=CONFIGS, ids=lambda c: f"beams{c[0]}-tile{c[1]}")
def config(request, monkeypatch):
    beams, tile = request.param
    monkeypatch.setattr(beam_attention_module, "_beams_tile_and_warps", lambda num_programs: (beams, tile, 1))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lens, shared, H, D, group", CASES)
def test_matches_reference(lens, shared, H, D, group, dtype, config, poisoned_outputs, check_error):
    q, k, v, table, rows, lens = make_runs(lens, shared, H, D, group, dtype)
    scale = D**-0.5
    out = beam_attention_triton(q, k, v, table, rows, lens, scale, group)
    ref = beam_attention_ref(q, k, v, table, rows, lens, scale, group)
    truth = beam_attention_ref(q.double(), k.double(), v.double(), table, rows, lens, scale, group)
    assert out.shape == q.shape and out.dtype == dtype
    check_error(out, ref, truth, slack(truth, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lens, shared, H, D, group", CASES)
def test_writes_new_token(lens, shared, H, D, group, dtype, config, poisoned_outputs, check_error):
    q, k, v, table, rows, lens, k_new, v_new, write_slots = make_new_tokens(lens, shared, H, D, group, dtype)
    scale = D**-0.5
    k_ref, v_ref = k.clone(), v.clone()
    k_64, v_64 = k.double(), v.double()
    new = dict(k_new=k_new, v_new=v_new, write_slots=write_slots)
    out = beam_attention_triton(q, k, v, table, rows, lens, scale, group, **new)
    ref = beam_attention_ref(q, k_ref, v_ref, table, rows, lens, scale, group, **new)
    truth = beam_attention_ref(q.double(), k_64, v_64, table, rows, lens, scale, group,
                               k_new=k_new.double(), v_new=v_new.double(), write_slots=write_slots)
    assert out.shape == q.shape and out.dtype == dtype
    check_error(out, ref, truth, slack(truth, dtype))
    # The cache holds the new tokens and is otherwise untouched (unused slots stay NaN).
    torch.testing.assert_close(k, k_ref, rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(v, v_ref, rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(k[write_slots], k_new, rtol=0, atol=0)


def test_int32_write_slots():
    q, k, v, table, rows, lens, k_new, v_new, write_slots = make_new_tokens(*CASES[1][:-1], 4, torch.float32)
    k_ref, v_ref = k.clone(), v.clone()
    new = dict(k_new=k_new, v_new=v_new, write_slots=write_slots.int())
    out = beam_attention_triton(q, k, v, table, rows, lens, 0.5, 4, **new)
    torch.testing.assert_close(out, beam_attention_ref(q, k_ref, v_ref, table, rows, lens, 0.5, 4, **new))
    torch.testing.assert_close(k, k_ref, rtol=0, atol=0, equal_nan=True)


def test_reference_is_slot_attention():
    # The runs change how the kernel reads, not what it computes: the reference is slot_attention's.
    q, k, v, table, rows, lens = make_runs(*CASES[1][:-1], 4, torch.float64)
    torch.testing.assert_close(beam_attention_ref(q, k, v, table, rows, lens, 0.5, 4),
                               slot_attention_ref(q, k, v, table, rows, lens, 0.5), rtol=0, atol=0)
    assert torch.equal(kernels.beam_attention(q, k, v, table, rows, lens, 0.5, 4),  # CPU: the reference
                       beam_attention_ref(q, k, v, table, rows, lens, 0.5, 4))


def test_strided_inputs():
    # q sliced out of a fused qkv projection, k and v out of one layer of a (L, slots, H, D) cache.
    q, k, v, table, rows, lens = make_runs([7, 12, 5, 6], [0, 6, 0, 5], 2, 16, 2, torch.float32)
    qkv = torch.randn(4, 3, 2, 16)  # (N, 3, H, D)
    q = qkv[:, 0]  # (N, H, D)
    k, v = torch.stack([k, k]).select(0, 1), torch.stack([v, v]).select(0, 1)  # (slots, H, D)
    out = beam_attention_triton(q, k, v, table, rows, lens, 0.25, 2)
    torch.testing.assert_close(out, beam_attention_ref(q, k, v, table, rows, lens, 0.25, 2))


def test_padding_rows_share_a_write_slot(config):
    # Padding runs of a captured step all write into one scratch slot and attend over it alone: no
    # crash, the real rows are unaffected, and each head of the slot ends up holding one padding row's.
    lens, shared = [5, 18, 1, 1, 1, 1], [0, 4, 0, 0, 0, 0]
    q, k, v, table, rows, lens, k_new, v_new, write_slots = make_new_tokens(lens, shared, 2, 8, 2, torch.float32)
    scratch = int(write_slots[2])
    table[rows[2:].long(), 0] = scratch
    write_slots[2:] = scratch
    k_ref, v_ref = k.clone(), v.clone()
    new = dict(k_new=k_new, v_new=v_new, write_slots=write_slots)
    out = beam_attention_triton(q, k, v, table, rows, lens, 0.5, 2, **new)
    ref = beam_attention_ref(q, k_ref, v_ref, table, rows, lens, 0.5, 2, **new)
    torch.testing.assert_close(out[:2], ref[:2])
    torch.testing.assert_close(out[2:], v_new[2:])  # one token alone: softmax weight 1 on its own value
    for h in range(2):
        assert any(torch.equal(k[scratch, h], k_new[i, h]) and torch.equal(v[scratch, h], v_new[i, h])
                   for i in range(2, 6))
