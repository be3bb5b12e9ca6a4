"""Lexically constrained beam search for many sentences at once, as tensor operations on the device.

The vectorised dynamic beam allocation of Hu et al. (2019): engine/constraints.py's
`ConstrainedBeamSearch` (the per-sentence reference, which tests/engine/test_constrained_search.py
holds this to step by step) with its state in tensors:

- `DecoderRows.met` (rows, MAX_CONSTRAINTS) int32: per row and constraint of its sentence, how many
  of the constraint's tokens the row's hypothesis meets (its length once met); a row's bank is the
  row sum. Set from the decoder prefix at admission.
- `ConstraintTables`, per sentence of a group (S), padded to the group's widest: the constraints'
  lengths (S, C), their tokens (S, C, L), the sentence's distinct constraint tokens (S, J) and the
  automata as one table (S, C, L, J): the met count after token j at met count m, and the resets
  (S, C, L): after any token not in the list (0 for a plain constraint, the start of the current
  segment for a chain, the next position at a gap), the floors (S, C, L) that `_needed`
  counts from, and the tokens that stay at a gap (`Constraints.silent`, as many as the vocabulary
  has that show nothing) as R intervals of ids (S, R, 2): a few in a real vocabulary, so that no
  table grows with it. Built once per group composition from the sentences' `Constraints`.
- A sentence's W rows hold its hypotheses best first; rows with no hypothesis (fewer candidates
  than rows, and every row but the first at the first step) score -inf, so nothing they propose
  is a candidate. Finished hypotheses sit in `fin_*` at `rows[i]`, the i-th best (engine/rows.py).

`constrained_step` has `batched_search.beam_step`'s contract and one more argument, the tables.
Each step: every row's scores where they can count (its best log-probs beside its constraint
tokens', from one read of the logits by `kernels.logsoftmax_topk`: only the constraint tokens and
`</s>` are scored otherwise than plain beam search scores them, so no full-vocabulary copy is
made), the tokens after which the constraints no longer fit banned, the candidates (the top 2W
over a sentence's rows, then every row's best token and its constraints' next tokens), finished
hypotheses among the complete candidates, and the running ones picked round-robin over the
banks, highest first. No host syncs, except where the score processors need whole histories
(repetition penalty, n-gram bans, forced `</s>`; those steps process full float32 scores), as in
batched_search; tables built when a group changes are queued through pinned memory
(`device.to_device`), without waiting. A step of a constrained group alone is captured whole in
a CUDA graph (engine/step_runner.py); beside other groups its search runs after the decoder's graph.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from dragoman import kernels
from dragoman.engine.batched_search import _eos_from, _histories, _length_penalties
from dragoman.engine.constraints import GAP, Constraints, search_scores
from dragoman.engine.decoding import BLOCKED, MAX_LENGTH, NEG_INF, DecodingOptions, bans_only_eos
from dragoman.engine.device import to_device
from dragoman.engine.rows import DecoderRows


@dataclass
class ConstraintTables:
    """A group's constraints on the device, sentence by sentence (see the module's docstring)."""

    lengths: torch.Tensor  # (S, C) int64, 0 for padding (met from the start)
    sequences: torch.Tensor  # (S, C, L) int64, padded with 0 (never read: past a constraint's length)
    tokens: torch.Tensor  # (S, J) int64 distinct, padded with the first: a repeat gives the same answers
    moves: torch.Tensor  # (S, C, L, J) int64: met count after tokens[j] from met count m < lengths (0 past them)
    resets: torch.Tensor  # (S, C, L) int64: met count after any other token from m < lengths (0 past them)
    floors: torch.Tensor  # (S, C, L) int64: what a constraint keeps of m < lengths whatever comes (0 past them)
    silent: torch.Tensor  # (S, R, 2) int64: [first, last] id intervals of the tokens that stay at a gap; (1, 0) pads

    @classmethod
    def build(cls, sentences: list[Constraints], device: torch.device) -> "ConstraintTables":
        C = max(len(c.sequences) for c in sentences)
        L = max(max(c.lengths) for c in sentences)
        J = max(len(c.tokens) for c in sentences)
        intervals = [_intervals(c.silent) for c in sentences]
        R = max(1, *(len(i) for i in intervals))
        lengths, sequences, tokens, moves, resets, floors = [], [], [], [], [], []
        silent = [list(i) + [(1, 0)] * (R - len(i)) for i in intervals]
        for c in sentences:
            own = sorted(c.tokens)
            lengths.append(list(c.lengths) + [0] * (C - len(c.lengths)))
            sequences.append([list(s) + [0] * (L - len(s)) for s in c.sequences] + [[0] * L] * (C - len(c.sequences)))
            tokens.append(own + own[:1] * (J - len(own)))
            moves.append([[[c.next_met(i, m, t) if m < n else 0 for t in own] + [0] * (J - len(own)) for m in range(L)]
                          for i, n in enumerate(c.lengths)] + [[[0] * J] * L] * (C - len(c.lengths)))
            resets.append([[c.reset(i, m) if m < n else 0 for m in range(L)] for i, n in enumerate(c.lengths)]
                          + [[0] * L] * (C - len(c.lengths)))
            floors.append([[c.floor(i, m) if m < n else 0 for m in range(L)] for i, n in enumerate(c.lengths)]
                          + [[0] * L] * (C - len(c.lengths)))
        return cls(*(to_device(x, device, torch.int64) for x in (lengths, sequences, tokens, moves, resets, floors,
                                                                  silent)))

    @property
    def parts(self) -> tuple[torch.Tensor, ...]:
        return self.lengths, self.sequences, self.tokens, self.moves, self.resets, self.floors, self.silent

    @property
    def widths(self) -> tuple[int, int, int, int]:
        """(C, L, J, R): constraints, their length, distinct tokens and silent intervals a sentence."""
        return (*self.moves.shape[1:], self.silent.shape[1])

    def select(self, index: torch.Tensor) -> "ConstraintTables":
        """The tables of the sentences at `index` (n,), in that order."""
        return ConstraintTables(*(x[index] for x in self.parts))

    def padded(self, C: int, L: int, J: int, R: int) -> "ConstraintTables":
        """The same tables padded to C constraints of L tokens, J distinct tokens and R silent
        intervals a sentence."""
        c, l, j, r = self.widths
        tokens = torch.cat([self.tokens, self.tokens[:, :1].expand(-1, J - j)], dim=1)
        empty = self.silent.new_tensor([1, 0]).expand(self.silent.shape[0], R - r, 2)  # (S, R - r, 2)
        return ConstraintTables(F.pad(self.lengths, (0, C - c)), F.pad(self.sequences, (0, L - l, 0, C - c)), tokens,
                                F.pad(self.moves, (0, J - j, 0, L - l, 0, C - c)), F.pad(self.resets, (0, L - l, 0, C - c)),
                                F.pad(self.floors, (0, L - l, 0, C - c)), torch.cat([self.silent, empty], dim=1))

    @staticmethod
    def joined(first: "ConstraintTables", second: "ConstraintTables") -> "ConstraintTables":
        """The sentences of `first`, then those of `second`."""
        C, L, J, R = (max(a, b) for a, b in zip(first.widths, second.widths))
        a, b = first.padded(C, L, J, R), second.padded(C, L, J, R)
        return ConstraintTables(*(torch.cat([x, y]) for x, y in zip(a.parts, b.parts)))


@functools.lru_cache(maxsize=8)
def _intervals(tokens: frozenset[int]) -> tuple[tuple[int, int], ...]:
    """A set of ids as the fewest [first, last] intervals: the same vocabulary-sized set comes with
    every tagged sentence, and holds few runs (the specials, the language codes, spare rows)."""
    runs: list[tuple[int, int]] = []
    for token in sorted(tokens):
        if runs and runs[-1][1] == token - 1:
            runs[-1] = (runs[-1][0], token)
        else:
            runs.append((token, token))
    return tuple(runs)


def _silent(tables: ConstraintTables, tokens: torch.Tensor) -> torch.Tensor:
    """Whether each token (S, X) is one of its sentence's silent ones -> (S, X) bool."""
    first, last = tables.silent[:, None, :, 0], tables.silent[:, None, :, 1]  # (S, 1, R)
    return ((tokens[:, :, None] >= first) & (tokens[:, :, None] <= last)).any(-1)


def _per_met(tables: ConstraintTables, table: torch.Tensor, met: torch.Tensor) -> torch.Tensor:
    """`Constraints.reset` (table: resets) or `.floor` (floors) for many rows: met (S, X, C) -> (S, X, C)."""
    S, X, C = met.shape
    L = table.shape[2]
    index = torch.arange(C, device=met.device)[None, None, :] * L + met.clamp(0, L - 1)
    value = table.reshape(S, C * L).gather(1, index.view(S, X * C)).view(S, X, C)
    lengths = tables.lengths[:, None, :]
    return torch.where(met >= lengths, lengths, value)


def _needed(tables: ConstraintTables, met: torch.Tensor) -> torch.Tensor:
    """`Constraints.needed` for many rows: met (S, X, C) -> (S, X): every constraint's tokens, less
    the floors (kept for good), less the most met past its floor among the unmet ones."""
    floor = _per_met(tables, tables.floors, met)
    unmet = met < tables.lengths[:, None, :]
    return (tables.lengths.sum(-1)[:, None] - floor.sum(-1)
            - torch.where(unmet, met - floor, 0).amax(-1))


def _after(tables: ConstraintTables, met: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """`Constraints.after` for many (row, token) pairs: met (S, X, C) and tokens (S, X) -> (S, X, C)."""
    S, X, C = met.shape
    L, J = tables.moves.shape[2], tables.moves.shape[3]
    lengths = tables.lengths[:, None, :]  # (S, 1, C)
    match = tables.tokens[:, None, :] == tokens[:, :, None]  # (S, X, J)
    j = match.int().argmax(-1)  # (S, X), 0 where no match
    m = met.clamp(0, L - 1)  # rows of another sentence (the padding row) may hold any count
    index = (torch.arange(C, device=met.device)[None, None, :] * L + m) * J + j[:, :, None]  # (S, X, C)
    moved = tables.moves.view(S, C * L * J).gather(1, index.view(S, X * C)).view(S, X, C)
    at_gap = tables.sequences.view(S, C * L).gather(1, (index // J).view(S, X * C)).view(S, X, C) == GAP
    stay = at_gap & _silent(tables, tokens)[:, :, None]  # a token that shows nothing fills no gap
    moved = torch.where(match.any(-1)[:, :, None], moved, torch.where(stay, m, _per_met(tables, tables.resets, met)))
    return torch.where(met >= lengths, lengths, moved)


def _log_probs(
    state: DecoderRows,
    rows: torch.Tensor,
    logits: torch.Tensor,
    options: DecodingOptions,
    eos_id: int,
    lengths: list[int] | None,
    cur_len: torch.Tensor,
    own_tokens: torch.Tensor,
    k: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The log-probabilities `constraints.search_scores` makes of the rows' logits (N, V): each row's
    k best (N, k), descending, with their tokens (N, k), and those of `own_tokens` (N, J). Where the
    options do no more than ban `</s>`, from one read of the logits (kernels.logsoftmax_topk) and no
    float32 copy of them; NaN and +inf count as -inf there, as in beam search."""
    W = rows.shape[1]
    k = min(k, logits.shape[1])
    if not bans_only_eos(options):
        log_probs = search_scores(logits, _histories(state, rows, lengths), options, eos_id)  # (N, V)
        log_probs = log_probs.nan_to_num_(nan=NEG_INF, posinf=NEG_INF, neginf=NEG_INF)
        values, tokens = log_probs.topk(k, dim=-1)
        return values, tokens, log_probs.gather(1, own_tokens)
    banned = (cur_len < _eos_from(options)).repeat_interleave(W)[:, None]  # (N, 1)
    greedy = options.num_beams == 1
    if greedy:  # greedy search normalises the processed logits: `</s>` banned first (the step's own buffer)
        logits[:, eos_id] = logits[:, eos_id].masked_fill(banned[:, 0], NEG_INF)
    values, tokens, lse = kernels.logsoftmax_topk(logits, k)  # (N, k), (N, k), (N,)
    own = logits.gather(1, own_tokens).float()  # (N, J)
    own = torch.where((own > NEG_INF) & (own < math.inf), own - lse[:, None], NEG_INF)
    if not greedy:  # beam search processes the log-probabilities
        values = values.masked_fill((tokens == eos_id) & banned, NEG_INF)
        own = own.masked_fill((own_tokens == eos_id) & banned, NEG_INF)
    return values, tokens, own


def constrained_step(
    state: DecoderRows,
    rows: torch.Tensor,
    logits: torch.Tensor,
    options: DecodingOptions,
    eos_id: int,
    width: int,
    lengths: list[int] | None,
    tables: ConstraintTables,
) -> torch.Tensor:
    """One step of ConstrainedBeamSearch for S sentences of W rows each: rows (S, W), logits
    (S * W, V). Updates the rows and returns done (S,) bool, on the device."""
    S, W = rows.shape
    V = logits.shape[1]
    device = rows.device
    flat = rows.reshape(-1)  # (N,), N = S * W
    lead = rows[:, 0]  # (S,)
    cur_len = state.kv_len[lead].long()  # (S,)
    limit = state.limit[lead].long()  # (S,) each sentence's own max_length
    greedy = options.num_beams == 1
    capacity = options.num_beams
    lp = options.length_penalty
    early = True if greedy else options.early_stopping
    early_code = 1 if early is True else 2 if early == "never" and lp > 0.0 else 0
    C = tables.lengths.shape[1]

    # Tokens after which the constraints no longer fit (`ConstrainedBeamSearch._allowed`).
    met = state.met[flat, :C].long()  # (N, C)
    row_lengths = tables.lengths.repeat_interleave(W, dim=0)  # (N, C)
    last_free = limit - int(options.forced_eos_id is not None)  # (S,)
    room = (last_free - (cur_len + 1)).clamp(min=0).repeat_interleave(W)  # (N,)
    reset = _per_met(tables, tables.resets, met.view(S, W, C))  # after a token of no constraint
    need = _needed(tables, reset).view(S * W)  # (N,)
    restricted = need > room  # (N,): only constraint tokens that keep them fitting
    own_tokens = tables.tokens.repeat_interleave(W, dim=0)  # (N, J)
    J = own_tokens.shape[1]
    after_token = _after(tables, met.view(S, W, 1, C).expand(S, W, J, C).reshape(S, W * J, C),
                         tables.tokens.repeat(1, W))  # (S, W * J, C)
    keep = _needed(tables, after_token).view(S * W, J) <= room[:, None]  # (N, J)

    # Each row's scores as `ConstrainedBeamSearch` ranks them (`constraints.search_scores` plus the
    # hypothesis's score, `</s>` banned while constraints are unmet, a restricted row's tokens all
    # banned but its kept constraint tokens), held only where they count: the row's best tokens
    # and its constraint tokens. Only the constraint tokens' scores differ from the log-probs'.
    per_row = min(2 * W, V)
    # Enough of the best log-probs that `per_row` remain once the constraint tokens and `</s>` are taken out.
    top_values, top_tokens, own_values = _log_probs(state, rows, logits, options, eos_id, lengths, cur_len,
                                                    own_tokens, per_row + J + 2)
    hypothesis = state.score[flat][:, None]  # (N, 1)
    top_values, own_values = top_values + hypothesis, own_values + hypothesis
    for end in {eos_id, options.forced_eos_id} - {None}:
        top_values.masked_fill_((top_tokens == end) & (need > 0)[:, None], NEG_INF)
        own_values.masked_fill_((own_tokens == end) & (need > 0)[:, None], NEG_INF)
    own_values.masked_fill_(restricted[:, None] & ~keep, NEG_INF)
    # The tables pad a sentence's tokens with repeats of its first: each token counts once.
    earlier = torch.ones(J, J, dtype=torch.bool, device=device).tril(-1)  # [j, i]: i < j
    own_values.masked_fill_(((own_tokens[:, :, None] == own_tokens[:, None, :]) & earlier).any(-1), NEG_INF)
    is_own = (top_tokens[:, :, None] == own_tokens[:, None, :]).any(-1)  # (N, K): scored in own_values
    top_values.masked_fill_(is_own | restricted[:, None], NEG_INF)
    ranked, order = torch.cat([top_values, own_values], dim=1).sort(dim=-1, descending=True, stable=True)
    top_values = ranked[:, :per_row].contiguous()  # (N, per_row), best first
    top_tokens = torch.cat([top_tokens, own_tokens], dim=1).gather(1, order[:, :per_row])

    # Candidates: the top 2W over the sentence's rows, in the order of a stable sort by score...
    k = 2 * W
    pool_values, order = top_values.view(S, W * per_row).sort(dim=-1, descending=True, stable=True)
    pool_values, order = pool_values[:, :k], order[:, :k]  # (S, k)
    pool_beams = order // per_row
    pool_tokens = top_tokens.view(S, W * per_row).gather(1, order)
    # ... then each row's best token and its constraints' next tokens, by row then token, without
    # those already there.
    next_tokens = tables.sequences.repeat_interleave(W, dim=0).gather(
        2, met.clamp(0, tables.sequences.shape[2] - 1)[:, :, None])[:, :, 0]  # (N, C)
    next_at = (own_tokens[:, None, :] == next_tokens[:, :, None]).int().argmax(-1)  # (N, C): its own_values column
    extra = torch.cat([top_tokens[:, :1], torch.where(met < row_lengths, next_tokens, -1)], dim=1)  # (N, E), -1: none
    extra_values = torch.cat([top_values[:, :1], own_values.gather(1, next_at)], dim=1)  # (N, E)
    extra, by_token = torch.where(extra < 0, V, extra).sort(dim=-1)  # (N, E) ascending, none (V) last
    extra_values = extra_values.gather(1, by_token)
    E = extra.shape[1]
    repeat = torch.cat([torch.zeros_like(extra[:, :1], dtype=torch.bool), extra[:, 1:] == extra[:, :-1]], dim=1)
    extra_beams = torch.arange(W, device=device).repeat_interleave(E).expand(S, W * E)  # (S, W * E)
    extra = extra.view(S, W * E)
    same_token = extra[:, :, None] == pool_tokens[:, None, :]  # (S, W * E, k)
    in_pool = (same_token & (extra_beams[:, :, None] == pool_beams[:, None, :])).any(-1)
    absent = (extra == V) | repeat.view(S, W * E) | in_pool
    extra_values = extra_values.view(S, W * E).masked_fill(absent, NEG_INF)
    values, order = torch.cat([pool_values, extra_values], dim=1).sort(dim=-1, descending=True, stable=True)  # (S, M)
    beams = torch.cat([pool_beams, extra_beams], dim=1).gather(1, order)
    tokens = torch.cat([pool_tokens, extra.clamp(max=V - 1)], dim=1).gather(1, order)
    valid = values > NEG_INF  # a token no hypothesis may write (a processor's ban, the constraints') is none
    parents = rows.gather(1, beams)  # (S, M)
    parent_met = met.view(S, W, C).gather(1, beams[:, :, None].expand(-1, -1, C))  # (S, M, C)
    candidate_met = _after(tables, parent_met, tokens)  # (S, M, C)
    bank = candidate_met.sum(-1)  # (S, M)
    total = tables.lengths.sum(-1)  # (S,)
    hits = (tokens == eos_id) | (cur_len + 1 >= limit)[:, None]  # (S, M)

    past_n = (torch.arange(width, device=device) > cur_len[:, None])[:, None, :]  # (S, 1, width)

    def write(target: torch.Tensor, sentence_rows: torch.Tensor, new: torch.Tensor, where: torch.Tensor) -> None:
        """Positions [0, n] of the rows (S, X) of `target` := new (S, X, width) where `where` (S, 1, 1)."""
        old = target[:, :width][sentence_rows]
        target[:, :width][sentence_rows] = torch.where(past_n | ~where, old, new)

    def extended(parent_rows: torch.Tensor, new_tokens: torch.Tensor) -> torch.Tensor:
        """The parents' hypotheses (S, X, width) with the new tokens at position cur_len."""
        X = parent_rows.shape[1]
        at = cur_len[:, None, None].expand(S, X, 1)
        return state.hyp[:, :width][parent_rows].scatter_(2, at, new_tokens[:, :, None])

    # Finished hypotheses: only the first `capacity` complete candidates may enter.
    fin_rows = rows[:, :capacity]  # (S, capacity)
    old_scores = state.fin_score[fin_rows]  # (S, capacity), best first, -inf where empty
    full = old_scores[:, -1] > NEG_INF
    allowed = state.improvable[lead] & ~(full & (early_code == 1))  # (S,)
    complete = valid & (bank == total[:, None])
    first_complete = complete & (complete.long().cumsum(1) <= capacity)
    penalty = _length_penalties(lp, state.max_length + 1, device)
    normalised = values / penalty[cur_len][:, None]  # (S, M)
    enter = first_complete & hits & allowed[:, None] & (normalised > BLOCKED)
    merged, keep_fin = torch.cat([old_scores, normalised.masked_fill(~enter, NEG_INF)], dim=1).sort(
        dim=-1, descending=True, stable=True)
    merged, keep_fin = merged[:, :capacity], keep_fin[:, :capacity]  # (S, capacity)
    was_old = keep_fin < capacity
    entered = (keep_fin - capacity).clamp(min=0)
    new_fin = extended(parents.gather(1, entered), tokens.gather(1, entered))
    old_fin = state.fin_hyp[:, :width][fin_rows.gather(1, keep_fin.clamp(max=capacity - 1))]
    everywhere = torch.ones(S, 1, 1, dtype=torch.bool, device=device)
    write(state.fin_hyp, fin_rows, torch.where(was_old[:, :, None], old_fin, new_fin), everywhere)
    old_len = state.fin_len[fin_rows.gather(1, keep_fin.clamp(max=capacity - 1))]
    state.fin_len[fin_rows] = torch.where(was_old, old_len, (cur_len + 1).int()[:, None])
    state.fin_score[fin_rows] = merged

    # The running hypotheses: round-robin over the banks, highest first, best first within each.
    eligible = valid & ~hits  # (S, M)
    same_bank = (bank[:, :, None] == bank[:, None, :]) & eligible[:, None, :]  # (S, M, M): [i, j] j in i's bank
    before = torch.ones(values.shape[1], values.shape[1], dtype=torch.bool, device=device).tril(-1)  # j < i
    rank = (same_bank & before).sum(-1)  # (S, M)
    key = torch.where(eligible, rank * (MAX_LENGTH + 1) + (MAX_LENGTH - bank), torch.iinfo(torch.int64).max)
    picked = key.sort(dim=-1, stable=True).indices[:, :W]  # (S, W)
    picked_values = torch.where(eligible.gather(1, picked), values.gather(1, picked), NEG_INF)
    new_score, by_score = picked_values.sort(dim=-1, descending=True, stable=True)  # (S, W)
    picked = picked.gather(1, by_score)
    survivors = new_score[:, 0] > NEG_INF  # (S,) any
    survivor_parents = parents.gather(1, picked)  # (S, W)
    moves_on = survivors[:, None, None]
    write(state.kv_slots, rows, state.kv_slots[:, :width][survivor_parents], moves_on)
    write(state.hyp, rows, extended(survivor_parents, tokens.gather(1, picked)), moves_on)
    state.score[rows] = torch.where(survivors[:, None], new_score, state.score[rows])
    new_met = candidate_met.gather(1, picked[:, :, None].expand(-1, -1, C)).int()  # (S, W, C)
    state.met[rows, :C] = torch.where(survivors[:, None, None], new_met, state.met[rows, :C])

    # Can anything still improve? (HF's heuristic, as in beam search)
    best_penalty = penalty[limit - 1] if early_code == 2 else penalty[cur_len]
    best_possible = new_score[:, 0] / best_penalty
    full = merged[:, -1] > NEG_INF
    worst = torch.where(full, merged[:, -1], torch.full_like(merged[:, -1], BLOCKED))
    still = state.improvable[lead] & (best_possible > worst)
    state.improvable[lead] = torch.where(survivors, still, state.improvable[lead])
    done = ~still | (full & (early_code == 1)) | ~survivors
    state.finished[rows] = done[:, None].expand(S, W)
    # With nothing to continue the hypotheses stay as they were: the step report reads kv_len + 1 positions.
    # A real row holds its decoder prefix, so only the padding row, whose length is 0 and stays 0
    # (step_inputs feeds it position 0 afresh), meets the floor: a padding sentence of a graphed
    # step finds nothing to continue where its logits are NaN (it attends over unwritten slots).
    state.kv_len[rows] = (cur_len - (~survivors).long()).clamp_(min=0).int()[:, None].expand(S, W)
    return done
