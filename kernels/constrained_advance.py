"""The bookkeeping of one lexically constrained beam-search step, after the decoder's log-softmax +
top-k: the vectorised dynamic beam allocation of Hu et al. (2019) for S sentences of W rows each,
as one launch (one program per sentence) instead of a few hundred small kernels.

`constrained_advance(top_values, top_tokens, own_values, rows, met, tables, state, penalty, *,
eos_id, forced_eos_id, capacity, early_stopping, blocked, vocab, width) -> done`. `rows` (S, W)
holds each sentence's rows, its hypotheses best first (rows without one score -inf); `top_values`,
`top_tokens` (S * W, K1) each row's K1 >= 2W best processed log-probabilities, descending, and
their tokens; `own_values` (S * W, J) the processed log-probabilities of its sentence's constraint
tokens `tables.tokens` (S, J); `met` (R, >= C) int32 each row's met count of each constraint of its
sentence; `tables` (a ConstraintTensors) the sentences' constraint automata, padded to the widest:
C constraints of at most L tokens, J distinct tokens, R intervals of silent ids. The fields of
`state` (a RowState) and `met` are indexed by row id and updated in place. Meaning, for each
sentence (engine/constraints.py's ConstrainedBeamSearch is the same search one sentence at a time,
in Python):

1. Each row's scores where they count: log-probability + the row's score, for its K1 best tokens
   and its constraint tokens. `</s>` (and the forced end) is banned while constraints are unmet;
   a row whose constraints no longer fit in the room left (`needed` after any other token exceeds
   the positions before max_length, less one for a forced end) keeps only the constraint tokens
   after which they still fit. Each token counts once; the row's 2W best of these, best first.
2. Candidates: the sentence's 2W best over its rows (a stable sort), then each row's best token and
   its unmet constraints' next tokens (by row, then token), less repeats and those already there;
   all of them in a stable descending sort by score.
3. Each candidate's met counts after its token (`met_after`), its bank (their sum). The first
   `capacity` complete candidates (every constraint met) that end here enter the finished
   hypotheses as beam search's do (length penalty, HF's -1e9 placeholders, early stopping).
4. The running hypotheses: the candidates that do not end here, round-robin over the banks,
   highest bank first, best first within each; W of them, then sorted by score. With none (every
   score -inf) the sentence is done and its rows stay as they were, one position shorter.

All reads see the state as it was before the call. Only positions [0, n] of hyp, kv_slots and
fin_hyp are written, n < width. Arithmetic is float32 throughout (sums, IEEE divisions), and every
ranking is a stable sort, so the kernel and the reference agree bit for bit (but for -0.0, which
the kernel's keys make +0.0). Sentences never share rows, except padding ones made of one padding
row repeated: their program writes only that row, in an unspecified order.

The kernel ranks by kernels/logsoftmax_topk.py's int64 keys (value, then the lower column), as
kernels/beam_advance.py does, so that each pick of a selection is one max-reduction. It holds the
candidates in flat vectors and reloads what it needs (rows, met counts, tables) rather than
gathering across layouts; the automaton's moves are table lookups.
"""

from typing import NamedTuple

import torch

from dragoman.kernels._triton import chained_launch, launch_options, tl, triton, wait_for_inputs
from dragoman.kernels.beam_advance import merge_finished, still_improvable
from dragoman.kernels.dispatch import dispatch
from dragoman.kernels.logsoftmax_topk import EMPTY_KEY, _key_value_and_column, sort_key

NEG_INF = float("-inf")
_NEG_INF = tl.constexpr(NEG_INF)
# A gap of a chain where its token sequence has a token (engine/constraints.py).
GAP = -1
_GAP = tl.constexpr(GAP)
# More than any bank (a sentence's total constraint tokens): the round-robin's keys.
BANKS = 1 << 16
_BANKS = tl.constexpr(BANKS)
_LAST_KEY = tl.constexpr(2**40)  # above every round-robin key (rank * BANKS + bank)
_TAKEN = tl.constexpr(2**62)  # a picked round-robin key
COPY_TILE = 512  # as kernels/beam_advance.py
NUM_WARPS = 4
# A program holds each row's scores beside each constraint's met count: rows x (K1 + J) x C cells,
# as powers of two. Past this many, compiling takes minutes (a sentence of 64 constraints and 128
# distinct tokens: over 15 on a 2-core CPU) and registers spill: such groups take the reference.
MAX_CELLS = 16384


class ConstraintTensors(NamedTuple):
    """A group's constraints on the device, per sentence (S), padded to the group's widest
    (engine/constrained_search.py's ConstraintTables builds them)."""

    lengths: torch.Tensor  # (S, C) int64, 0 for padding (met from the start)
    sequences: torch.Tensor  # (S, C, L) int64, GAP at a chain's gap, padded with 0 (past a constraint's length)
    tokens: torch.Tensor  # (S, J) int64 distinct, padded with the first: a repeat gives the same answers
    moves: torch.Tensor  # (S, C, L, J) int64: met count after tokens[j] from met count m < lengths (0 past them)
    resets: torch.Tensor  # (S, C, L) int64: met count after any other token from m < lengths (0 past them)
    floors: torch.Tensor  # (S, C, L) int64: what a constraint keeps of m < lengths whatever comes (0 past them)
    silent: torch.Tensor  # (S, R, 2) int64: [first, last] id intervals of the tokens that stay at a gap; (1, 0) pads


# ---------------------------------------------------------------------------------------------
# The reference, in tensor operations.


def _silent(tables: ConstraintTensors, tokens: torch.Tensor) -> torch.Tensor:
    """Whether each token (S, X) is one of its sentence's silent ones -> (S, X) bool."""
    first, last = tables.silent[:, None, :, 0], tables.silent[:, None, :, 1]  # (S, 1, R)
    return ((tokens[:, :, None] >= first) & (tokens[:, :, None] <= last)).any(-1)


def _per_met(tables: ConstraintTensors, table: torch.Tensor, met: torch.Tensor) -> torch.Tensor:
    """`Constraints.reset` (table: resets) or `.floor` (floors) for many rows: met (S, X, C) -> (S, X, C)."""
    S, X, C = met.shape
    L = table.shape[2]
    index = torch.arange(C, device=met.device)[None, None, :] * L + met.clamp(0, L - 1)
    value = table.reshape(S, C * L).gather(1, index.view(S, X * C)).view(S, X, C)  # (S, X, C)
    lengths = tables.lengths[:, None, :]
    return torch.where(met >= lengths, lengths, value)


def _needed(tables: ConstraintTensors, met: torch.Tensor) -> torch.Tensor:
    """`Constraints.needed` for many rows: met (S, X, C) -> (S, X): every constraint's tokens, less
    the floors (kept for good), less the most met past its floor among the unmet ones."""
    floor = _per_met(tables, tables.floors, met)
    unmet = met < tables.lengths[:, None, :]
    return (tables.lengths.sum(-1)[:, None] - floor.sum(-1)
            - torch.where(unmet, met - floor, 0).amax(-1))


def met_after(tables: ConstraintTensors, met: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """`Constraints.after` for many (row, token) pairs: met (S, X, C) and tokens (S, X) -> (S, X, C)."""
    S, X, C = met.shape
    L, J = tables.moves.shape[2], tables.moves.shape[3]
    lengths = tables.lengths[:, None, :]  # (S, 1, C)
    match = tables.tokens[:, None, :] == tokens[:, :, None]  # (S, X, J)
    j = match.int().argmax(-1)  # (S, X), 0 where no match
    m = met.clamp(0, L - 1)  # rows of another sentence (the padding row) may hold any count
    index = (torch.arange(C, device=met.device)[None, None, :] * L + m) * J + j[:, :, None]  # (S, X, C)
    moved = tables.moves.view(S, C * L * J).gather(1, index.view(S, X * C)).view(S, X, C)  # (S, X, C)
    at_gap = tables.sequences.view(S, C * L).gather(1, (index // J).view(S, X * C)).view(S, X, C) == GAP  # (S, X, C)
    stay = at_gap & _silent(tables, tokens)[:, :, None]  # a token that shows nothing fills no gap
    moved = torch.where(match.any(-1)[:, :, None], moved, torch.where(stay, m, _per_met(tables, tables.resets, met)))
    return torch.where(met >= lengths, lengths, moved)


def _check(top_values, top_tokens, own_values, rows, met, tables, state, penalty, vocab, width):
    S, W = rows.shape
    C, L, J = tables.moves.shape[1:]
    assert top_values.shape == top_tokens.shape and top_values.shape[0] == S * W, "top_*: (S * W, K1)"
    assert 2 * W <= top_values.shape[1] <= vocab, "K1: at least 2W best tokens a row"
    assert own_values.shape == (S * W, J) and tables.tokens.shape == (S, J)
    assert tables.lengths.shape == (S, C) and tables.sequences.shape == (S, C, L) and met.shape[1] >= C
    assert top_values.dtype == own_values.dtype == state.score.dtype == penalty.dtype == torch.float32
    assert top_tokens.dtype == rows.dtype == torch.int64 and met.dtype == torch.int32
    assert all(t.dtype == torch.int64 for t in tables)
    assert C * L < BANKS, "the round-robin's keys hold every bank"
    assert width <= state.hyp.shape[1] and state.hyp.shape[1] < penalty.shape[0], "penalty: a value for every length"


def constrained_advance_ref(top_values, top_tokens, own_values, rows, met, tables, state, penalty, *, eos_id,
                            forced_eos_id, capacity, early_stopping, blocked, vocab, width):
    """See the module's docstring. forced_eos_id: -1 for none; capacity: the finished hypotheses
    kept (the beam count, <= W); early_stopping 0, 1 or 2 as kernels.beam_advance's. Returns done
    (S,) bool."""
    _check(top_values, top_tokens, own_values, rows, met, tables, state, penalty, vocab, width)
    S, W = rows.shape
    V = vocab
    device = rows.device
    flat = rows.reshape(-1)  # (N,), N = S * W
    lead = rows[:, 0]  # (S,)
    cur_len = state.kv_len[lead].long()  # (S,)
    limit = state.limit[lead].long()  # (S,) each sentence's own max_length
    C = tables.lengths.shape[1]

    # Tokens after which the constraints no longer fit.
    row_met = met[flat, :C].long()  # (N, C)
    row_lengths = tables.lengths.repeat_interleave(W, dim=0)  # (N, C)
    last_free = limit - int(forced_eos_id >= 0)  # (S,)
    room = (last_free - (cur_len + 1)).clamp(min=0).repeat_interleave(W)  # (N,)
    reset = _per_met(tables, tables.resets, row_met.view(S, W, C))  # after a token of no constraint
    need = _needed(tables, reset).view(S * W)  # (N,)
    restricted = need > room  # (N,): only constraint tokens that keep them fitting
    own_tokens = tables.tokens.repeat_interleave(W, dim=0)  # (N, J)
    J = own_tokens.shape[1]
    after_token = met_after(tables, row_met.view(S, W, 1, C).expand(S, W, J, C).reshape(S, W * J, C),
                            tables.tokens.repeat(1, W))  # (S, W * J, C)
    keep = _needed(tables, after_token).view(S * W, J) <= room[:, None]  # (N, J)

    # Each row's scores where they count: its best tokens and its constraint tokens.
    per_row = 2 * W
    hypothesis = state.score[flat][:, None]  # (N, 1)
    top_values, own_values = top_values + hypothesis, own_values + hypothesis
    for end in {eos_id, forced_eos_id} - {-1}:
        top_values.masked_fill_((top_tokens == end) & (need > 0)[:, None], NEG_INF)
        own_values.masked_fill_((own_tokens == end) & (need > 0)[:, None], NEG_INF)
    own_values.masked_fill_(restricted[:, None] & ~keep, NEG_INF)
    # The tables pad a sentence's tokens with repeats of its first: each token counts once.
    earlier = torch.ones(J, J, dtype=torch.bool, device=device).tril(-1)  # [j, i]: i < j
    own_values.masked_fill_(((own_tokens[:, :, None] == own_tokens[:, None, :]) & earlier).any(-1), NEG_INF)
    is_own = (top_tokens[:, :, None] == own_tokens[:, None, :]).any(-1)  # (N, K1): scored in own_values
    top_values.masked_fill_(is_own | restricted[:, None], NEG_INF)
    ranked, order = torch.cat([top_values, own_values], dim=1).sort(dim=-1, descending=True, stable=True)
    top_values = ranked[:, :per_row].contiguous()  # (N, per_row), best first
    top_tokens = torch.cat([top_tokens, own_tokens], dim=1).gather(1, order[:, :per_row])

    # Candidates: the top 2W over the sentence's rows, in the order of a stable sort by score...
    k = 2 * W
    pool_values, order = top_values.view(S, W * per_row).sort(dim=-1, descending=True, stable=True)  # (S, W * per_row)
    pool_values, order = pool_values[:, :k], order[:, :k]  # (S, k)
    pool_beams = order // per_row
    pool_tokens = top_tokens.view(S, W * per_row).gather(1, order)  # (S, k)
    # ... then each row's best token and its constraints' next tokens, by row then token, without
    # those already there.
    next_tokens = tables.sequences.repeat_interleave(W, dim=0).gather(
        2, row_met.clamp(0, tables.sequences.shape[2] - 1)[:, :, None])[:, :, 0]  # (N, C)
    next_at = (own_tokens[:, None, :] == next_tokens[:, :, None]).int().argmax(-1)  # (N, C): its own_values column
    extra = torch.cat([top_tokens[:, :1], torch.where(row_met < row_lengths, next_tokens, -1)], dim=1)  # (N, E)
    extra_values = torch.cat([top_values[:, :1], own_values.gather(1, next_at)], dim=1)  # (N, E)
    extra, by_token = torch.where(extra < 0, V, extra).sort(dim=-1)  # (N, E) ascending, none (V) last
    extra_values = extra_values.gather(1, by_token)
    E = extra.shape[1]
    repeat = torch.cat([torch.zeros_like(extra[:, :1], dtype=torch.bool), extra[:, 1:] == extra[:, :-1]], dim=1)
    extra_beams = torch.arange(W, device=device).repeat_interleave(E).expand(S, W * E)  # (S, W * E)
    extra = extra.view(S, W * E)  # a sentence's extras, row by row
    same_token = extra[:, :, None] == pool_tokens[:, None, :]  # (S, W * E, k)
    in_pool = (same_token & (extra_beams[:, :, None] == pool_beams[:, None, :])).any(-1)
    absent = (extra == V) | repeat.view(S, W * E) | in_pool  # (S, W * E)
    extra_values = extra_values.view(S, W * E).masked_fill(absent, NEG_INF)  # (S, W * E)
    values, order = torch.cat([pool_values, extra_values], dim=1).sort(dim=-1, descending=True, stable=True)  # (S, M)
    beams = torch.cat([pool_beams, extra_beams], dim=1).gather(1, order)
    tokens = torch.cat([pool_tokens, extra.clamp(max=V - 1)], dim=1).gather(1, order)
    valid = values > NEG_INF  # a token no hypothesis may write (a processor's ban, the constraints') is none
    parents = rows.gather(1, beams)  # (S, M)
    parent_met = row_met.view(S, W, C).gather(1, beams[:, :, None].expand(-1, -1, C))  # (S, M, C)
    candidate_met = met_after(tables, parent_met, tokens)  # (S, M, C)
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
    allowed = state.improvable[lead] & ~(full & (early_stopping == 1))  # (S,)
    complete = valid & (bank == total[:, None])
    first_complete = complete & (complete.long().cumsum(1) <= capacity)
    normalised = values / penalty[cur_len][:, None]  # (S, M)
    enter = first_complete & hits & allowed[:, None] & (normalised > blocked)
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
    key = torch.where(eligible, rank * BANKS + (BANKS - 1 - bank), torch.iinfo(torch.int64).max)
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
    met[rows, :C] = torch.where(survivors[:, None, None], new_met, met[rows, :C])

    # Can anything still improve? (HF's heuristic, as in beam search)
    best_penalty = penalty[limit - 1] if early_stopping == 2 else penalty[cur_len]
    best_possible = new_score[:, 0] / best_penalty
    full = merged[:, -1] > NEG_INF
    worst = torch.where(full, merged[:, -1], torch.full_like(merged[:, -1], blocked))
    still = state.improvable[lead] & (best_possible > worst)
    state.improvable[lead] = torch.where(survivors, still, state.improvable[lead])
    done = ~still | (full & (early_stopping == 1)) | ~survivors
    state.finished[rows] = done[:, None].expand(S, W)
    # With nothing to continue the hypotheses stay as they were, one position shorter: only the
    # padding row, whose length is 0 and stays 0, meets the floor.
    state.kv_len[rows] = (cur_len - (~survivors).long()).clamp_(min=0).int()[:, None].expand(S, W)
    return done


# ---------------------------------------------------------------------------------------------
# The kernel.


@triton.jit
def _per_met_t(table_ptr, s, met, lengths, c, C, L):
    """`_per_met` for one sentence: met (X, BLOCK_C) int64, lengths (1, BLOCK_C) -> (X, BLOCK_C)."""
    m = tl.minimum(tl.maximum(met, 0), L - 1)
    value = tl.load(table_ptr + (s * C + c[None, :]) * L + m, mask=c[None, :] < C, other=0)
    return tl.where(met >= lengths, lengths, value)


@triton.jit
def _needed_t(floors_ptr, s, met, lengths, total, c, C, L):
    """`_needed` for one sentence: met (X, BLOCK_C) -> (X,)."""
    floor = _per_met_t(floors_ptr, s, met, lengths, c, C, L)
    unmet = met < lengths
    return total - tl.sum(floor, axis=1) - tl.max(tl.where(unmet, met - floor, 0), axis=1)


@triton.jit
def _constraint_column(tokens_ptr, s, token, J):
    """Each token's (X,) column among its sentence's constraint tokens, -1 where none."""
    j = tl.zeros_like(token) - 1
    for i in range(J):
        j = tl.where((j < 0) & (token == tl.load(tokens_ptr + s * J + i)), i, j)
    return j


@triton.jit
def _met_after_t(sequences_ptr, tokens_ptr, moves_ptr, resets_ptr, silent_ptr, s, met, token, lengths, c, C, L, J,
                 R):
    """`met_after` for one sentence: met (X, BLOCK_C) int64 and tokens (X,) -> (X, BLOCK_C)."""
    j = _constraint_column(tokens_ptr, s, token, J)
    m = tl.minimum(tl.maximum(met, 0), L - 1)
    at = (s * C + c[None, :]) * L + m  # (X, BLOCK_C): the (constraint, met count) entry
    columns = c[None, :] < C
    moved = tl.load(moves_ptr + at * J + tl.maximum(j, 0)[:, None], mask=columns, other=0)
    at_gap = tl.load(sequences_ptr + at, mask=columns, other=0) == _GAP
    silent = token != token  # all false
    for r in range(R):
        first = tl.load(silent_ptr + (s * R + r) * 2)
        last = tl.load(silent_ptr + (s * R + r) * 2 + 1)
        silent = silent | ((token >= first) & (token <= last))
    reset = _per_met_t(resets_ptr, s, met, lengths, c, C, L)
    moved = tl.where((j >= 0)[:, None], moved, tl.where(at_gap & silent[:, None], m, reset))
    return tl.where(met >= lengths, lengths, moved)


@triton.jit
def _candidate_token(top_tokens_ptr, tokens_ptr, s, w, q, K1, J, mask):
    """The token of column q of row w's scores: its q-th best (q < K1), else constraint token q - K1."""
    own = tl.load(tokens_ptr + s * J + tl.minimum(tl.maximum(q - K1, 0), J - 1), mask=mask, other=0)
    top = tl.load(top_tokens_ptr + w * K1 + q, mask=mask & (q < K1), other=0)
    return tl.where(q < K1, top, own)


# The tables' widths and K1 vary from group to group: specialised (a width of 8 and one of 16 are
# of two of Triton's integer classes), each combination compiled a variant of its own, seconds in
# the middle of a document. The block sizes, which do shape the program, stay constants.
@triton.jit(do_not_specialize=["C", "L", "J", "R", "K1"])
def _constrained_advance_kernel(
    top_values_ptr, top_tokens_ptr, own_values_ptr, rows_ptr, met_ptr,
    lengths_ptr, sequences_ptr, tokens_ptr, moves_ptr, resets_ptr, floors_ptr, silent_ptr,
    kv_len_ptr, score_ptr, hyp_ptr, kv_slots_ptr, fin_score_ptr, fin_hyp_ptr, fin_len_ptr,
    improvable_ptr, finished_ptr, limit_ptr, penalty_ptr, done_ptr,
    eos_id, forced_eos_id, reserved, blocked, vocab, C, L, J, R,
    stride_met, stride_hyp, stride_kv_slots, stride_fin_hyp,
    K1, W: tl.constexpr, CAPACITY: tl.constexpr, EARLY_STOPPING: tl.constexpr,
    BLOCK_W: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_P: tl.constexpr,
    BLOCK_K: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_M: tl.constexpr, IDENTS: tl.constexpr,
    CHUNK: tl.constexpr, CHAINED: tl.constexpr,
):
    P: tl.constexpr = 2 * W  # a row's ranked scores, and the sentence's pool
    wait_for_inputs(CHAINED)  # everything read here may be what the kernel before wrote
    s = tl.program_id(0)
    E = 1 + C  # a row's extra candidates
    M = P + W * E  # the sentence's candidates
    lead = tl.load(rows_ptr + s * W)
    n = tl.load(kv_len_ptr + lead).to(tl.int64)
    limit = tl.load(limit_ptr + lead).to(tl.int64)
    room = tl.maximum(limit - reserved - (n + 1), 0)  # reserved: 1 for a forced end
    was_improvable = tl.load(improvable_ptr + lead) != 0
    c = tl.arange(0, BLOCK_C)
    lengths = tl.load(lengths_ptr + s * C + c, mask=c < C, other=0)[None, :]  # (1, BLOCK_C)
    total = tl.sum(lengths, axis=1)  # (1,)

    # 1. Each row's scores (flat x = w * BLOCK_Q + q: its K1 best tokens, then its J constraint tokens).
    x = tl.arange(0, BLOCK_W * BLOCK_Q)
    w = x // BLOCK_Q
    q = x % BLOCK_Q
    w_ok = w < W
    row = tl.load(rows_ptr + s * W + w, mask=w_ok, other=0)
    met = tl.load(met_ptr + row[:, None] * stride_met + c[None, :], mask=w_ok[:, None] & (c[None, :] < C),
                  other=0).to(tl.int64)  # (X, BLOCK_C)
    reset = _per_met_t(resets_ptr, s, met, lengths, c, C, L)
    need = _needed_t(floors_ptr, s, reset, lengths, total, c, C, L)  # after a token of no constraint
    restricted = need > room
    is_top = q < K1
    is_own = (q >= K1) & (q < K1 + J)
    token = _candidate_token(top_tokens_ptr, tokens_ptr, s, s * W + w, q, K1, J, w_ok & (q < K1 + J))
    j = tl.minimum(tl.maximum(q - K1, 0), J - 1)
    value = tl.where(is_top, tl.load(top_values_ptr + (s * W + w) * K1 + q, mask=w_ok & is_top, other=_NEG_INF),
                     tl.load(own_values_ptr + (s * W + w) * J + j, mask=w_ok & is_own, other=_NEG_INF))
    value = value + tl.load(score_ptr + row, mask=w_ok, other=0.0)
    value = tl.where(((token == eos_id) | (token == forced_eos_id)) & (need > 0), _NEG_INF, value)
    after = _met_after_t(sequences_ptr, tokens_ptr, moves_ptr, resets_ptr, silent_ptr, s, met, token, lengths, c,
                         C, L, J, R)
    keep = _needed_t(floors_ptr, s, after, lengths, total, c, C, L) <= room
    scored_own = token != token  # a top token scored among the constraint tokens
    repeat = token != token  # a constraint token the tables repeat as padding
    for i in range(J):
        t = tl.load(tokens_ptr + s * J + i)
        scored_own = scored_own | (token == t)
        repeat = repeat | ((t == token) & (i < j))
    value = tl.where(is_top & (scored_own | restricted), _NEG_INF, value)
    value = tl.where(is_own & ((restricted & ~keep) | repeat), _NEG_INF, value)
    key = tl.where(w_ok & (q < K1 + J), sort_key(value, q), EMPTY_KEY)

    # The row's 2W best, best first: ranked (BLOCK_W, BLOCK_P) columns q and values.
    key = tl.reshape(key, [BLOCK_W, BLOCK_Q])  # flat x = w * BLOCK_Q + q -> (row, column)
    p = tl.arange(0, BLOCK_P)[None, :]
    ranked_q = tl.zeros([BLOCK_W, BLOCK_P], tl.int32)
    ranked_v = tl.full([BLOCK_W, BLOCK_P], _NEG_INF, tl.float32)
    for i in range(P):
        best = tl.max(key, axis=1)[:, None]
        key = tl.where(key == best, EMPTY_KEY, key)
        v, column = _key_value_and_column(best)
        ranked_q = tl.where(p == i, column, ranked_q)
        ranked_v = tl.where(p == i, v, ranked_v)

    # 2. The pool: the sentence's 2W best of them (flat ranked index w * BLOCK_P + p).
    b = tl.arange(0, BLOCK_W)  # rows, and the slots of the finished and running hypotheses
    kept = (b[:, None] < W) & (p < P)
    key = tl.where(kept, sort_key(ranked_v, b[:, None] * BLOCK_P + p), EMPTY_KEY)
    k = tl.arange(0, BLOCK_K)
    pool_at = tl.zeros([BLOCK_K], tl.int32)
    pool_v = tl.full([BLOCK_K], _NEG_INF, tl.float32)
    for i in range(P):
        best = tl.max(tl.max(key, axis=1), axis=0)
        key = tl.where(key == best, EMPTY_KEY, key)
        v, at = _key_value_and_column(best)
        pool_at = tl.where(k == i, at, pool_at)
        pool_v = tl.where(k == i, v, pool_v)
    ranked_q = tl.reshape(ranked_q, [BLOCK_W * BLOCK_P])  # flat w * BLOCK_P + p, for gathers
    ranked_v = tl.reshape(ranked_v, [BLOCK_W * BLOCK_P])
    pool_at = tl.where(k < P, pool_at, 0)
    pool_beam = pool_at // BLOCK_P
    pool_token = _candidate_token(top_tokens_ptr, tokens_ptr, s, s * W + pool_beam, tl.gather(ranked_q, pool_at, 0),
                                  K1, J, k < P)

    # The extras (flat y = w * BLOCK_E + e): row w's best token (e = 0) and constraint e - 1's next.
    y = tl.arange(0, BLOCK_W * BLOCK_E)
    yw = y // BLOCK_E
    e = y % BLOCK_E
    y_ok = (yw < W) & (e < E)
    first = yw * BLOCK_P
    first_token = _candidate_token(top_tokens_ptr, tokens_ptr, s, s * W + yw, tl.gather(ranked_q, first, 0), K1, J,
                                   y_ok)
    ce = e - 1
    constraint = y_ok & (e >= 1)
    y_row = tl.load(rows_ptr + s * W + yw, mask=yw < W, other=0)
    y_met = tl.load(met_ptr + y_row * stride_met + ce, mask=constraint, other=0).to(tl.int64)
    y_length = tl.load(lengths_ptr + s * C + ce, mask=constraint, other=0)
    next_token = tl.load(sequences_ptr + (s * C + ce) * L + tl.minimum(tl.maximum(y_met, 0), L - 1), mask=constraint,
                         other=-1)
    next_at = tl.maximum(_constraint_column(tokens_ptr, s, next_token, J), 0)
    own_value = tl.gather(value, tl.where(y_ok, yw * BLOCK_Q + K1 + next_at, 0), 0)
    extra = tl.where(e == 0, first_token, tl.where(y_met < y_length, next_token, -1))
    extra = tl.where((extra < 0) | ~y_ok, vocab, extra)
    extra_v = tl.where(e == 0, tl.gather(ranked_v, first, 0), own_value)
    # Its place by token in its row (a stable sort), and whether an earlier one has its token.
    order = tl.zeros([BLOCK_W * BLOCK_E], tl.int32)
    absent = (extra == vocab) | ~y_ok
    for f in range(E):
        other = tl.gather(extra, yw * BLOCK_E + f, 0)
        order += ((other < extra) | ((other == extra) & (f < e))).to(tl.int32)
        absent = absent | ((other == extra) & (f < e))
    for i in range(P):
        pool_token_i = tl.sum(tl.where(k == i, pool_token, 0))
        pool_beam_i = tl.sum(tl.where(k == i, pool_beam, 0))
        absent = absent | ((extra == pool_token_i) & (yw == pool_beam_i))
    extra_v = tl.where(absent, _NEG_INF, extra_v)

    # All candidates in a stable descending sort: the pool at places 0 .. 2W - 1, the extras after
    # it by row, then token. A key's column is place * IDENTS + ident: k for the pool, BLOCK_K + y.
    pool_key = tl.where(k < P, sort_key(pool_v, k * IDENTS + k), EMPTY_KEY)
    extra_key = tl.where(y_ok, sort_key(extra_v, (P + yw * E + order) * IDENTS + BLOCK_K + y), EMPTY_KEY)
    m = tl.arange(0, BLOCK_M)
    values = tl.full([BLOCK_M], _NEG_INF, tl.float32)
    ident = tl.zeros([BLOCK_M], tl.int32)
    for i in range(M):
        best = tl.maximum(tl.max(pool_key), tl.max(extra_key))
        pool_key = tl.where(pool_key == best, EMPTY_KEY, pool_key)
        extra_key = tl.where(extra_key == best, EMPTY_KEY, extra_key)
        v, column = _key_value_and_column(best)
        values = tl.where(m == i, v, values)
        ident = tl.where(m == i, column % IDENTS, ident)
    m_ok = m < M
    from_pool = ident < BLOCK_K
    pool_i = tl.where(from_pool & m_ok, ident, 0)
    extra_i = tl.where(from_pool | ~m_ok, 0, ident - BLOCK_K)
    beam = tl.where(from_pool, tl.gather(pool_beam, pool_i, 0), extra_i // BLOCK_E)
    tokens = tl.where(from_pool, tl.gather(pool_token, pool_i, 0), tl.minimum(tl.gather(extra, extra_i, 0), vocab - 1))
    valid = m_ok & (values > _NEG_INF)
    parent = tl.load(rows_ptr + s * W + beam, mask=m_ok, other=0)

    # 3. Each candidate's met counts and bank; the finished hypotheses.
    parent_met = tl.load(met_ptr + parent[:, None] * stride_met + c[None, :], mask=m_ok[:, None] & (c[None, :] < C),
                         other=0).to(tl.int64)
    bank = tl.sum(_met_after_t(sequences_ptr, tokens_ptr, moves_ptr, resets_ptr, silent_ptr, s, parent_met, tokens,
                               lengths, c, C, L, J, R), axis=1)  # (BLOCK_M,)
    hits = (tokens == eos_id) | (n + 1 >= limit)
    fin_row = tl.load(rows_ptr + s * W + b, mask=b < CAPACITY, other=0)
    old_scores = tl.load(fin_score_ptr + fin_row, mask=b < CAPACITY, other=_NEG_INF)
    old_lens = tl.load(fin_len_ptr + fin_row, mask=b < CAPACITY, other=0)
    allowed = was_improvable
    if EARLY_STOPPING == 1:
        allowed = allowed & ~(tl.load(fin_score_ptr + tl.load(rows_ptr + s * W + CAPACITY - 1)) > _NEG_INF)  # not full
    complete = valid & (bank == total)
    first_complete = complete & (tl.cumsum(complete.to(tl.int32), 0) <= CAPACITY)
    penalty = tl.load(penalty_ptr + n)
    normalised = tl.math.div_rn(values, tl.broadcast_to(penalty, [BLOCK_M]))
    enter = first_complete & hits & allowed & (normalised > blocked)
    normalised = tl.where(enter, normalised, _NEG_INF)
    merged, merged_len, merged_src, merged_token, from_old = merge_finished(
        old_scores, old_lens, fin_row, b < CAPACITY, normalised, m, m_ok, parent, tokens, n, b, CAPACITY)

    # 4. The running hypotheses: round-robin over the banks, highest first, then by score.
    eligible = valid & ~hits
    rank = tl.zeros([BLOCK_M], tl.int64)
    for f in range(M):
        bank_f = tl.sum(tl.where(m == f, bank, 0))
        eligible_f = tl.sum(tl.where(m == f, eligible.to(tl.int32), 0)) != 0
        rank += tl.where(eligible_f, (m > f) & (bank == bank_f), False).to(tl.int64)
    round_key = tl.where(eligible, rank * _BANKS + (_BANKS - 1 - bank), _LAST_KEY)
    round_key = tl.where(m_ok, round_key * BLOCK_M + m, _TAKEN)
    picked = tl.zeros([BLOCK_W], tl.int32)
    for i in range(W):
        low = tl.min(round_key)
        round_key = tl.where(round_key == low, _TAKEN, round_key)
        picked = tl.where(b == i, (low % BLOCK_M).to(tl.int32), picked)
    picked = tl.where(b < W, picked, 0)
    picked_v = tl.where(tl.gather(eligible.to(tl.int32), picked, 0) != 0, tl.gather(values, picked, 0), _NEG_INF)
    key = tl.where(b < W, sort_key(picked_v, b), EMPTY_KEY)
    by_score = tl.zeros([BLOCK_W], tl.int32)
    for i in range(W):
        best = tl.max(key)
        key = tl.where(key == best, EMPTY_KEY, key)
        by_score = tl.where(b == i, 0x7FFFFFFF - best.to(tl.int32), by_score)
    by_score = tl.where(b < W, by_score, 0)
    new_score = tl.gather(picked_v, by_score, 0)  # (BLOCK_W,)
    picked = tl.gather(picked, by_score, 0)
    survivors = tl.max(tl.where(b == 0, new_score, _NEG_INF)) > _NEG_INF
    survivor_src = tl.gather(parent, picked, 0)
    survivor_token = tl.gather(tokens, picked, 0)
    survivor_met = tl.load(met_ptr + survivor_src[:, None] * stride_met + c[None, :],
                           mask=(b[:, None] < W) & (c[None, :] < C), other=0).to(tl.int64)
    new_met = _met_after_t(sequences_ptr, tokens_ptr, moves_ptr, resets_ptr, silent_ptr, s, survivor_met,
                           survivor_token, lengths, c, C, L, J, R)

    # Can anything still improve? (HF's heuristic, as in beam search)
    still, full = still_improvable(new_score, merged, was_improvable, penalty_ptr, penalty, limit, blocked, b,
                                   CAPACITY, EARLY_STOPPING)
    done = ~still | ~survivors
    if EARLY_STOPPING == 1:
        done = done | full

    rows = tl.load(rows_ptr + s * W + b, mask=b < W, other=0)
    old_score = tl.load(score_ptr + rows, mask=b < W, other=0.0)
    old_met = tl.load(met_ptr + rows[:, None] * stride_met + c[None, :], mask=(b[:, None] < W) & (c[None, :] < C),
                      other=0)
    tl.debug_barrier()  # every thread's reads of the state above come before any write
    tl.store(score_ptr + rows, tl.where(survivors, new_score, old_score), mask=b < W)
    tl.store(met_ptr + rows[:, None] * stride_met + c[None, :], tl.where(survivors, new_met.to(tl.int32), old_met),
             mask=(b[:, None] < W) & (c[None, :] < C))
    tl.store(fin_score_ptr + fin_row, merged, mask=b < CAPACITY)
    tl.store(fin_len_ptr + fin_row, merged_len, mask=b < CAPACITY)
    tl.store(improvable_ptr + lead, tl.where(survivors, still, was_improvable).to(tl.uint8))
    tl.store(finished_ptr + rows, tl.broadcast_to(done.to(tl.uint8), [BLOCK_W]), mask=b < W)
    tl.store(done_ptr + s, done.to(tl.uint8))
    shorter = tl.maximum(n - (~survivors).to(tl.int64), 0).to(tl.int32)
    tl.store(kv_len_ptr + rows, tl.broadcast_to(shorter, [BLOCK_W]), mask=b < W)

    # The rows' hypotheses and slots (where the sentence goes on) and finished hypotheses, a chunk
    # of positions at a time.
    moves_on = tl.where(survivors, (b < W)[:, None], False)  # (a reduction's scalar, in `where` for the interpreter)
    finishes = (b < CAPACITY)[:, None]
    from_old = from_old[:, None]
    for start in range(0, n + 1, CHUNK):
        pos = start + tl.arange(0, CHUNK)[None, :]  # (1, CHUNK)
        upto = pos <= n
        at_n = pos == n
        h = tl.load(hyp_ptr + survivor_src[:, None] * stride_hyp + pos, mask=moves_on & upto)
        h = tl.where(at_n, survivor_token[:, None], h)
        slots = tl.load(kv_slots_ptr + survivor_src[:, None] * stride_kv_slots + pos, mask=moves_on & upto)
        f_old = tl.load(fin_hyp_ptr + merged_src[:, None] * stride_fin_hyp + pos, mask=finishes & upto & from_old)
        f_new = tl.load(hyp_ptr + merged_src[:, None] * stride_hyp + pos, mask=finishes & upto & ~from_old)
        fin = tl.where(from_old, f_old, tl.where(at_n, merged_token[:, None], f_new))
        tl.debug_barrier()  # the chunk's sources are all read before its rows are written
        tl.store(hyp_ptr + rows[:, None] * stride_hyp + pos, h, mask=moves_on & upto)
        tl.store(kv_slots_ptr + rows[:, None] * stride_kv_slots + pos, slots, mask=moves_on & upto)
        tl.store(fin_hyp_ptr + fin_row[:, None] * stride_fin_hyp + pos, fin, mask=finishes & upto)


def _blocks(K1: int, J: int, C: int) -> tuple[int, int]:
    """(BLOCK_Q, BLOCK_C): a row's scores and constraints as the kernel holds them. Floors keep a
    document's groups, of one to a few short constraints each, to one compiled variant or two
    (each a few seconds to compile on a first launch)."""
    return max(32, triton.next_power_of_2(K1 + J)), max(4, triton.next_power_of_2(C))


def fits_kernel(rows: torch.Tensor, top_values: torch.Tensor, tables: ConstraintTensors) -> bool:
    """Whether the kernel takes this group (`MAX_CELLS`), else its reference does."""
    W, (C, _, J) = rows.shape[1], tables.moves.shape[1:]
    BLOCK_Q, BLOCK_C = _blocks(top_values.shape[1], J, C)
    return triton.next_power_of_2(W) * BLOCK_Q * BLOCK_C <= MAX_CELLS


def constrained_advance_triton(top_values, top_tokens, own_values, rows, met, tables, state, penalty, *, eos_id,
                               forced_eos_id, capacity, early_stopping, blocked, vocab, width):
    """Triton version of `constrained_advance_ref`; same arguments, same result, same state afterwards."""
    _check(top_values, top_tokens, own_values, rows, met, tables, state, penalty, vocab, width)
    assert top_values.is_contiguous() and top_tokens.is_contiguous() and own_values.is_contiguous()
    assert rows.is_contiguous() and all(t.is_contiguous() for t in tables) and met.stride(1) == 1
    assert state.hyp.stride(1) == state.kv_slots.stride(1) == state.fin_hyp.stride(1) == 1
    S, W = rows.shape
    C, L, J = tables.moves.shape[1:]
    R = tables.silent.shape[1]
    K1 = top_values.shape[1]
    done = torch.empty(S, dtype=torch.bool, device=rows.device)
    if S == 0:
        return done
    BLOCK_W = triton.next_power_of_2(W)
    BLOCK_K = triton.next_power_of_2(2 * W)
    BLOCK_Q, BLOCK_C = _blocks(K1, J, C)
    BLOCK_E = 2 * BLOCK_C  # at least 1 + C
    chained = chained_launch(rows)
    _constrained_advance_kernel[(S,)](
        top_values, top_tokens, own_values, rows, met, *tables,
        state.kv_len, state.score, state.hyp, state.kv_slots, state.fin_score, state.fin_hyp, state.fin_len,
        state.improvable.view(torch.uint8), state.finished.view(torch.uint8), state.limit, penalty,
        done.view(torch.uint8), eos_id, forced_eos_id, int(forced_eos_id >= 0), blocked, vocab, C, L, J, R,
        met.stride(0), state.hyp.stride(0), state.kv_slots.stride(0), state.fin_hyp.stride(0), K1,
        W=W, CAPACITY=capacity, EARLY_STOPPING=early_stopping, BLOCK_W=BLOCK_W,
        BLOCK_Q=BLOCK_Q, BLOCK_C=BLOCK_C, BLOCK_P=BLOCK_K,
        BLOCK_K=BLOCK_K, BLOCK_E=BLOCK_E, BLOCK_M=triton.next_power_of_2(2 * W + W * BLOCK_E),
        IDENTS=triton.next_power_of_2(BLOCK_K + BLOCK_W * BLOCK_E), CHUNK=max(32, COPY_TILE // BLOCK_W),
        CHAINED=chained, num_warps=NUM_WARPS, **launch_options(chained),
    )
    return done


def constrained_advance(top_values, top_tokens, own_values, rows, met, tables, state, penalty, *, eos_id,
                        forced_eos_id, capacity, early_stopping, blocked, vocab, width):
    """One step of lexically constrained beam search (dynamic beam allocation) after the rows'
    log-softmax + top-k, for S sentences of W rows in rows (S, W) int64: top_values, top_tokens
    (S * W, K1 >= 2W) each row's best processed log-probs, descending, and their tokens; own_values
    (S * W, J) those of its sentence's constraint tokens tables.tokens; met (R, >= C) int32 the rows'
    met counts; tables a ConstraintTensors. Updates met and the rows' state (a RowState) as
    beam_advance does, the first `capacity` rows holding the finished hypotheses, and returns done
    (S,) bool. forced_eos_id: -1 for none; vocab: the logits' width. A group too wide for the kernel
    (many constraints, `fits_kernel`) runs the reference on a GPU too."""
    kernel = constrained_advance_triton if fits_kernel(rows, top_values, tables) else constrained_advance_ref
    return dispatch(kernel, constrained_advance_ref, rows, top_values, top_tokens, own_values,
                    rows, met, tables, state, penalty, eos_id=eos_id, forced_eos_id=forced_eos_id, capacity=capacity,
                    early_stopping=early_stopping, blocked=blocked, vocab=vocab, width=width)
