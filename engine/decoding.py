"""Decoding with Hugging Face `generate` semantics: options, score processors, greedy and beam search.

The searches talk to the model through a narrow interface: each step they receive the scores of
their live rows and answer which rows continue with which token. Lengths follow HF for an
encoder-decoder: a hypothesis is the decoder input (`</s>`, the forced language code, then the
generated tokens), `max_length` counts all of it, and the length penalty divides by its length
minus the one-token decoder prompt.

`GreedySearch` and `BeamSearch` are the readable per-sentence reference: the engine runs the same
searches for many sentences at once on the device (engine/batched_search.py), and
tests/engine/test_batched_search.py holds the two to each other step by step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch  # imported where scores are processed: the options alone are read before torch is
    # needed (the window's settings as it opens; torch takes over a second to import)

NEG_INF = -math.inf
# HF's "impossible" score for beams that must not be chosen (finished, or not yet real).
BLOCKED = -1.0e9


# Bounds of the options: past them a search only overflows or allocates without end. A decoder
# length also has to fit the model's positions, which the generator checks per request.
MAX_LENGTH = 4096
MAX_BEAMS = 128
MAX_LENGTH_PENALTY = 10.0  # (length)**penalty stays within float32 for any length up to MAX_LENGTH
REPETITION_PENALTY_RANGE = (0.01, 100.0)


class OptionsError(ValueError):
    """A value that is out of range or of the wrong type: "{name} {problem}"."""

    def __init__(self, name: str, problem: str):
        super().__init__(f"{name} {problem}")
        self.name, self.problem = name, problem


def check_int(name: str, value, low: int, high: int) -> int:
    """`value` if it is an integer from `low` to `high` (a bool is not an integer here), else OptionsError."""
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise OptionsError(name, f"must be an integer from {low} to {high}, not {value!r}")
    return value


def check_number(name: str, value, low: float, high: float) -> float:
    """`value` as a float if it is a finite number from `low` to `high`, else OptionsError."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not low <= value <= high:
        raise OptionsError(name, f"must be a number from {low:g} to {high:g}, not {value!r}")
    return float(value)


@dataclass(frozen=True)
class DecodingOptions:
    """What a search does; every field is checked on creation (OptionsError naming the field)."""

    num_beams: int = 4
    length_penalty: float = 1.0
    early_stopping: bool | str = False  # True, False or "never", as in HF
    max_length: int = 200  # decoder length including `</s>` and the language code
    max_new_tokens: int | None = None  # when set, max_length = 1 + max_new_tokens (HF)
    min_length: int = 0
    min_new_tokens: int = 0
    no_repeat_ngram_size: int = 0
    repetition_penalty: float = 1.0
    forced_eos_id: int | None = None

    def __post_init__(self):
        # NaN fails every comparison, so the range checks refuse it along with the infinities.
        check_int("num_beams", self.num_beams, 1, MAX_BEAMS)
        check_number("length_penalty", self.length_penalty, -MAX_LENGTH_PENALTY, MAX_LENGTH_PENALTY)
        # 2: the start token and the language code
        check_int("max_length", self.max_length, 2, MAX_LENGTH)
        if self.max_new_tokens is not None:
            check_int("max_new_tokens", self.max_new_tokens, 1, MAX_LENGTH - 1)
        check_int("min_length", self.min_length, 0, MAX_LENGTH)
        check_int("min_new_tokens", self.min_new_tokens, 0, MAX_LENGTH)
        check_int("no_repeat_ngram_size", self.no_repeat_ngram_size, 0, MAX_LENGTH)
        check_number("repetition_penalty", self.repetition_penalty, *REPETITION_PENALTY_RANGE)
        if self.forced_eos_id is not None:
            check_int("forced_eos_id", self.forced_eos_id, 0, 2**31 - 1)
        if not (isinstance(self.early_stopping, bool) or self.early_stopping == "never"):
            raise OptionsError("early_stopping", f"must be true, false or 'never', not {self.early_stopping!r}")

    @property
    def length(self) -> int:
        """The effective max_length."""
        return 1 + self.max_new_tokens if self.max_new_tokens is not None else self.max_length

    def with_changes(self, **changes) -> "DecodingOptions":
        return replace(self, **changes)


def bans_only_eos(options: DecodingOptions) -> bool:
    """True when the processors can do no more than forbid `</s>` (min_length, min_new_tokens): then the
    top candidates of the raw scores, `</s>` dropped, are the top candidates of the processed ones."""
    return options.repetition_penalty == 1.0 and options.no_repeat_ngram_size == 0 and options.forced_eos_id is None


def eos_banned(history: list[int], options: DecodingOptions) -> bool:
    return len(history) < options.min_length or len(history) - 1 < options.min_new_tokens


def process_scores(scores: torch.Tensor, histories: list[list[int]], options: DecodingOptions, eos_id: int) -> torch.Tensor:
    """HF's logits processors, in HF's order, applied in place to float32 scores (R, V).

    `histories[r]` is row r's whole decoder input so far (start token and language code included,
    as HF's processors see it). Greedy passes raw logits here, beam search log-probabilities.
    """
    import torch

    if options.repetition_penalty != 1.0:
        width = max(len(h) for h in histories)
        # Pad each history with its own first token: a repeated index is penalised once all the same.
        seen = torch.tensor([h + h[:1] * (width - len(h)) for h in histories], device=scores.device)  # (R, width)
        picked = scores.gather(1, seen)
        picked = torch.where(picked < 0, picked * options.repetition_penalty, picked / options.repetition_penalty)
        scores.scatter_(1, seen, picked)
    n = options.no_repeat_ngram_size
    if n > 0:
        for row, history in enumerate(histories):
            banned = _banned_ngram_tokens(history, n)
            if banned:
                scores[row, banned] = NEG_INF
    for row, history in enumerate(histories):
        if eos_banned(history, options):
            scores[row, eos_id] = NEG_INF
        if options.forced_eos_id is not None and len(history) == options.length - 1:
            scores[row] = NEG_INF
            scores[row, options.forced_eos_id] = 0
    return scores


def _banned_ngram_tokens(history: list[int], n: int) -> list[int]:
    """Tokens that would repeat an n-gram already in `history` (HF's NoRepeatNGramLogitsProcessor)."""
    if len(history) + 1 < n:
        return []
    prefix = tuple(history[len(history) + 1 - n :])
    return [gram[-1] for gram in zip(*[history[i:] for i in range(n)]) if gram[:-1] == prefix]


@dataclass
class Beam:
    tokens: list[int]
    score: float  # sum of log-probabilities
    row: int = -1  # the row this beam occupies in the current step


class GreedySearch:
    """HF's greedy `_sample` for one sentence: the caller picks the argmax of the processed raw logits."""

    def __init__(self, prefix: list[int], options: DecodingOptions, eos_id: int):
        self.tokens = list(prefix)
        self.options = options
        self.eos_id = eos_id
        self.done = len(self.tokens) >= options.length

    @property
    def live(self) -> list[list[int]]:
        return [self.tokens]

    def best(self) -> list[int]:
        return self.tokens

    def advance(self, token: int) -> list[tuple[int, int]]:
        """The argmax of the processed logits -> [(parent row 0, token)], or [] when finished."""
        self.tokens.append(token)
        self.done = token == self.eos_id or len(self.tokens) >= self.options.length
        return [] if self.done else [(0, token)]


class BeamHypotheses:
    """What a beam search of one sentence holds: its live `beams` (each with `.tokens`), best first,
    and its `finished` hypotheses as (normalised score, tokens), best first."""

    options: DecodingOptions
    beams: list
    finished: list[tuple[float, list[int]]]
    cur_len: int  # the length of the live beams' tokens
    done: bool
    improvable: bool  # HF's is_early_stop_heuristic_unsatisfied

    @property
    def live(self) -> list[list[int]]:
        return [b.tokens for b in self.beams]

    def best(self) -> list[int]:
        """The best finished hypothesis, or while running the best live one."""
        if self.done and self.finished:
            return self.finished[0][1]
        return self.beams[0].tokens

    def alternatives(self, n: int) -> list[list[int]]:
        """Up to `n` finished hypotheses, best first: HF's `num_return_sequences=n`, which may not
        exceed num_beams."""
        check_int("alternatives", n, 1, self.options.num_beams)
        return [tokens for _, tokens in self.finished[:n]]

    def _settled(self, capacity: int, early_stopping) -> bool:
        """After a step: is the search done? HF's heuristic, once `capacity` hypotheses have finished:
        no live beam can still beat the worst of them (early_stopping False or "never"), or at once
        (True). Updates `improvable`."""
        lp = self.options.length_penalty
        best_length = self.options.length - 1 if early_stopping == "never" and lp > 0.0 else self.cur_len - 1
        best_possible = self.beams[0].score / (best_length**lp)
        worst_finished = self.finished[-1][0] if len(self.finished) == capacity else BLOCKED
        self.improvable = self.improvable and best_possible > worst_finished
        return not self.improvable or (len(self.finished) == capacity and early_stopping is True)


class BeamSearch(BeamHypotheses):
    """HF's vectorised `_beam_search`, for one sentence, written as plain bookkeeping.

    The first step after the forced language code has one live beam: HF's other initial beams
    carry a -1e9 score and never reach the top candidates while the vocabulary is larger than
    2 * num_beams, so they are never materialised here.
    """

    def __init__(self, prefix: list[int], options: DecodingOptions, eos_id: int):
        self.options = options
        self.eos_id = eos_id
        self.beams = [Beam(list(prefix), 0.0)]
        self.finished: list[tuple[float, list[int]]] = []  # (normalised score, tokens), best first
        self.improvable = True  # HF's is_early_stop_heuristic_unsatisfied
        self.cur_len = len(prefix)
        self.done = self.cur_len >= options.length

    def candidates_per_row(self) -> int:
        return 2 * self.options.num_beams

    def advance(self, top_scores: list[list[float]], top_tokens: list[list[int]]) -> list[tuple[int, int]]:
        """One step from each live row's top 2*num_beams of (processed log-prob + beam score).

        Returns the surviving beams as (parent row, token), or [] when the sentence is done.
        """
        k, num_beams, lp = 2 * self.options.num_beams, self.options.num_beams, self.options.length_penalty
        max_length, cur_len = self.options.length, self.cur_len
        pool = [
            (score, row, token)
            for row in range(len(self.beams))
            for score, token in zip(top_scores[row], top_tokens[row])
        ]
        pool.sort(key=lambda c: -c[0])  # stable: equal scores keep row order, as a flat topk would
        top = pool[:k]
        hits = [token == self.eos_id or cur_len + 1 >= max_length for _, _, token in top]

        # e. the running beams: best candidates that did not just finish
        order = sorted(range(len(top)), key=lambda i: -(top[i][0] + (BLOCKED if hits[i] else 0.0)))
        survivors = order[:num_beams]

        # f. finished hypotheses: only the top num_beams candidates may enter, scored with the length penalty
        full = len(self.finished) == num_beams
        if self.improvable and not (full and self.options.early_stopping is True):
            for i in range(min(num_beams, len(top))):
                if hits[i]:
                    score, row, token = top[i]
                    normalised = score / ((cur_len + 1 - 1) ** lp)
                    if normalised > BLOCKED:  # else HF's empty placeholders (-1e9) outrank it
                        self.finished.append((normalised, self.beams[row].tokens + [token]))
            self.finished.sort(key=lambda f: -f[0])
            del self.finished[num_beams:]

        new_beams = []
        for i in survivors:
            score, row, token = top[i]
            new_beams.append(Beam(self.beams[row].tokens + [token], score + (BLOCKED if hits[i] else 0.0), row))
        self.beams = new_beams
        self.cur_len = cur_len + 1

        # g. can anything still improve?
        self.done = self._settled(num_beams, self.options.early_stopping) or all(hits)
        if self.done:
            return []
        return [(b.row, b.tokens[-1]) for b in self.beams]
