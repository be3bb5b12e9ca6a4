"""constrained_advance's kernel against its reference, bit for bit, over multi-step runs: sentences
of one to three constraints (overlapping ones, a repeated token, chains with gaps and silent
tokens, one met by its prefix) and a padding sentence, in rows in no particular order; scores on
a coarse grid on even steps (equal candidates within and across rows), `</s>` often among the
best, rows allowing few tokens, max_lengths that leave the constraints no room (restricted rows),
a forced `</s>`, every early-stopping mode, and capacities below the rows a sentence has."""

import contextlib
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("triton")

from dragoman.engine.constrained_search import ConstraintTables  # noqa: E402
from dragoman.engine.constraints import Constraints  # noqa: E402
from dragoman.engine.decoding import BLOCKED  # noqa: E402
from dragoman.engine.rows import DecoderRows  # noqa: E402
from dragoman.kernels.constrained_advance import constrained_advance_ref, constrained_advance_triton  # noqa: E402
from hopper_build import chained, compile_for_hopper  # noqa: E402

# numpy's x / 0 under the interpreter: the padding sentence's length is 0, and 0 ** length_penalty may be 0.
pytestmark = pytest.mark.filterwarnings("ignore:divide by zero encountered in divide:RuntimeWarning",
                                        "ignore:invalid value encountered in divide:RuntimeWarning")

EOS, VOCAB, T = 2, 40, 20
# (prefix, constraints, max_length)
SENTENCES = [
    ([2, 7], [[5, 6]], 14),
    ([2, 9, 11], [[5, 6], [6, 7], [9, 30]], 8),  # little room: rows get restricted
    ([2, 8], [[8, 8, 9]], 12),
    ([2, 30, 5], [[5, 6, 7, 8], [39, 38]], T - 1),  # the prefix meets one token already
    ([2, 7], [[[20], {4, 11}, [21]], [[22], [], [23]]], T - 1),  # gaps, one that silent tokens do not fill
]


def start(W, g):
    """The sentences in shuffled rows, W each, and a padding sentence of the padding row (last)."""
    constraints = [Constraints(c, EOS) for _, c, _ in SENTENCES]
    S, R = len(SENTENCES), len(SENTENCES) * W + 1
    state = DecoderRows(R - 1, T, 4, torch.device("cpu"))  # and its padding row, R - 1
    rows = torch.randperm(R - 1, generator=g).view(S, W)
    state.hyp.copy_(torch.randint(0, VOCAB, (R, T), generator=g))
    state.kv_slots.copy_(torch.randint(0, 1000, (R, T), generator=g, dtype=torch.int32))
    state.fin_hyp.copy_(torch.randint(0, VOCAB, (R, T), generator=g))
    state.met.copy_(torch.randint(0, 3, state.met.shape, generator=g, dtype=torch.int32))  # others' counts
    state.fin_score.fill_(float("-inf"))
    state.improvable.fill_(True)
    for s, (prefix, _, limit) in enumerate(SENTENCES):
        r = rows[s]
        state.hyp[r, : len(prefix)] = torch.tensor(prefix)
        state.kv_len[r] = len(prefix) - 1  # the search sees the length before the step's token
        state.limit[r] = limit
        state.score[r] = torch.tensor([0.0] + [float("-inf")] * (W - 1))
        met = constraints[s].start(prefix)
        state.met[r, : len(met)] = torch.tensor(met, dtype=torch.int32)
    state.kv_len[R - 1] = 0
    state.limit[R - 1] = T
    padding = torch.full((1, W), R - 1)
    tables = ConstraintTables.build(constraints + constraints[:1], torch.device("cpu"))
    return torch.cat([rows, padding]), state, tables


def scores(rows, tables, step, g):
    """Each row's K1 best log-probs, descending, their tokens and its constraint tokens' log-probs:
    on even steps from a grid (ties), `</s>` the best of many rows on odd ones; every third step
    some rows allow three tokens at most. The padding sentence's logits hold no number."""
    S, W = rows.shape
    N, J = S * W, tables.tokens.shape[1]
    if step % 2 == 0:
        logits = -torch.randint(0, 6, (N, VOCAB), generator=g).float() * 0.5
    else:
        logits = torch.randn(N, VOCAB, generator=g) * 2
        logits[torch.rand(N, generator=g) < 0.4, EOS] = 9.0
    if step % 3 == 2:
        few = torch.rand(N, generator=g) < 0.5
        logits[few] = logits[few].masked_fill(torch.rand(VOCAB, generator=g) < 0.9, float("-inf"))
    logits[-W:] = float("nan")
    log_probs = logits.log_softmax(-1).nan_to_num(nan=float("-inf"), neginf=float("-inf"))
    top_values, top_tokens = log_probs.sort(dim=-1, descending=True, stable=True)
    K1 = min(2 * W + J + 2, VOCAB)
    own = log_probs.gather(1, tables.tokens.repeat_interleave(W, dim=0))
    return top_values[:, :K1].contiguous(), top_tokens[:, :K1].contiguous(), own.contiguous()


def penalties(length_penalty):
    return (torch.arange(T + 1, dtype=torch.float64) ** length_penalty).float()


def advance_both(W, capacity, early_stopping, length_penalty, forced, seed):
    g = torch.Generator().manual_seed(seed)
    rows, ref, tables = start(W, g)
    mine = DecoderRows(ref.capacity, T, 4, torch.device("cpu"))
    for name in ref.tensors._fields:
        getattr(mine.tensors, name).copy_(getattr(ref.tensors, name))
    mine.met.copy_(ref.met)
    penalty = penalties(length_penalty)
    real = len(SENTENCES)
    history = []
    for step in range(T):
        live = ~ref.finished[rows[:real, 0]]
        if not live.any():
            break
        for s in range(real):  # the decoder's step feeds each live sentence's last token
            if live[s]:
                ref.kv_len[rows[s]] += 1
                mine.kv_len[rows[s]] += 1
        top_values, top_tokens, own_values = scores(rows, tables, step, g)
        width = T if step % 2 else int(ref.kv_len.max()) + 1
        options = dict(eos_id=EOS, forced_eos_id=forced, capacity=capacity, early_stopping=early_stopping,
                       blocked=BLOCKED, vocab=VOCAB, width=width)
        ref_done = constrained_advance_ref(top_values, top_tokens, own_values, rows, ref.met, tables,
                                           ref.tensors, penalty, **options)
        done = constrained_advance_triton(top_values, top_tokens, own_values, rows, mine.met, tables,
                                          mine.tensors, penalty, **options)
        assert torch.equal(done, ref_done), f"step {step}"
        for name in ref.tensors._fields:  # every row, the padding row's (written alike by every lane) too
            a, b = getattr(mine.tensors, name), getattr(ref.tensors, name)
            assert torch.equal(a, b), f"{name}, step {step}"
        assert torch.equal(mine.met, ref.met), f"met, step {step}"
        history.append((ref_done[:real].clone(), ref.fin_score[rows[:real, 0]].clone()))
    return history


# W, capacity, early_stopping (0: HF's False, 1: True, 2: "never"), length_penalty, forced_eos_id (-1: none)
CASES = [(4, 4, 0, 1.0, -1), (4, 2, 1, 0.5, -1), (3, 3, 2, 1.5, EOS), (3, 1, 1, 1.0, -1)]


@pytest.mark.parametrize("W, capacity, early_stopping, length_penalty, forced", CASES)
def test_matches_reference_step_by_step(W, capacity, early_stopping, length_penalty, forced):
    history = advance_both(W, capacity, early_stopping, length_penalty, forced, seed=W * 10 + capacity)
    assert any(done.any() for done, _ in history), "no sentence ended"
    assert any((fin > float("-inf")).any() for _, fin in history), "no hypothesis finished"


def launches():
    """The kernel's wrapper on every case above's first step, the last chained as on Hopper
    (hopper_build.py records the launches)."""
    for case, (W, capacity, early_stopping, length_penalty, forced) in enumerate(CASES):
        rows, state, tables = start(W, torch.Generator().manual_seed(0))
        top_values, top_tokens, own_values = scores(rows, tables, 0, torch.Generator().manual_seed(0))
        with chained(constrained_advance_triton) if case == len(CASES) - 1 else contextlib.nullcontext():
            constrained_advance_triton(top_values, top_tokens, own_values, rows, state.met, tables, state.tensors,
                                       penalties(length_penalty), eos_id=EOS, forced_eos_id=forced, capacity=capacity,
                                       early_stopping=early_stopping, blocked=BLOCKED, vocab=VOCAB, width=T)


def test_the_kernel_compiles_for_hopper():
    """What the interpreter accepts and a GPU's compiler refuses (a loop variable's type changing,
    say) turns the kernels off on the user's GPU: compiled here for sm_90, as the wrapper launches it."""
    build = compile_for_hopper("dragoman.kernels.constrained_advance", "test_constrained_advance:launches",
                               "_constrained_advance_kernel")
    assert build.returncode == 0, build.stdout + build.stderr[-3000:]
    assert build.stdout.strip() == f"compiled {len(CASES)}"


def launches_of_two_widths():
    """One sentence of a 6-token constraint, then one of an 11-token one: tables 8 and 16 tokens
    long (`table_width`), of the same distinct tokens, so of the same block sizes."""
    for constraint in ([5, 6, 7, 8, 9, 10], [5, 6, 7, 8, 9, 10, 5, 6, 7, 8, 9]):
        rows = torch.arange(4).view(1, 4)
        state = DecoderRows(4, T, 4, torch.device("cpu"))
        tables = ConstraintTables.build([Constraints([constraint], EOS)], torch.device("cpu"))
        top_values, top_tokens, own_values = scores(rows, tables, 0, torch.Generator().manual_seed(0))
        constrained_advance_triton(top_values, top_tokens, own_values, rows, state.met, tables, state.tensors,
                                   penalties(1.0), eos_id=EOS, forced_eos_id=-1, capacity=4, early_stopping=0,
                                   blocked=BLOCKED, vocab=VOCAB, width=T)


def test_groups_of_other_table_widths_share_one_compiled_kernel():
    """Triton compiles a variant per class of each integer argument (1, a multiple of 16, other):
    groups whose tables are 8 and 16 tokens long compiled twice, seconds in the middle of a document."""
    code = ("import importlib, hopper_build as h\n"
            "m = importlib.import_module('dragoman.kernels.constrained_advance')\n"
            "name = '_constrained_advance_kernel'\n"
            "launches = h.record(m, [name], 'test_constrained_advance:launches_of_two_widths')[name]\n"
            "print(len(launches), len({repr(h.signature_of(getattr(m, name), *launch)) for launch in launches}))\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parent, capture_output=True, text=True,
                         env=os.environ | {"TRITON_INTERPRET": "0"}, timeout=300)
    assert run.stdout.split() == ["2", "1"], run.stdout + run.stderr[-3000:]


def test_groups_too_wide_for_the_kernel_take_the_reference(monkeypatch):
    """A sentence of many constraints would make a program of more cells than compile in reasonable
    time (MAX_CELLS): its group's steps run the reference, on a GPU too."""
    from dragoman import kernels
    from dragoman.kernels import dispatch
    from dragoman.kernels.constrained_advance import fits_kernel

    # The module whose globals the function reads (the attribute kernels.constrained_advance is the function).
    module = importlib.import_module("dragoman.kernels.constrained_advance")

    def tables_of(constraints):
        return ConstraintTables.build([Constraints(constraints, EOS)], torch.device("cpu"))

    rows = torch.zeros(1, 4, dtype=torch.int64)
    few = tables_of([[5, 6], [7, 8, 9]])
    many = tables_of([[n, n + 1] for n in range(4, 132, 2)])  # 64 constraints, 128 distinct tokens
    assert fits_kernel(rows, torch.zeros(4, 2 * 4 + 5 + 2), few)
    assert not fits_kernel(rows, torch.zeros(4, 2 * 4 + 128 + 2), many)
    ran = []
    monkeypatch.setattr(dispatch, "_on_gpu", lambda tensor: True)
    monkeypatch.setattr(module, "constrained_advance_triton", lambda *args, **kwargs: ran.append("kernel"))
    monkeypatch.setattr(module, "constrained_advance_ref", lambda *args, **kwargs: ran.append("reference"))
    for tables in (few, many):
        J = tables.tokens.shape[1]
        kernels.constrained_advance(torch.zeros(4, 2 * 4 + J + 2), None, None, rows, None, tables, None, None,
                                    eos_id=EOS, forced_eos_id=-1, capacity=4, early_stopping=0, blocked=BLOCKED,
                                    vocab=VOCAB, width=T)
    assert ran == ["kernel", "reference"]
