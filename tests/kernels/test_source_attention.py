import importlib

import pytest
import torch

from dragoman.kernels.slot_attention import slot_attention_ref
from dragoman.kernels.source_attention import source_attention_ref, source_attention_triton
from hopper_build import chained, compile_for_hopper

# The module itself: `kernels.source_attention` is the dispatching function of the same name.
source_attention_module = importlib.import_module("dragoman.kernels.source_attention")

DTYPES = [torch.float32, torch.float16]  # no bfloat16 under the interpreter: see conftest.py

# (source length of each run, H, D, rows per run)
CASES = [
    ([1, 15, 16, 17], 2, 16, 2),  # length 1, 16-token boundaries
    ([64, 65, 1], 2, 64, 4),  # the engine's beam 4, 64-token boundaries
    ([100, 17], 1, 128, 5),  # a run of 5 padded to 16 queries, D=128
    ([15, 65, 100], 2, 24, 1),  # one row per run, head dim not a power of two
    ([33, 2], 1, 24, 5),
]


def make_cache(run_lens, H, D, group, dtype, seed=0):
    """Runs of `group` rows, each run with its own source: its rows list the same slots and length.

    Slots are shuffled, slot-list entries past a run's length are garbage (-1 or 2**30), slots no
    run uses hold NaN, and rows reach their slot lists through a shuffled `rows` index with spare
    table rows between, so any read the kernel should not make spoils its output.
    """
    g = torch.Generator().manual_seed(seed)
    N, T = len(run_lens) * group, max(run_lens) + 3
    num_slots = sum(run_lens) + 7
    free = torch.randperm(num_slots, generator=g)
    table = torch.full((2 * N + 1, T), -1, dtype=torch.int32)  # (R, T)
    rows = torch.randperm(2 * N + 1, generator=g)[:N].int()
    lens = torch.tensor(run_lens, dtype=torch.int32).repeat_interleave(group)  # (N,)
    for r, n in enumerate(run_lens):
        source, free = free[:n], free[n:]
        for i in range(r * group, (r + 1) * group):
            table[rows[i], :n] = source
            if i % 2:
                table[rows[i], n:] = 2**30
    used = torch.zeros(num_slots, dtype=torch.bool)
    for i in range(N):
        used[table[rows[i], :lens[i]].long()] = True
    k = torch.randn(num_slots, H, D, generator=g).masked_fill(~used[:, None, None], float("nan")).to(dtype)
    v = torch.randn(num_slots, H, D, generator=g).masked_fill(~used[:, None, None], float("nan")).to(dtype)
    q = torch.randn(N, H, D, generator=g).to(dtype)
    return q, k, v, table, rows, lens


@pytest.mark.parametrize("config", [(16, 1, False), (32, 4, True), (64, 1, True)])  # _tile_and_warps's kinds
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("run_lens, H, D, group", CASES)
def test_matches_reference(run_lens, H, D, group, dtype, config, monkeypatch, poisoned_outputs, check_error):
    monkeypatch.setattr(source_attention_module, "_tile_and_warps", lambda num_programs: config)
    q, k, v, table, rows, lens = make_cache(run_lens, H, D, group, dtype)
    scale = D**-0.5
    out = source_attention_triton(q, k, v, table, rows, lens, scale, group)
    ref = source_attention_ref(q, k, v, table, rows, lens, scale, group)
    truth = source_attention_ref(q.double(), k.double(), v.double(), table, rows, lens, scale, group)
    assert out.shape == q.shape and out.dtype == dtype
    check_error(out, ref, truth)


def test_reference_reads_the_first_row_of_each_run():
    # Rows of a run are promised the same slots: the reference takes them from the run's first row
    # alone, so garbage in the others' lengths and slot lists does not reach it.
    q, k, v, table, rows, lens = make_cache([5, 18, 1], 2, 8, 3, torch.float64)
    want = slot_attention_ref(q, k, v, table, rows, lens, 0.5)
    spoiled = lens.clone()
    spoiled[1::3] = 0
    table[rows[2::3]] = -1
    torch.testing.assert_close(source_attention_ref(q, k, v, table, rows, spoiled, 0.5, 3), want)


def test_strided_inputs():
    # q sliced out of a wider projection, k and v out of one layer of a (L, slots, H, D) cache.
    q, k, v, table, rows, lens = make_cache([7, 12], 2, 16, 2, torch.float32)
    wide = torch.randn(4, 3, 2, 16)  # (N, 3, H, D)
    q = wide[:, 0]  # (N, H, D)
    k, v = torch.stack([k, k]).select(0, 1), torch.stack([v, v]).select(0, 1)  # (slots, H, D)
    out = source_attention_triton(q, k, v, table, rows, lens, 0.25, 2)
    torch.testing.assert_close(out, source_attention_ref(q, k, v, table, rows, lens, 0.25, 2))


def launches():
    """The wrapper on 16 heads of 64 in each plan `_tile_and_warps` makes (hopper_build.py records the
    launches): a typed sentence's 4 beams in bfloat16, chained (few programs: the first tile read
    before the wait); a document's 32 sentences of 4 beams in float16 (many programs); greedy rows in
    float32, whose products are exact ("ieee")."""
    with chained(source_attention_triton):
        source_attention_triton(*make_cache([40], 16, 64, 4, torch.bfloat16), 0.125, 4)
    source_attention_triton(*make_cache([20] * 32, 16, 64, 4, torch.float16), 0.125, 4)
    source_attention_triton(*make_cache([40, 9], 16, 64, 1, torch.float32), 0.125, 1)


def test_the_kernel_compiles_for_hopper():
    """As tests/kernels/test_constrained_advance.py's: compiled for sm_90 as the wrapper launches it."""
    build = compile_for_hopper("dragoman.kernels.source_attention", "test_source_attention:launches",
                               "_source_attention_kernel")
    assert build.returncode == 0, build.stdout + build.stderr[-3000:]
    assert build.stdout.strip() == "compiled 3"
