"""beam_advance's kernel against its reference, bit for bit, over multi-step runs of random candidates:
equal candidate scores (values on a coarse grid, HF's -1e9 beams at the first step), `</s>` among
the candidates of most rows, banned `</s>`, hypotheses reaching max_length (each sentence its own),
rows in no particular order, and a padding sentence made of the padding row."""

import contextlib

import pytest
import torch

pytest.importorskip("triton")

from dragoman.kernels.beam_advance import beam_advance_ref, beam_advance_triton  # noqa: E402
from hopper_build import chained, compile_for_hopper  # noqa: E402
from row_states import row_state  # noqa: E402

# numpy's x / 0 under the interpreter: the padding sentence's length is 0, and 0 ** length_penalty may be 0.
pytestmark = pytest.mark.filterwarnings("ignore:divide by zero encountered in divide:RuntimeWarning",
                                        "ignore:invalid value encountered in divide:RuntimeWarning")

EOS, T, BLOCKED = 2, 12, -1.0e9
PREFIX_LENGTHS = [2, 3, 4]  # the real sentences' hypothesis lengths at the first step
MAX_LENGTHS = [10, 6, T]  # theirs: one stops early, one runs to the rows' capacity


def penalties(length_penalty):
    return (torch.arange(T + 1, dtype=torch.float64) ** length_penalty).float()  # (T + 1,), as the engine's


def start(B, g):
    """State for len(PREFIX_LENGTHS) sentences in shuffled rows plus the padding row (last), as HF
    starts: beam scores (0, -1e9, ...), no finished hypotheses; everything else random."""
    S, R = len(PREFIX_LENGTHS), len(PREFIX_LENGTHS) * B + 1
    rows = torch.randperm(R - 1, generator=g).view(S, B)  # (S, B)
    score = torch.full((R,), BLOCKED)
    score[rows[:, 0]] = 0.0
    state = dict(
        score=score,
        hyp=torch.randint(0, 50, (R, T), generator=g),
        kv_slots=torch.randint(0, 1000, (R, T), generator=g, dtype=torch.int32),
        fin_score=torch.full((R,), float("-inf")),
        fin_hyp=torch.randint(0, 50, (R, T), generator=g),
        fin_len=torch.randint(0, T, (R,), generator=g, dtype=torch.int32),
        improvable=torch.ones(R, dtype=torch.bool),
        finished=torch.zeros(R, dtype=torch.bool),
    )
    padding = torch.full((1, B), R - 1)  # a padding sentence: the padding row B times
    limit = torch.full((R,), T, dtype=torch.int32)
    limit[rows] = torch.tensor(MAX_LENGTHS, dtype=torch.int32)[:, None]  # every row of a sentence holds its own
    return torch.cat([rows, padding]), state, limit


def candidates(N, k, step, g):
    """Each row's k best (log-prob, token), descending: on even steps from a grid of halves, so that
    equal scores meet within and across beams; on odd steps continuous. `</s>` is among most rows',
    and every other step it is the best of half the rows (then up to every beam finishes at once);
    every third step half the rows allow fewer than k tokens (the rest -inf), down to `</s>` alone."""
    vocab = k + 6
    tokens = torch.stack([torch.randperm(vocab, generator=g)[:k] for _ in range(N)])  # (N, k)
    if step % 2 == 0:
        values = -torch.randint(0, 6, (N, k), generator=g).float() * 0.5
    else:
        values = -torch.rand(N, k, generator=g) * 6
    values = values.sort(dim=-1, descending=True).values
    if step % 2 == 1:
        first = torch.rand(N, generator=g) < 0.5  # (N,): rows whose best token is `</s>`
        tokens[first] = torch.where(tokens[first] == EOS, tokens[first, :1], tokens[first])
        tokens[first, 0] = EOS
    if step % 3 == 2:
        finite = torch.randint(1, 2 * k, (N, 1), generator=g)  # (N, 1)
        values = values.masked_fill(torch.arange(k) >= finite, float("-inf"))
    return values, tokens


def few_allowed(N, k, step, g):
    """Rows that allow one to three tokens, `</s>` first in half of them: once `</s>` is banned, the
    sentence has fewer finite candidates than beams, so -inf ones run on."""
    values, tokens = candidates(N, k, 1, g)  # `</s>` first in half the rows
    finite = torch.randint(1, 4, (N, 1), generator=g)  # (N, 1)
    return values.masked_fill(torch.arange(k) >= finite, float("-inf")), tokens


def bits(t):
    return t.view(torch.int32) if t.dtype == torch.float32 else t


def advance_both(B, early_stopping, length_penalty, make_candidates, banned_rate, seed):
    """Runs the kernel and the reference side by side from the same state until the longest
    hypothesis fills T, checking after each step that they agree; returns the real sentences' rows
    (S, B) and the reference's states and `done`s, step by step."""
    g = torch.Generator().manual_seed(seed)
    rows, ref_state, limit = start(B, g)
    state = {name: t.clone() for name, t in ref_state.items()}
    S = rows.shape[0]
    real = S - 1
    penalty = penalties(length_penalty)
    cur_len = torch.tensor(PREFIX_LENGTHS + [0])  # the padding row's kv_len is 0 at the search
    history = []
    step = 0
    while int(cur_len.max()) < T:
        values, tokens = make_candidates(S * B, 2 * B + 1, step, g)
        kv_len = torch.zeros(ref_state["score"].shape, dtype=torch.int32)
        kv_len[rows] = cur_len[:, None].int()  # every row of a sentence holds its length
        if step == 0:  # but for its beam 1, which fed position 0 for all in the first step
            kv_len[rows[:real, 1]] -= 1
        ref_kv_len = kv_len.clone()
        # `</s>` banned for no sentence, the shorter ones, or all
        eos_from = 0 if torch.rand(1, generator=g) >= banned_rate else int(cur_len[:real].median()) + 1 + T * (step % 2)
        width = T if step % 2 else int(cur_len.max()) + 1  # a captured step's width, or an eager one's
        options = dict(eos_id=EOS, early_stopping=early_stopping, blocked=BLOCKED, width=width)
        before = {name: ref_state[name].clone() for name in ("hyp", "kv_slots", "fin_hyp")}
        ref_done = beam_advance_ref(values, tokens, rows, eos_from, row_state(ref_state | dict(kv_len=ref_kv_len, limit=limit)),
                                    penalty, **options)
        done = beam_advance_triton(values, tokens, rows, eos_from, row_state(state | dict(kv_len=kv_len, limit=limit)),
                                   penalty, **options)
        assert torch.equal(kv_len, ref_kv_len)  # every row of a sentence holds its length again
        assert torch.equal(kv_len[rows[:real]], cur_len[:real, None].int().expand(real, B))
        for s, n in enumerate(cur_len[:real].tolist()):  # positions past the new token keep what they held
            for name, old in before.items():
                assert torch.equal(ref_state[name][rows[s], n + 1 :], old[rows[s], n + 1 :]), f"{name}, step {step}"
        assert done.dtype == torch.bool and done.shape == (S,)
        assert torch.equal(done[:real], ref_done[:real]), f"step {step}"
        assert torch.equal(ref_state["finished"][rows[:real]], ref_done[:real, None].expand(real, B))
        for name in state:  # all but the padding row, which the padding sentence writes in any order
            assert torch.equal(bits(state[name][:-1]), bits(ref_state[name][:-1])), f"{name}, step {step}"
        history.append(({name: t[:-1].clone() for name, t in ref_state.items()}, ref_done[:real]))
        cur_len = torch.where(torch.arange(S) < real, cur_len + 1, 0)
        step += 1
    return rows[:real], history


# early_stopping: 0 (HF's False), 1 (True), 2 ("never", with a positive length penalty)
@pytest.mark.parametrize("B, early_stopping, length_penalty", [
    (2, 1, -0.5), (2, 2, 2.0), (4, 0, 0.0), (4, 1, 1.0), (4, 2, 1.0), (5, 0, 2.0),
])
def test_matches_reference_step_by_step(B, early_stopping, length_penalty):
    rows, history = advance_both(B, early_stopping, length_penalty, candidates, 0.3, seed=B * 10 + early_stopping)
    full = [bool((state["fin_score"][rows[:, -1]] > float("-inf")).any()) for state, _ in history]
    assert any(full), "no sentence filled its finished hypotheses"
    assert any(done.any() for _, done in history) and not all(done.all() for _, done in history)


def test_each_sentence_stops_at_its_own_max_length():
    _, history = advance_both(3, 0, 1.0, candidates, 0.0, seed=5)
    for s, (prefix, limit) in enumerate(zip(PREFIX_LENGTHS, MAX_LENGTHS)):
        step = limit - 1 - prefix  # the step whose new token reaches max_length
        assert history[step][1][s], f"sentence {s} not done at its max_length {limit}"


@pytest.mark.parametrize("B, length_penalty", [(2, 1.0), (4, 0.0)])
def test_few_allowed_tokens(B, length_penalty):
    _, history = advance_both(B, 0, length_penalty, few_allowed, 0.7, seed=B)
    assert any(bool((state["score"] == float("-inf")).any()) for state, _ in history), "no -inf beam ran on"


def two_beams(beam_scores):
    """One sentence of two beams with these scores, in rows 1 and 0 (row 2 unused), with
    hypotheses of length 2."""
    return dict(score=torch.tensor(beam_scores[::-1] + [0.0]), hyp=torch.tensor([[0, 1, 0], [0, 3, 0], [0, 0, 0]]),
                kv_slots=torch.tensor([[10, 11, 0], [20, 21, 0], [0, 0, 0]], dtype=torch.int32),
                fin_score=torch.full((3,), float("-inf")), fin_hyp=torch.zeros(3, 3, dtype=torch.int64),
                fin_len=torch.zeros(3, dtype=torch.int32), improvable=torch.ones(3, dtype=torch.bool),
                finished=torch.zeros(3, dtype=torch.bool))


LENGTH_2 = torch.tensor([2, 2, 0], dtype=torch.int32)  # two_beams' kv_len: its rows hold hypotheses of length 2
LIMIT_10 = torch.full((3,), 10, dtype=torch.int32)  # two_beams' max_length: far off


@pytest.mark.parametrize("fn", [beam_advance_ref, beam_advance_triton])
def test_ties_go_to_the_lower_index(fn):
    # Two beams with equal scores and the same candidates: every candidate ties across the beams,
    # so the sentence's best come in pairs, beam 0's first; `</s>` (banned here) drops out.
    values = torch.tensor([[-1.0, -1.0, -2.0, -3.0, -4.0]]).repeat(2, 1)
    tokens = torch.tensor([[5, EOS, 7, 4, 9]]).repeat(2, 1)
    state = two_beams([0.0, 0.0])
    done = fn(values, tokens, torch.tensor([[1, 0]]), 3, row_state(state | dict(kv_len=LENGTH_2, limit=LIMIT_10)),
              penalties(1.0), eos_id=EOS, early_stopping=0, blocked=BLOCKED, width=3)
    assert not done.item()
    # Survivors: token 5 of beam 0 (row 1), then token 5 of beam 1 (row 0).
    assert state["hyp"][[1, 0]].tolist() == [[0, 3, 5], [0, 1, 5]]
    assert state["kv_slots"][[1, 0]].tolist() == [[20, 21, 0], [10, 11, 0]]
    assert state["score"][[1, 0]].tolist() == [-1.0, -1.0]


@pytest.mark.parametrize("fn", [beam_advance_ref, beam_advance_triton])
def test_banned_eos_keeps_its_place_among_minus_inf(fn):
    # Beam 0 allows no token: its candidates are all -inf, `</s>` (banned) third, and stay in column
    # order (a stable sort); beam 1 is HF's -1e9 placeholder. The survivors: beam 0's first two.
    values = torch.full((2, 5), float("-inf"))
    tokens = torch.tensor([[5, 6, EOS, 7, 8], [9, EOS, 10, 11, 12]])
    state = two_beams([0.0, BLOCKED])
    fn(values, tokens, torch.tensor([[1, 0]]), 3, row_state(state | dict(kv_len=LENGTH_2, limit=LIMIT_10)),
       penalties(1.0), eos_id=EOS, early_stopping=0, blocked=BLOCKED, width=3)
    assert state["hyp"][[1, 0]].tolist() == [[0, 3, 5], [0, 3, 6]]


@pytest.mark.parametrize("fn", [beam_advance_ref, beam_advance_triton])
def test_minus_inf_beam_ranks_its_candidates_as_sorted(fn):
    # Both beams at -inf: every candidate sums to -inf, so the sentence takes beam 0's in the order
    # of its sorted row, where the banned `</s>` (first column, now -inf) comes last.
    values = torch.tensor([[-1.0, -2.0, -3.0, -4.0, -5.0]]).repeat(2, 1)
    tokens = torch.tensor([[EOS, 5, 6, 7, 8], [9, 10, 11, 12, 13]])
    state = two_beams([float("-inf"), float("-inf")])
    fn(values, tokens, torch.tensor([[1, 0]]), 3, row_state(state | dict(kv_len=LENGTH_2, limit=LIMIT_10)),
       penalties(1.0), eos_id=EOS, early_stopping=0, blocked=BLOCKED, width=3)
    assert state["hyp"][[1, 0]].tolist() == [[0, 3, 5], [0, 3, 6]]


@pytest.mark.parametrize("fn", [beam_advance_ref, beam_advance_triton])
def test_max_length_ends_the_sentence(fn):
    # At max_length every candidate finishes: one finite candidate enters the finished hypotheses,
    # the -inf one cannot, and the sentence is done although the heuristic would go on. The
    # sentence's max_length is its first row's (row 1).
    values = torch.tensor([[-1.0] + [float("-inf")] * 4, [float("-inf")] * 5])
    tokens = torch.tensor([[5, 6, 7, 8, 9], [10, 11, 12, 13, 14]])
    state = two_beams([0.0, BLOCKED])
    limit = torch.tensor([10, 3, 10], dtype=torch.int32)
    done = fn(values, tokens, torch.tensor([[1, 0]]), 0, row_state(state | dict(kv_len=LENGTH_2, limit=limit)),
              penalties(1.0), eos_id=EOS, early_stopping=0, blocked=BLOCKED, width=3)
    assert done.tolist() == [True] and state["improvable"][1] and state["finished"][[1, 0]].all()
    assert state["fin_score"][[1, 0]].tolist() == [-0.5, float("-inf")]
    assert state["fin_hyp"][1].tolist() == [0, 3, 5] and state["fin_len"][1] == 3


def launches():
    """The kernel's wrapper on one step of each early-stopping mode, the last chained as on Hopper
    (hopper_build.py records the launches)."""
    for early_stopping in (0, 1, 2):
        g = torch.Generator().manual_seed(early_stopping)
        rows, state, limit = start(4, g)
        kv_len = torch.zeros(state["score"].shape, dtype=torch.int32)
        kv_len[rows] = 3
        values, tokens = candidates(rows.numel(), 9, 0, g)
        with chained(beam_advance_triton) if early_stopping == 2 else contextlib.nullcontext():
            beam_advance_triton(values, tokens, rows, 0, row_state(state | dict(kv_len=kv_len, limit=limit)),
                                penalties(1.0), eos_id=EOS, early_stopping=early_stopping, blocked=BLOCKED, width=T)


def test_the_kernel_compiles_for_hopper():
    """As tests/kernels/test_constrained_advance.py's: compiled for sm_90 as the wrapper launches it."""
    build = compile_for_hopper("dragoman.kernels.beam_advance", "test_beam_advance:launches", "_beam_advance_kernel")
    assert build.returncode == 0, build.stdout + build.stderr[-3000:]
    assert build.stdout.strip() == "compiled 3"
