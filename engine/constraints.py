"""Lexically constrained beam search: token sequences that must appear in the output.

A per-sentence reference in the style of engine/decoding.py, with dynamic beam allocation (Post &
Vilar 2018) and its state laid out as Hu et al. (2019)'s vectorised search keeps it, so that the
device search maps it onto tensors:

- Per hypothesis, per constraint: how many of the constraint's tokens are met, that is the length
  of the longest start of the constraint that ends the hypothesis (a small automaton per
  constraint, as in Knuth-Morris-Pratt: a constraint whose tokens repeat, or one that begins where
  another ends, is followed exactly), or the constraint's whole length once it has appeared, for
  good. A hypothesis's bank is the sum: how many constraint tokens it meets, 0 to `total`.
- A constraint given as a list of token sequences is a chain: its segments must appear in that
  order, anything between them; an empty segment is a gap, one token at least that is none of the
  chain's (a tag pair around some words), and a set of ids a gap that is none of those either
  (tokens that show nothing; a sentence's gaps share one such set, `silent`, the union of theirs,
  which is never part of the tables below: its size is the vocabulary's, not the sentence's).
  Its met count runs over all their tokens, end to end (a
  gap counts one): within a segment the segment's own automaton, offset by where the segment
  starts, and a token that moves nowhere falls back to that start (`reset`), never below: a
  finished segment stays finished. At a gap the chain's own tokens and the silent ones stay and
  any other moves on.
- Each step's candidates are HF's (the top 2 x width of beam score + log-prob over all rows) and,
  for every row, its best token and the next token of each constraint it has not met. The running
  beams are picked round-robin over the banks, the highest bank first (by a candidate's rank within
  its bank, then its bank), so that hypotheses meeting more constraints keep places beside
  better-scored ones meeting fewer, and a bank without candidates leaves its places to the others.
- A hypothesis ends (`</s>`, or max_length) only when it meets every constraint: a token is allowed
  only while what the constraints still need fits in the decoder positions left after it, so the
  beam always holds a hypothesis that can still finish. Finished hypotheses are chosen as HF
  chooses them, among the complete candidates only.
- Constraints are checked when the search starts: empty ones, ids that are not token ids, `</s>`
  and more than `MAX_CONSTRAINTS` are refused, and so are constraints that could not all fit before
  max_length (counted without overlaps, which the search may still use) and one that repeats an
  n-gram no_repeat_ngram_size forbids (a chain's, segment by segment). A plain constraint that
  another plain one holds (a duplicate, one that is the start of another) is met with it and is
  dropped; chains are all kept. The score processors could still ban, for
  every hypothesis, what the constraints need (an n-gram written before): then nothing finishes and
  `best()` is the best hypothesis left, without them.

On the device the met counts are a (rows, constraints) integer tensor, a bank its row sum, and each
automaton a table of (met count, token of the constraint) -> met count (any other token -> its
reset: 0 for a plain constraint).

Without constraints every candidate is in the one bank and each step is BeamSearch's, token for
token (and so HF's `generate`). Greedy (num_beams=1) with constraints keeps one hypothesis per bank,
up to `GREEDY_WIDTH` of them, and ends as soon as `</s>` is the best of the complete candidates;
without constraints that is greedy search itself.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from dragoman import kernels
from dragoman.engine.decoding import (
    BLOCKED, MAX_LENGTH, BeamHypotheses, DecodingOptions, OptionsError, check_int, process_scores,
)

MAX_CONSTRAINTS = 64
# A gap of a chain where its token sequence has a token: one token of none of the chain's (the
# constrained search's kernel reads it too).
GAP = kernels.GAP
# Rows a constrained greedy sentence runs at most: as many as a beam-8 search's.
GREEDY_WIDTH = 8
# A chain's segment: token ids that must appear in order, or a gap (empty, or a set of ids that show nothing).
Segment = tuple[int, ...] | frozenset[int]


class Constraints:
    """A sentence's constraints, checked, each compiled to its automaton over met counts."""

    def __init__(self, sequences: list, eos_id: int):
        if not isinstance(sequences, (list, tuple)) or len(sequences) > MAX_CONSTRAINTS:
            raise OptionsError("constraints", f"must be a list of at most {MAX_CONSTRAINTS} token sequences")
        checked: list[tuple[Segment, ...]] = []  # each constraint's segments; a plain one has one
        chains: list[bool] = []
        for number, sequence in enumerate(sequences, 1):
            chain = isinstance(sequence, (list, tuple)) and bool(sequence) and all(
                isinstance(s, (list, tuple, set, frozenset)) for s in sequence)
            segments = sequence if chain else [sequence]
            if chain and not any(isinstance(s, (list, tuple)) and s for s in segments):
                raise OptionsError("constraints", f"#{number} is a chain of gaps only: {sequence!r}")
            for segment in segments:
                gap = chain and (isinstance(segment, (set, frozenset)) or not segment)
                if not gap and (not isinstance(segment, (list, tuple)) or not segment):
                    raise OptionsError("constraints", f"#{number} must be a non-empty sequence of token ids"
                                                      f" (or of such sequences), not {sequence!r}")
                if gap:
                    _check_gap(frozenset(segment), eos_id)
                    continue
                for token in segment:
                    check_int(f"constraint #{number}'s token", token, 0, 2**31 - 1)
                    if token == eos_id:
                        raise OptionsError("constraints",
                                           f"#{number} holds </s> ({eos_id}), which would end the sentence")
            checked.append(tuple(frozenset(s) if isinstance(s, (set, frozenset)) else tuple(s) for s in segments))
            chains.append(chain)
        if sum(_width(s) for segments in checked for s in segments) > MAX_LENGTH:
            raise OptionsError("constraints", f"hold more than {MAX_LENGTH} tokens together")
        # A plain constraint met whenever another plain one is (held by it, or the same): dropped, the
        # first of equals kept. Chains are all kept: their segments' order is theirs alone. (A plain
        # constraint's one segment is token ids, never a gap.)
        plain = [(i, s[0]) for i, s in enumerate(checked) if not chains[i] and isinstance(s[0], tuple)]
        dropped = {i for i, s in plain
                   if any(_holds(other, s) and (len(other) > len(s) or (other == s and j < i))
                          for j, other in plain if j != i)}
        self.given = sequences  # as given: what a Request carries beside them
        self.segments = tuple(s for i, s in enumerate(checked) if i not in dropped)
        # a chain's segments end to end, a gap as one GAP
        self.sequences = tuple(sum((s if isinstance(s, tuple) and s else (GAP,) for s in segments), ())
                               for segments in self.segments)
        self.lengths = tuple(len(s) for s in self.sequences)
        self.total = sum(self.lengths)
        self.tokens = frozenset(t for segments in self.segments for s in segments if isinstance(s, tuple) for t in s)
        self.largest_token = max(self.tokens, default=-1)
        gap_sets = {id(s): s for segments in self.segments for s in segments if isinstance(s, frozenset) and s}
        self.silent: frozenset[int] = frozenset().union(*gap_sets.values()) if len(gap_sets) > 1 else next(
            iter(gap_sets.values()), frozenset())
        # _next[i][met]: {token: met after it} for the tokens that keep some of the segment constraint i
        # is in; any other token -> _reset[i][met], the start of that segment (0 for a plain
        # constraint). At a gap, the chain's own tokens stay (and `silent` ones: `next_met`) and any
        # other moves on. _floor[i][met]:
        # what constraint i keeps whatever comes (the start of the segment or gap met is in).
        self._next: list[list[dict[int, int]]] = []
        self._reset: list[list[int]] = []
        self._floor: list[list[int]] = []
        for segments in self.segments:
            own = {t for s in segments if isinstance(s, tuple) for t in s}
            moves, resets, floors, start = [], [], [], 0
            for segment in segments:
                if isinstance(segment, tuple) and segment:
                    moves += [{t: start + m for t, m in table.items()} for table in _automaton(segment)]
                    resets += [start] * len(segment)
                    floors += [start] * len(segment)
                else:  # a gap: the chain's own tokens stay, and so do `silent` ones (`next_met`)
                    moves.append(dict.fromkeys(own, start))
                    resets.append(start + 1)
                    floors.append(start)
                start += _width(segment)
            self._next.append(moves)
            self._reset.append(resets)
            self._floor.append(floors)

    def after(self, met: tuple[int, ...], token: int) -> tuple[int, ...]:
        return tuple(m if m == n else self.next_met(i, m, token) for i, (m, n) in enumerate(zip(met, self.lengths)))

    def start(self, tokens: list[int]) -> tuple[int, ...]:
        met = (0,) * len(self.sequences)
        for token in tokens:
            met = self.after(met, token)
        return met

    def next_met(self, constraint: int, met: int, token: int) -> int:
        """Constraint `constraint`'s met count after `token`, from `met` below its length."""
        moved = self._next[constraint][met].get(token)
        if moved is not None:
            return moved
        if token in self.silent and self.sequences[constraint][met] == GAP:
            return met  # a token that shows nothing fills no gap
        return self._reset[constraint][met]

    def reset(self, constraint: int, met: int) -> int:
        """What constraint `constraint` keeps of `met` after a token of none of its moves: the start
        of the segment `met` is in (0 for a plain constraint), or its length once met."""
        return met if met == self.lengths[constraint] else self._reset[constraint][met]

    def floor(self, constraint: int, met: int) -> int:
        """What constraint `constraint` keeps of `met` whatever comes: the start of the segment (or
        gap) `met` is in, or its length once met."""
        return met if met == self.lengths[constraint] else self._floor[constraint][met]

    def needed(self, met: tuple[int, ...]) -> int:
        """Tokens that suffice to meet every constraint from here: the one with the most met past its
        floor continued, then each other unmet one written whole from its floor (a gap: one token
        of none of the chain's)."""
        floors = [self.floor(i, m) for i, m in enumerate(met)]
        return self.total - sum(floors) - max((m - f for m, f, n in zip(met, floors, self.lengths) if m < n),
                                              default=0)

    def advancing(self, met: tuple[int, ...]) -> set[int]:
        """The next token of each constraint not met yet (none at a gap)."""
        return {s[m] for s, m, n in zip(self.sequences, met, self.lengths) if m < n and s[m] != GAP}

    def appear_in(self, tokens: list[int]) -> bool:
        return all(_holds_in_order(tuple(tokens), segments, self.silent) for segments in self.segments)


def search_width(num_beams: int, total: int) -> int:
    """The hypotheses a search of `num_beams` keeps for constraints of `total` tokens: num_beams,
    or for greedy one per bank, at most GREEDY_WIDTH."""
    return min(total + 1, GREEDY_WIDTH) if num_beams == 1 else num_beams


def check_fit(constraints: Constraints, prefix: list[int], options: DecodingOptions, limit: int | None = None) -> tuple[int, ...]:
    """The met counts after `prefix`, once the constraints are found to fit: what they still need
    within the positions max_length (or the sentence's own `limit`) leaves after the prefix (and
    before a forced end), and no constraint repeating an n-gram that no_repeat_ngram_size forbids;
    else OptionsError in one line."""
    length = options.length if limit is None else limit
    met = constraints.start(prefix)
    room = length - (options.forced_eos_id is not None) - len(prefix)
    need = constraints.needed(met)
    if need > room:
        before_end = " and before the forced end" if options.forced_eos_id is not None else ""
        raise OptionsError("constraints", f"need up to {need} tokens, but max_length {length} leaves {room}"
                                          f" after the decoder prefix{before_end}")
    n = options.no_repeat_ngram_size
    for sequence in (s for segments in constraints.segments for s in segments if isinstance(s, tuple)):
        grams = [sequence[i : i + n] for i in range(len(sequence) - n + 1)] if n else []
        if len(set(grams)) < len(grams):
            raise OptionsError("constraints", f"{list(sequence)} repeats a {n}-gram, which no_repeat_ngram_size"
                                              f" {n} forbids")
    return met


@functools.lru_cache(maxsize=8)
def _check_gap(tokens: frozenset[int], eos_id: int) -> None:
    """Checks a gap's set of tokens that show nothing: the same vocabulary-sized set comes with
    every tagged sentence, so the first check stands for the others."""
    for token in tokens:
        check_int("a gap's token", token, 0, 2**31 - 1)
        if token == eos_id:
            raise OptionsError("constraints", f"a gap holds </s> ({eos_id}), which no chain may skip")


def _holds(tokens: tuple[int, ...], part: tuple[int, ...]) -> bool:
    n = len(part)
    return any(tokens[i : i + n] == part for i in range(len(tokens) - n + 1))


def _width(segment: Segment) -> int:
    """The positions of a chain's met count a segment takes: its tokens, or one for a gap."""
    return len(segment) if isinstance(segment, tuple) and segment else 1


def _holds_in_order(tokens: tuple[int, ...], segments: tuple[Segment, ...], silent: frozenset[int]) -> bool:
    """Whether the segments appear in `tokens` one after another, anything between them, a gap
    a token of none of them and not `silent` (each taken where it first ends, which leaves the most
    room to the next)."""
    own = {t for s in segments if isinstance(s, tuple) for t in s}
    at = 0
    for segment in segments:
        n = len(segment)
        if isinstance(segment, tuple) and n:
            end = next((i + n for i in range(at, len(tokens) - n + 1) if tokens[i : i + n] == segment), None)
        else:
            end = next((i + 1 for i in range(at, len(tokens)) if tokens[i] not in own and tokens[i] not in silent), None)
        if end is None:
            return False
        at = end
    return True


def _automaton(sequence: tuple[int, ...]) -> list[dict[int, int]]:
    """Per met count m < len: the tokens after which the longest start of `sequence` ending the
    hypothesis is not empty, and its length (Knuth-Morris-Pratt, built from the failure links)."""
    n = len(sequence)
    border = [0] * n  # border[j]: the longest proper start of sequence[:j+1] that also ends it
    k = 0
    for j in range(1, n):
        while k and sequence[j] != sequence[k]:
            k = border[k - 1]
        if sequence[j] == sequence[k]:
            k += 1
        border[j] = k
    table: list[dict[int, int]] = []
    for m in range(n):
        moves = dict(table[border[m - 1]]) if m else {}  # where a mismatch falls back to
        moves[sequence[m]] = m + 1
        table.append(moves)
    return table


def search_scores(
    logits: torch.Tensor, histories: list[list[int]], options: DecodingOptions, eos_id: int
) -> torch.Tensor:
    """The log-probabilities (R, V) a search step ranks, from the raw float32 logits of its live rows:
    HF's beam search processes log-probabilities, its greedy search raw logits (normalised here
    afterwards, which keeps each row's argmax, so that rows of different banks compare)."""
    if options.num_beams > 1:
        return process_scores(F.log_softmax(logits.float(), dim=-1), histories, options, eos_id)
    return F.log_softmax(process_scores(logits.float().clone(), histories, options, eos_id), dim=-1)


@dataclass
class Hypothesis:
    tokens: list[int]
    score: float  # sum of log-probabilities
    met: tuple[int, ...]  # per constraint, its tokens met
    row: int = -1  # the row this hypothesis occupies in the current step

    @property
    def bank(self) -> int:
        return sum(self.met)


@dataclass
class Candidate:
    score: float
    row: int
    token: int
    met: tuple[int, ...]
    bank: int
    hit: bool  # ends the hypothesis: `</s>` or max_length


class ConstrainedBeamSearch(BeamHypotheses):
    """Beam search for one sentence whose output must hold every one of `constraints` (token id
    sequences): BeamSearch's bookkeeping over banks. `advance` takes the live rows' processed
    log-probabilities (`search_scores`) and answers which rows continue with which token."""

    def __init__(self, prefix: list[int], options: DecodingOptions, eos_id: int, constraints: list[list[int]]):
        self.constraints = Constraints(constraints, eos_id)
        self.options = options
        self.eos_id = eos_id
        total = self.constraints.total
        self.greedy = options.num_beams == 1
        self.width = search_width(options.num_beams, total)
        # The positions constraint tokens may take: a forced last token takes the last one.
        self.last_free = options.length - (options.forced_eos_id is not None)
        met = check_fit(self.constraints, prefix, options)
        self.beams = [Hypothesis(list(prefix), 0.0, met)]
        self.finished: list[tuple[float, list[int]]] = []  # (normalised score, tokens), best first
        self.improvable = True  # HF's is_early_stop_heuristic_unsatisfied
        self.cur_len = len(prefix)
        self.done = self.cur_len >= options.length

    def _allowed(self, scores: torch.Tensor) -> None:
        """Sets to -inf, in place, each token after which the constraints no longer fit."""
        room = max(self.last_free - (self.cur_len + 1), 0)  # 0 at the forced token's own step
        cs = self.constraints
        for row, beam in enumerate(self.beams):
            reset = tuple(cs.reset(i, m) for i, m in enumerate(beam.met))  # after a token of no constraint
            if cs.needed(reset) > 0:
                scores[row, self.eos_id] = -torch.inf  # `</s>` leaves no room at all
                if self.options.forced_eos_id is not None:
                    scores[row, self.options.forced_eos_id] = -torch.inf
            if cs.needed(reset) > room:
                keep = [t for t in sorted(cs.tokens) if cs.needed(cs.after(beam.met, t)) <= room]
                kept = scores[row, keep].clone()
                scores[row] = -torch.inf
                scores[row, keep] = kept

    def advance(self, log_probs: torch.Tensor) -> list[tuple[int, int]]:
        """One step from the live rows' processed log-probabilities (R, V), R = len(self.beams).

        Returns the surviving hypotheses as (parent row, token), or [] when the sentence is done.
        """
        if self.constraints.largest_token >= log_probs.shape[1]:
            raise OptionsError("constraints", f"hold token {self.constraints.largest_token}, past the vocabulary"
                                              f" of {log_probs.shape[1]}")
        options, cs, width = self.options, self.constraints, self.width
        lp, max_length, cur_len = options.length_penalty, options.length, self.cur_len
        scores = log_probs.float() + torch.tensor([b.score for b in self.beams])[:, None]
        if cs.total:
            self._allowed(scores)

        # HF's candidates: the top 2 x width over all rows (a stable sort keeps row order on ties,
        # as a flat topk does), then each row's best token and its constraints' next tokens.
        k = 2 * width
        top_scores, top_tokens = scores.topk(min(k, scores.shape[1]), dim=-1)
        pool = [(s, r, t) for r in range(len(self.beams))
                for s, t in zip(top_scores[r].tolist(), top_tokens[r].tolist())]
        pool.sort(key=lambda c: -c[0])
        pool = pool[:k]
        if cs.total:
            seen = {(r, t) for _, r, t in pool}
            for r, beam in enumerate(self.beams):
                for t in sorted({int(top_tokens[r, 0])} | cs.advancing(beam.met)):
                    if (r, t) not in seen:
                        seen.add((r, t))
                        pool.append((float(scores[r, t]), r, t))
            pool.sort(key=lambda c: -c[0])
        candidates = []
        for s, r, t in pool:
            if s == -torch.inf:
                continue  # a token no hypothesis may write (a processor's ban, or the constraints')
            met = cs.after(self.beams[r].met, t)
            candidates.append(Candidate(s, r, t, met, sum(met), t == self.eos_id or cur_len + 1 >= max_length))

        # finished hypotheses: only the top num_beams complete candidates may enter (HF's top
        # num_beams candidates, when there are no constraints), scored with the length penalty
        capacity = options.num_beams
        early_stopping = True if self.greedy else options.early_stopping
        full = len(self.finished) == capacity
        if self.improvable and not (full and early_stopping is True):
            complete = [c for c in candidates if c.bank == cs.total][:capacity]
            for c in complete:
                if c.hit:
                    normalised = c.score / ((cur_len + 1 - 1) ** lp)
                    if normalised > BLOCKED:  # else HF's empty placeholders (-1e9) outrank it
                        self.finished.append((normalised, self.beams[c.row].tokens + [c.token]))
            self.finished.sort(key=lambda f: -f[0])
            del self.finished[capacity:]

        # the running hypotheses: round-robin over the banks, highest first, best first within each
        rank_in_bank: dict[int, int] = {}
        order: list[tuple] = []  # (rank in its bank, -bank, arrival, candidate)
        for c in candidates:
            if not c.hit:
                rank = rank_in_bank[c.bank] = rank_in_bank.get(c.bank, -1) + 1
                order.append((rank, -c.bank, len(order), c))
        order.sort(key=lambda o: o[:3])
        survivors = sorted((o[3] for o in order[:width]), key=lambda c: -c.score)
        if not survivors:
            # Nothing to continue: every candidate ended, or the score processors banned every token
            # the constraints need (then nothing finished, and best() is the best hypothesis left).
            self.done = True
            return []
        self.beams = [Hypothesis(self.beams[c.row].tokens + [c.token], c.score, c.met, c.row) for c in survivors]
        self.cur_len = cur_len + 1

        self.done = self._settled(capacity, early_stopping)  # can anything still improve?
        if self.done:
            return []
        return [(b.row, b.tokens[-1]) for b in self.beams]
