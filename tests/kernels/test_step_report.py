import pytest
import torch

from kernels.step_report import step_report_ref, step_report_triton


def make_state(R=7, T=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    kv_len = torch.randint(0, T, (R,), generator=g, dtype=torch.int32)
    kv_len[2] = T - 1  # a hypothesis filling every position: its length is capped at T
    kv_len[-1] = 0  # the scratch row
    return kv_len, torch.randint(0, 1000, (R, T), generator=g)


@pytest.mark.parametrize("with_best", [False, True])
@pytest.mark.parametrize("fn", [step_report_ref, step_report_triton])
def test_reports_done_and_each_sentences_best_hypothesis(fn, with_best):
    kv_len, hyp = make_state()
    rows = torch.tensor([[4, 1], [2, 0], [6, 6]])  # two sentences of two beams, then padding (scratch)
    done = torch.tensor([True, False, True])
    done_host = torch.zeros(5, dtype=torch.bool)  # room for more sentences than this step has
    best_host = torch.full((5, 12), -7) if with_best else None
    fn(done, rows, kv_len, hyp, done_host, best_host)
    assert done_host.tolist() == [True, False, True, False, False]
    if with_best:
        for s, lead in enumerate([4, 2]):
            n = min(int(kv_len[lead]) + 1, 10)
            assert best_host[s, :n].tolist() == hyp[lead, :n].tolist()
            assert (best_host[s, n:] == -7).all()  # past the hypothesis: untouched
        assert (best_host[3:] == -7).all()
