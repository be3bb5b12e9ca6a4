"""Lexically constrained beam search for many sentences at once, on the device.

The vectorised dynamic beam allocation of Hu et al. (2019): engine/constraints.py's
`ConstrainedBeamSearch` (the per-sentence reference, which tests/engine/test_constrained_search.py
holds this to step by step) with its state in tensors:

- `DecoderRows.met` (rows, MAX_CONSTRAINTS) int32: per row and constraint of its sentence, how many
  of the constraint's tokens the row's hypothesis meets (its length once met); a row's bank is the
  row sum. Set from the decoder prefix at admission.
- `ConstraintTables`, per sentence of a group (S), padded to the group's widest (`table_width`:
  rounded up to a power of two): the constraints' lengths (S, C), their tokens (S, C, L), the
  sentence's distinct constraint tokens (S, J) and the
  automata as one table (S, C, L, J): the met count after token j at met count m, and the resets
  (S, C, L): after any token not in the list (0 for a plain constraint, the start of the current
  segment for a chain, the next position at a gap), the floors (S, C, L) that the room a
  row's constraints need counts from, and the tokens that stay at a gap (`Constraints.silent`, as
  many as the vocabulary has that show nothing) as R intervals of ids (S, R, 2): a few in a real
  vocabulary, so that no table grows with it. Built once per group composition from the sentences' `Constraints`.
- A sentence's W rows hold its hypotheses best first; rows with no hypothesis (fewer candidates
  than rows, and every row but the first at the first step) score -inf, so nothing they propose
  is a candidate. Finished hypotheses sit in `fin_*` at `rows[i]`, the i-th best (engine/rows.py).

`constrained_step` has `batched_search.beam_step`'s contract and one more argument, the tables.
Each step reads the logits once (`kernels.logsoftmax_topk`: each row's best log-probs, beside its
constraint tokens'; only those and `</s>` are scored otherwise than plain beam search scores them,
so no full-vocabulary copy is made), then `kernels.constrained_advance` does the rest in one
launch: the tokens after which the constraints no longer fit banned, the candidates (the top 2W
over a sentence's rows, then every row's best token and its constraints' next tokens), finished
hypotheses among the complete candidates, and the running ones picked round-robin over the
banks, highest first. No host syncs, except where the score processors need whole histories
(repetition penalty, n-gram bans, forced `</s>`; those steps process full float32 scores), as in
batched_search; tables built when a group changes are queued through pinned memory, in one copy
(`device.tensors_to_device`), without waiting. A step of a constrained group alone is captured
whole in a CUDA graph (engine/step_runner.py); beside other groups its search runs after the
decoder's graph.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F

from dragoman import kernels
from dragoman.engine.batched_search import _eos_from, _histories, _length_penalties
from dragoman.engine.constraints import Constraints, search_scores
from dragoman.engine.decoding import BLOCKED, NEG_INF, DecodingOptions, bans_only_eos
from dragoman.engine.device import tensors_to_device
from dragoman.engine.rows import DecoderRows


class ConstraintTables(kernels.ConstraintTensors):
    """A group's constraints on the device, sentence by sentence (see the module's docstring; the
    fields are kernels.ConstraintTensors'), built from the sentences' `Constraints`."""

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
        host = cls(*(torch.tensor(x, dtype=torch.int64) for x in (lengths, sequences, tokens, moves, resets, floors,
                                                                   silent)))
        return cls(*tensors_to_device(list(host.padded(*(table_width(n) for n in host.widths))), device))

    @property
    def widths(self) -> tuple[int, int, int, int]:
        """(C, L, J, R): constraints, their length, distinct tokens and silent intervals a sentence."""
        return (*self.moves.shape[1:], self.silent.shape[1])

    def select(self, index: torch.Tensor) -> "ConstraintTables":
        """The tables of the sentences at `index` (n,), in that order."""
        return ConstraintTables(*(x[index] for x in self))

    def padded(self, C: int, L: int, J: int, R: int) -> "ConstraintTables":
        """The same tables padded to C constraints of L tokens, J distinct tokens and R silent
        intervals a sentence (themselves where they are that wide)."""
        c, l, j, r = self.widths
        if (c, l, j, r) == (C, L, J, R):
            return self
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
        return ConstraintTables(*(torch.cat([x, y]) for x, y in zip(a, b)))


def table_width(n: int) -> int:
    """A table's dimension rounded up to a power of two, at least 4: a document's groups come in
    few shapes, so few CUDA graphs serve them, and a group that changes keeps its shape."""
    return 1 << max(2, (n - 1).bit_length())


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
    W, V = rows.shape[1], logits.shape[1]
    cur_len = state.kv_len[rows[:, 0]].long()  # (S,)
    greedy = options.num_beams == 1
    lp = options.length_penalty
    early = True if greedy else options.early_stopping
    early_code = 1 if early is True else 2 if early == "never" and lp > 0.0 else 0
    own_tokens = tables.tokens.repeat_interleave(W, dim=0)  # (N, J)
    # Enough of the best log-probs that 2W remain once the constraint tokens and `</s>` are taken out.
    J = own_tokens.shape[1]
    top_values, top_tokens, own_values = _log_probs(state, rows, logits, options, eos_id, lengths, cur_len,
                                                    own_tokens, 2 * W + J + 2)
    penalty = _length_penalties(lp, state.max_length + 1, rows.device)
    forced = -1 if options.forced_eos_id is None else options.forced_eos_id
    return kernels.constrained_advance(
        top_values.contiguous(), top_tokens.contiguous(), own_values.contiguous(), rows, state.met, tables,
        state.tensors, penalty, eos_id=eos_id, forced_eos_id=forced, capacity=options.num_beams,
        early_stopping=early_code, blocked=BLOCKED, vocab=V, width=width)
