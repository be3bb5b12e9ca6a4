import torch

from kernels.step_inputs import step_inputs_ref, step_inputs_triton

BLOCK_SIZE = 4


def make_state(R, T, seed=0):
    """The rows' state of engine/rows.py for R rows, the last one scratch (length 0)."""
    g = torch.Generator().manual_seed(seed)
    kv_len = torch.randint(0, T - 1, (R,), generator=g, dtype=torch.int32)
    kv_len[-1] = 0
    return dict(
        kv_len=kv_len,
        write_block=torch.randint(0, 100, (R,), generator=g, dtype=torch.int32),
        kv_slots=torch.randint(0, 400, (R, T), generator=g, dtype=torch.int32),
        hyp=torch.randint(0, 1000, (R, T), generator=g),
        cross_len=torch.randint(1, 30, (R,), generator=g, dtype=torch.int32),
    )


def run_both(rows, R, T, seed=0):
    state = make_state(R, T, seed)
    ref_state = {name: t.clone() for name, t in state.items()}
    out = step_inputs_triton(rows, *state.values(), R - 1, BLOCK_SIZE)
    ref = step_inputs_ref(rows, *ref_state.values(), R - 1, BLOCK_SIZE)
    return make_state(R, T, seed), state, out, ref_state, ref


def test_matches_reference_with_padding_rows(poisoned_outputs):
    R, T = 9, 12
    rows = torch.tensor([3, 0, 5, 8, 8, 8])  # three real rows, then the scratch row as padding
    before, state, out, ref_state, ref = run_both(rows, R, T)
    for got, want in zip(out, ref):
        assert got.dtype == want.dtype and torch.equal(got, want)
    for name in state:
        assert torch.equal(state[name], ref_state[name]), name
    tokens, positions, write_slots, self_lens, cross_lens = out
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
