import pytest
import torch

from dragoman.kernels import AdmittedRows
from dragoman.kernels.admit_rows import admit_rows_ref, admit_rows_triton
from hopper_build import compile_for_hopper
from row_states import row_state

R, T, SOURCE, BLOCK = 12, 8, 40, 4
BLOCKED = -1.0e9


def make_state(seed=0):
    """The rows' state of engine/rows.py, all of it holding leftovers of earlier sentences."""
    g = torch.Generator().manual_seed(seed)
    i32 = dict(generator=g, dtype=torch.int32)
    return dict(
        hyp=torch.randint(0, 100, (R, T), generator=g),
        kv_len=torch.randint(0, T, (R,), **i32),
        kv_slots=torch.randint(0, 500, (R, T), **i32),
        finished=torch.rand(R, generator=g) < 0.5,
        score=torch.randn(R, generator=g),
        fin_score=torch.randn(R, generator=g),
        improvable=torch.rand(R, generator=g) < 0.5,
        adapter=torch.randint(-1, 3, (R,), **i32),
        write_block=torch.randint(0, 50, (R,), **i32),
        prior_offset=torch.randint(-2, 3, (R,), **i32),
        cross_slots=torch.randint(0, 500, (R, SOURCE), **i32),
        cross_len=torch.randint(1, SOURCE, (R,), **i32),
        limit=torch.randint(2, T, (R,), **i32),
    )


def admitted():
    """Two sentences: one of 3 beams (rows 7, 2, 9) taking first blocks, its source 3 blocks long,
    whose beam 1 feeds position 0 in its first step; one of 1 row (row 4) taking none, its source 2
    blocks long (its block list padded)."""
    i32 = dict(dtype=torch.int32)
    return dict(
        rows=torch.tensor([7, 2, 9, 4], **i32),
        prefixes=torch.tensor([[2, 30], [2, 30], [2, 30], [2, 31]], **i32),
        beams=torch.tensor([0, 1, 2, 0], **i32),
        adapters=torch.tensor([1, 1, 1, -1], **i32),
        first_blocks=torch.tensor([5, 6, 8, -1], **i32),
        prior_offsets=torch.tensor([1, 0, -1, 0], **i32),
        source_blocks=torch.tensor([[3, 0, 7], [3, 0, 7], [3, 0, 7], [9, 1, 0]], **i32),
        source_lengths=torch.tensor([11, 11, 11, 6], **i32),
        limits=torch.tensor([7, 7, 7, 5], **i32),
    )


@pytest.mark.parametrize("fn", [admit_rows_ref, admit_rows_triton])
def test_sets_up_the_rows_and_leaves_the_others(fn):
    state, before, new = make_state(), make_state(), admitted()
    fn(AdmittedRows(**new), row_state(state), BLOCK, BLOCKED)
    rows = new["rows"].long()
    assert state["hyp"][rows, :2].tolist() == new["prefixes"].tolist()
    assert torch.equal(state["hyp"][rows, 2:], before["hyp"][rows, 2:])
    assert state["kv_len"][rows].tolist() == [1, 0, 1, 0] and not state["finished"][rows].any()
    assert state["prior_offset"][rows].tolist() == [1, 0, -1, 0]
    assert state["kv_slots"][[7, 9], 0].tolist() == [6 * BLOCK] * 2  # row 2 writes position 0 into block 6
    assert torch.equal(state["kv_slots"][[2, 4]], before["kv_slots"][[2, 4]])
    assert torch.equal(state["kv_slots"][[7, 9], 1:], before["kv_slots"][[7, 9], 1:])
    assert state["score"][rows].tolist() == [0.0, BLOCKED, BLOCKED, 0.0]
    assert (state["fin_score"][rows] == float("-inf")).all() and state["improvable"][rows].all()
    assert state["adapter"][rows].tolist() == [1, 1, 1, -1]
    assert state["write_block"][rows].tolist() == [5, 6, 8, int(before["write_block"][4])]
    slots = [b * BLOCK + o for b in (3, 0, 7) for o in range(BLOCK)]
    assert all(state["cross_slots"][r, :12].tolist() == slots for r in (7, 2, 9))
    assert state["cross_slots"][4, :8].tolist() == [b * BLOCK + o for b in (9, 1) for o in range(BLOCK)]
    assert torch.equal(state["cross_slots"][rows, 12:], before["cross_slots"][rows, 12:])
    assert state["cross_len"][rows].tolist() == [11, 11, 11, 6]
    assert state["limit"][rows].tolist() == [7, 7, 7, 5]
    others = torch.ones(R, dtype=torch.bool)
    others[rows] = False
    for name in state:
        assert torch.equal(state[name][others], before[name][others]), name


def test_kernel_matches_reference():
    state, ref_state, new = make_state(1), make_state(1), admitted()
    admit_rows_triton(AdmittedRows(**new), row_state(state), BLOCK, BLOCKED)
    admit_rows_ref(AdmittedRows(**new), row_state(ref_state), BLOCK, BLOCKED)
    for name in state:
        assert torch.equal(state[name], ref_state[name]), name


def launches():
    """The wrapper on the two sentences above, with the engine's cache blocks of 16 tokens
    (hopper_build.py records the launch)."""
    admit_rows_triton(AdmittedRows(**admitted()), row_state(make_state()), 16, BLOCKED)


def test_the_kernel_compiles_for_hopper():
    """As tests/kernels/test_constrained_advance.py's: compiled for sm_90 as the wrapper launches it."""
    build = compile_for_hopper("dragoman.kernels.admit_rows", "test_admit_rows:launches", "_admit_rows_kernel")
    assert build.returncode == 0, build.stdout + build.stderr[-3000:]
    assert build.stdout.strip() == "compiled 1"
