import torch

from dragoman.kernels.step_inputs import step_inputs_ref, step_inputs_triton
from hopper_build import chained, compile_for_hopper
from row_states import row_state

BLOCK_SIZE = 4


def make_state(R, T, seed=0, finished=(), prior_offsets=None):
    """The rows' state of engine/rows.py for R rows, the last one padding_row (length 0; its flag
    `finished` set, as a padding sentence's search may leave it), the rows `finished`, and
    `prior_offsets` {row: offset} (none by default)."""
    g = torch.Generator().manual_seed(seed)
    kv_len = torch.randint(0, T - 1, (R,), generator=g, dtype=torch.int32)
    kv_len[-1] = 0
    done = torch.zeros(R, dtype=torch.bool)
    done[[*finished, R - 1]] = True
    return dict(
        kv_len=kv_len,
        write_block=torch.randint(0, 100, (R,), generator=g, dtype=torch.int32),
        kv_slots=torch.randint(0, 400, (R, T), generator=g, dtype=torch.int32),
        hyp=torch.randint(0, 1000, (R, T), generator=g),
        cross_len=torch.randint(1, 30, (R,), generator=g, dtype=torch.int32),
        finished=done,
        prior_offset=torch.zeros(R, dtype=torch.int32).index_put_(
            (torch.tensor(list((prior_offsets or {}).keys()), dtype=torch.long),),
            torch.tensor(list((prior_offsets or {}).values()), dtype=torch.int32)),
    )


def run_both(rows, R, T, seed=0, finished=(), prior_offsets=None):
    state = make_state(R, T, seed, finished, prior_offsets)
    ref_state = {name: t.clone() for name, t in state.items()}
    out = step_inputs_triton(rows, row_state(state), R - 1, BLOCK_SIZE)
    ref = step_inputs_ref(rows, row_state(ref_state), R - 1, BLOCK_SIZE)
    return make_state(R, T, seed, finished, prior_offsets), state, out, ref_state, ref


def test_matches_reference_with_padding_rows(poisoned_outputs):
    R, T = 9, 12
    rows = torch.tensor([3, 0, 5, 8, 8, 8])  # three real rows, then the padding row as padding
    before, state, out, ref_state, ref = run_both(rows, R, T)
    for got, want in zip(out, ref):
        assert got.dtype == want.dtype and torch.equal(got, want)
    for name in state:
        assert torch.equal(state[name], ref_state[name]), name
    fed, tokens, positions, write_slots, self_lens, cross_lens, priors = out
    assert torch.equal(fed, rows) and (priors == -1).all()
    n = before["kv_len"][rows].long()
    assert torch.equal(tokens, before["hyp"][rows, n]) and torch.equal(positions, n)
    assert torch.equal(write_slots, before["write_block"][rows].long() * BLOCK_SIZE + n % BLOCK_SIZE)
    assert torch.equal(state["kv_slots"][rows, n].long(), write_slots)
    assert torch.equal(self_lens, (n + 1).int()) and torch.equal(cross_lens, before["cross_len"][rows])
    assert torch.equal(state["kv_len"][rows[:3]], before["kv_len"][rows[:3]] + 1)
    assert state["kv_len"][-1] == 0  # padding feeds position 0 again next step
    untouched = torch.ones(R, dtype=torch.bool)
    untouched[rows] = False
    assert torch.equal(state["kv_len"][untouched], before["kv_len"][untouched])
    assert torch.equal(state["kv_slots"][untouched], before["kv_slots"][untouched])


def test_more_rows_than_one_program():
    R, T = 300, 8
    rows = torch.randperm(R - 1, generator=torch.Generator().manual_seed(2))[:260]
    _, state, out, ref_state, ref = run_both(rows, R, T, seed=3)
    for got, want in zip(out, ref):
        assert torch.equal(got, want)
    for name in state:
        assert torch.equal(state[name], ref_state[name]), name


def test_rows_of_finished_sentences_sit_the_step_out_as_the_padding_row(poisoned_outputs):
    """A sentence found done by the last step feeds nothing: its rows become the padding row, whose
    length stays 0, and keep their own state."""
    R, T = 9, 12
    rows = torch.tensor([3, 0, 5, 1, 8, 8])
    before, state, out, ref_state, ref = run_both(rows, R, T, finished=[0, 1])
    for got, want in zip(out, ref):
        assert got.dtype == want.dtype and torch.equal(got, want)
    for name in state:
        assert torch.equal(state[name], ref_state[name]), name
    fed, tokens, positions = out[:3]
    assert fed.tolist() == [3, 8, 5, 8, 8, 8]
    assert positions.tolist() == [before["kv_len"][3], 0, before["kv_len"][5], 0, 0, 0]
    for r in (0, 1):
        assert state["kv_len"][r] == before["kv_len"][r] and torch.equal(state["kv_slots"][r], before["kv_slots"][r])


def test_first_step_of_a_sentence_names_the_beam_feeding_position_0(poisoned_outputs):
    """Rows 4, 6, 7 (beams 0, 2, 3 of a sentence whose beam 1, row 5, feeds position 0 in its first
    step) learn that row's place in the step; their offsets are spent, other rows have no prior."""
    R, T = 9, 12
    rows = torch.tensor([3, 4, 5, 6, 7, 8])
    offsets = {4: 1, 6: -1, 7: -2}
    before, state, out, ref_state, ref = run_both(rows, R, T, prior_offsets=offsets)
    for got, want in zip(out, ref):
        assert got.dtype == want.dtype and torch.equal(got, want)
    for name in state:
        assert torch.equal(state[name], ref_state[name]), name
    assert out[-1].tolist() == [-1, 2, -1, 2, 2, -1]
    assert (state["prior_offset"] == 0).all()


def launches():
    """The wrapper on a step's rows with the engine's cache blocks of 16 tokens, chained and not
    (hopper_build.py records the launches)."""
    rows = torch.tensor([3, 4, 5, 6, 7, 8])
    with chained(step_inputs_triton):
        step_inputs_triton(rows, row_state(make_state(9, 12, prior_offsets={4: 1})), 8, 16)
    step_inputs_triton(rows, row_state(make_state(9, 12)), 8, 16)


def test_the_kernel_compiles_for_hopper():
    """As tests/kernels/test_constrained_advance.py's: compiled for sm_90 as the wrapper launches it."""
    build = compile_for_hopper("dragoman.kernels.step_inputs", "test_step_inputs:launches", "_step_inputs_kernel")
    assert build.returncode == 0, build.stdout + build.stderr[-3000:]
    assert build.stdout.strip() == "compiled 2"
