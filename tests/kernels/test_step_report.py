import pytest
import torch

from dragoman.kernels import StepReport
from dragoman.kernels.step_report import step_report_ref, step_report_triton
from hopper_build import chained, compile_for_hopper
from row_states import row_state

R, T = 9, 10


def make_state(seed=0):
    """Rows' state: lengths (one filling every position), hypotheses, and finished hypotheses for
    rows 4 and 6 only (-inf scores elsewhere, as a greedy search leaves them)."""
    g = torch.Generator().manual_seed(seed)
    kv_len = torch.randint(0, T, (R,), generator=g, dtype=torch.int32)
    kv_len[2] = T - 1  # its hypothesis is T long
    kv_len[-1] = 0  # the padding row
    fin_score = torch.full((R,), float("-inf"))
    fin_score[[4, 6]] = torch.tensor([-1.5, -2.0])
    fin_len = torch.tensor([3, 5, 2, 7, 4, 6, 10, 1, 1], dtype=torch.int32)
    return dict(kv_len=kv_len, hyp=torch.randint(0, 1000, (R, T), generator=g), fin_score=fin_score,
                fin_hyp=torch.randint(0, 1000, (R, T), generator=g), fin_len=fin_len,
                score=torch.randn(R, generator=g))


@pytest.mark.parametrize("every", [False, True])
@pytest.mark.parametrize("fn", [step_report_ref, step_report_triton])
def test_reports_done_and_the_best_hypotheses(fn, every):
    state = make_state()
    # Sentences of two rows: done with a finished hypothesis (lead 4); done without one (lead 2,
    # greedy-like); not done though it has one (lead 6); not done (lead 3); padding (padding_row).
    rows = torch.tensor([[4, 1], [2, 0], [6, 7], [3, 5], [8, 8]])
    done = torch.tensor([True, True, False, False, True])
    done_host = torch.zeros(6, dtype=torch.bool)  # room for more sentences than this step has
    best_host = torch.full((6, 12), -7)
    length_host = torch.full((6,), -7, dtype=torch.int32)
    score_host = torch.full((6,), -7.0)
    fn(done, rows, row_state(state), StepReport(done_host, best_host, length_host, score_host), every)
    assert done_host.tolist() == [True, True, False, False, True, False]
    running = lambda lead: (int(state["kv_len"][lead]) + 1, state["hyp"][lead], state["score"][lead])  # noqa: E731
    expected = {0: (int(state["fin_len"][4]), state["fin_hyp"][4], state["fin_score"][4]), 1: running(2)}
    if every:
        expected |= {2: running(6), 3: running(3)}
    for s in range(6):
        if s in expected:
            n, tokens, score = expected[s]
            n = min(n, T)
            assert length_host[s] == n and best_host[s, :n].tolist() == tokens[:n].tolist()
            assert score_host[s] == score
            assert (best_host[s, n:] == -7).all()  # past the hypothesis: untouched
        elif s != 4:  # (the padding sentence, done, reports the padding row)
            assert length_host[s] == -7 and (best_host[s] == -7).all() and score_host[s] == -7


def launches():
    """The wrapper reporting results only, and chained with every sentence's partial result
    (hopper_build.py records the launches)."""
    rows = torch.tensor([[4, 1], [2, 0], [6, 7], [3, 5], [8, 8]])
    done = torch.tensor([True, True, False, False, True])
    report = StepReport(torch.zeros(6, dtype=torch.bool), torch.full((6, 12), -7),
                        torch.full((6,), -7, dtype=torch.int32), torch.full((6,), -7.0))
    step_report_triton(done, rows, row_state(make_state()), report, False)
    with chained(step_report_triton):
        step_report_triton(done, rows, row_state(make_state()), report, True)


def test_the_kernel_compiles_for_hopper():
    """As tests/kernels/test_constrained_advance.py's: compiled for sm_90 as the wrapper launches it."""
    build = compile_for_hopper("dragoman.kernels.step_report", "test_step_report:launches", "_step_report_kernel")
    assert build.returncode == 0, build.stdout + build.stderr[-3000:]
    assert build.stdout.strip() == "compiled 2"
