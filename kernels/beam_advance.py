"""The bookkeeping of one beam-search step, after the decoder's log-softmax + top-k: HF's vectorised
`_beam_search` step for S sentences of B beams each, as one launch (one program per sentence)
instead of ~50 small kernels.

`beam_advance(values, tokens, rows, eos_from, state, penalty, *, eos_id, early_stopping, blocked,
width) -> done`. K = 2B; `values`, `tokens` (S * B, K + 1) are each row's best log-probabilities,
descending, and their distinct tokens (logsoftmax_topk's output, or torch.topk's); the fields of
`state` (kernels.RowState: score, hyp, ...) are indexed by the row ids in `rows` (S, B) and updated
in place. Meaning, as a plain loop:

    for s in range(S):
        r = rows[s]                                      # the sentence's rows
        n = kv_len[r[0]]                                 # its hypotheses' length
        max_length = limit[r[0]]                         # its own (HF's max_length)
        banned = n < eos_from                            # `</s>` not allowed yet
        cands = []
        for b in range(B):                               # each row's K best, `</s>` dropped if banned
            row = [(-inf if banned and t == eos_id else v, t) for v, t in zip(values[s*B + b], tokens[s*B + b])]
            cands += [(v + score[r[b]], b, t) for v, t in best(row, K)]
        top = best(cands, K)                             # the sentence's K best: (value, beam, token)
        hit = [t == eos_id or n + 1 >= max_length for _, _, t in top]
        allowed = improvable[r[0]] and not (early_stopping == 1 and fin_score[r[B-1]] > -inf)
        new = [(v / penalty[n] if hit[i] and allowed and v / penalty[n] > blocked else -inf,
                hyp[r[b], :n] + [t], n + 1) for i, (v, b, t) in enumerate(top[:B])]
        old = [(fin_score[r[i]], fin_hyp[r[i]], fin_len[r[i]]) for i in range(B)]
        fin_score, fin_hyp, fin_len of rows r := best(old + new, B)             # finished, best first
        running = best([(v + blocked * hit[i], b, t) for i, (v, b, t) in enumerate(top)], B)
        score, hyp, kv_slots of rows r := (v, hyp[r[b], :n] + [t], kv_slots[r[b], :n+1]) for (v, b, t) in running
        best_length = max_length - 1 if early_stopping == 2 else n
        full = fin_score[r[B-1]] > -inf                  # after the update
        improvable[r[0]] &= running[0].v / penalty[best_length] > (fin_score[r[B-1]] if full else blocked)
        done[s] = not improvable[r[0]] or (full and early_stopping == 1) or all(hit)
        finished[r] := done[s]                           # its rows sit the next step out if done
        kv_len[r] := n                                   # a sentence's first step: one row fed position 0

where `best(items, m)` is the m largest by their first element, equal ones in list order (a stable
descending sort) — the tie rule of engine/decoding.py's reference search ("equal scores keep row
order"); -0.0 ties with +0.0. All reads see the state as it was before the call. Only positions
[0, n] of hyp, kv_slots and fin_hyp are written (in a row, later positions keep what they held:
nothing reads them before a later step writes them), and n < width must hold. `penalty` (T + 1,)
float32 holds n ** length_penalty computed in float64 and rounded, `blocked` is HF's -1e9
placeholder score, `early_stopping` is 0 (HF's False), 1 (True) or 2 ("never" with a positive
length penalty; "never" otherwise acts as False: pass 0). `limit` (R,) int32 holds each sentence's
max_length at its first row: sentences of one step may stop at different lengths. Arithmetic is
float32 throughout (sums, IEEE divisions), so the kernel and the reference agree bit for bit.
Values must not be NaN.

Sentences never share rows, except padding ones made of one padding row repeated: their program
writes only that row, in an unspecified order.

The kernel, one program per sentence, ranks by the int64 keys of kernels/logsoftmax_topk.py
((float bits as ordered int32) << 32 | (2**31 - 1 - index)): keys are unique, so each pick of a
selection is one max-reduction, the lower index winning ties. A row needs no sort: its values come
descending, so its stable order is its column order but for a banned `</s>`, which, now -inf,
moves behind the row's finite values; a candidate's key index is (beam * K + rank) * BLOCK_C +
column, the reference's flat index with the column along to read the candidate back. The
sentence's K best, the finished merge and the survivors are picked in registers; a barrier
separates every read of score, fin_score, fin_len and improvable from their writes. Then the rows'
hyp, kv_slots and fin_hyp are copied over positions [0, n] in chunks: a chunk's source rows are all
loaded, then a barrier, then the stores, since a row's new contents come from other rows of its
sentence.
"""

import torch

from dragoman.kernels._triton import chained_launch, launch_options, tl, triton, wait_for_inputs
from dragoman.kernels.dispatch import dispatch
from dragoman.kernels.logsoftmax_topk import EMPTY_KEY, sort_key

NEG_INF = float("-inf")
_NEG_INF = tl.constexpr(NEG_INF)  # the same, for the kernel
# Elements (beams x positions) of hyp, kv_slots and fin_hyp copied per iteration, and warps: as
# compiled for sm_90, no register spills up to B = 16; untuned. The copies cover positions [0, n]
# only: a captured step's `width` is the rows' whole capacity.
COPY_TILE = 512
NUM_WARPS = 4


@triton.jit
def merge_finished(old_scores, old_lens, old_rows, old_ok, normalised, new_index, new_ok, parents, tokens, n, slot,
                   SLOTS: tl.constexpr):
    """The SLOTS best finished hypotheses, best first: of the old ones (slot i holds the i-th,
    where old_ok) and of the candidates (new_index, where new_ok) with their `normalised` scores
    (-inf for those that do not enter), the old ones first on ties, then the lower index. Returns
    each slot's score, length, source row (fin_hyp's for an old one, the parent's hyp for a new
    one, which gains its token at position n), that token, and whether it is an old one."""
    old_key = tl.where(old_ok, sort_key(old_scores, slot), EMPTY_KEY)
    new_key = tl.where(new_ok, sort_key(normalised, SLOTS + new_index), EMPTY_KEY)
    source = tl.zeros_like(slot)
    for i in range(SLOTS):
        best = tl.maximum(tl.max(old_key), tl.max(new_key))
        old_key = tl.where(old_key == best, EMPTY_KEY, old_key)
        new_key = tl.where(new_key == best, EMPTY_KEY, new_key)
        source = tl.where(slot == i, 0x7FFFFFFF - best.to(tl.int32), source)
    from_old = source < SLOTS
    old, new = tl.where(from_old, source, 0), tl.where(from_old, 0, source - SLOTS)
    merged = tl.where(from_old, tl.gather(old_scores, old, 0), tl.gather(normalised, new, 0))
    merged_len = tl.where(from_old, tl.gather(old_lens, old, 0), (n + 1).to(tl.int32))
    merged_src = tl.where(from_old, tl.gather(old_rows, old, 0), tl.gather(parents, new, 0))
    return merged, merged_len, merged_src, tl.gather(tokens, new, 0), from_old


@triton.jit
def still_improvable(new_score, merged, was_improvable, penalty_ptr, penalty, max_length, blocked, slot,
                     SLOTS: tl.constexpr, EARLY_STOPPING: tl.constexpr):
    """HF's heuristic for early_stopping False / "never": whether the best running score (slot 0 of
    new_score), length-penalised, can still beat the worst finished one (slot SLOTS - 1 of merged,
    HF's -1e9 while they are not full); and whether they are full. `penalty` is penalty[n]."""
    if EARLY_STOPPING == 2:
        best_penalty = tl.load(penalty_ptr + max_length - 1)
    else:
        best_penalty = penalty
    best_possible = tl.math.div_rn(tl.max(tl.where(slot == 0, new_score, _NEG_INF)), best_penalty)
    worst = tl.max(tl.where(slot == SLOTS - 1, merged, _NEG_INF))
    full = worst > _NEG_INF
    return was_improvable & (best_possible > tl.where(full, worst, blocked)), full


@triton.jit
def _beam_advance_kernel(
    values_ptr, tokens_ptr, rows_ptr, kv_len_ptr, score_ptr, hyp_ptr, kv_slots_ptr,
    fin_score_ptr, fin_hyp_ptr, fin_len_ptr, improvable_ptr, finished_ptr, penalty_ptr, done_ptr,
    limit_ptr, eos_from, eos_id, blocked, width, stride_hyp, stride_kv_slots, stride_fin_hyp,
    B: tl.constexpr, BLOCK_B: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_K: tl.constexpr,
    EARLY_STOPPING: tl.constexpr, CHUNK: tl.constexpr, CHAINED: tl.constexpr,
):
    K: tl.constexpr = 2 * B
    wait_for_inputs(CHAINED)  # everything read here may be what the kernel before wrote
    s = tl.program_id(0)
    b = tl.arange(0, BLOCK_B)  # beams, and the B slots of the finished and running hypotheses
    c = tl.arange(0, BLOCK_C)  # a row's K + 1 candidates
    j = tl.arange(0, BLOCK_K)  # the sentence's K best candidates
    beam_ok = b < B
    cand_ok = j < K

    rows = tl.load(rows_ptr + s * B + b, mask=beam_ok, other=0)  # (BLOCK_B,) int64
    lead = tl.load(rows_ptr + s * B)
    n = tl.load(kv_len_ptr + lead)
    max_length = tl.load(limit_ptr + lead)
    banned = n < eos_from
    was_improvable = tl.load(improvable_ptr + lead) != 0
    penalty = tl.load(penalty_ptr + n)

    # Each row's K + 1 candidates, ranked as a stable descending sort ranks them. They come
    # descending, so only a banned `</s>`, now -inf, moves: behind the row's finite values. The
    # last in that order (that `</s>`, or the spare) drops out.
    offset = (s * B + b)[:, None] * (K + 1) + c[None, :]  # (BLOCK_B, BLOCK_C)
    ok = beam_ok[:, None] & (c[None, :] < K + 1)
    v = tl.load(values_ptr + offset, mask=ok, other=_NEG_INF)
    eos = ok & banned & (tl.load(tokens_ptr + offset, mask=ok, other=-1) == eos_id)  # one per row at most
    v = tl.where(eos, _NEG_INF, v)
    finite = ok & (v > _NEG_INF)
    eos_column = tl.min(tl.where(eos, c[None, :], BLOCK_C), axis=1)[:, None]  # BLOCK_C: none
    # `</s>` goes after the finite values and after the -inf ones in lower columns.
    eos_rank = tl.maximum(tl.sum(finite.to(tl.int32), axis=1)[:, None], eos_column)
    rank = tl.where(eos, eos_rank, c[None, :] - (finite & (c[None, :] > eos_column)).to(tl.int32))

    # The sentence's K best over its rows' K best (flat index beam * K + rank, as the reference's),
    # best first. Each key also carries its column, to read the candidate back.
    score = tl.load(score_ptr + rows, mask=beam_ok, other=0.0)  # (BLOCK_B,)
    flat = b[:, None] * K + rank
    key = tl.where(ok & (rank < K), sort_key(v + score[:, None], flat * BLOCK_C + c[None, :]), EMPTY_KEY)
    picked = tl.zeros([BLOCK_K], tl.int32)
    for i in range(K):
        best = tl.max(key)
        key = tl.where(key == best, EMPTY_KEY, key)  # keys are unique: removes exactly one
        picked = tl.where(j == i, 0x7FFFFFFF - best.to(tl.int32), picked)  # the key's low 32 bits
    beam = picked // BLOCK_C // K  # (BLOCK_K,)
    at = (s * B + beam) * (K + 1) + picked % BLOCK_C
    token = tl.load(tokens_ptr + at, mask=cand_ok, other=-1)  # (BLOCK_K,) int64
    top = tl.load(values_ptr + at, mask=cand_ok, other=_NEG_INF)
    top = tl.where(banned & (token == eos_id), _NEG_INF, top) + tl.gather(score, beam, 0)
    parent = tl.gather(rows, beam, 0)  # (BLOCK_K,) the row each candidate extends
    hits = cand_ok & ((token == eos_id) | (n + 1 >= max_length))  # finishes here
    all_hit = tl.min(tl.where(cand_ok, hits, 1).to(tl.int32)) != 0

    # Finished hypotheses: the B best of the old ones (slots 0..B-1) and of the top B candidates
    # that finish here (B + j), the old ones first on ties.
    old_scores = tl.load(fin_score_ptr + rows, mask=beam_ok, other=_NEG_INF)  # (BLOCK_B,)
    old_lens = tl.load(fin_len_ptr + rows, mask=beam_ok, other=0)
    allowed = was_improvable
    if EARLY_STOPPING == 1:
        allowed = allowed & ~(tl.load(fin_score_ptr + tl.load(rows_ptr + s * B + B - 1)) > _NEG_INF)  # not full
    normalised = tl.math.div_rn(top, tl.broadcast_to(penalty, [BLOCK_K]))
    enter = (j < B) & hits & allowed & (normalised > blocked)  # else HF's -1e9 placeholders outrank it
    normalised = tl.where(enter, normalised, _NEG_INF)
    merged, merged_len, merged_src, merged_token, from_old = merge_finished(
        old_scores, old_lens, rows, beam_ok, normalised, j, j < B, parent, token, n, b, B)

    # The running beams: the B best candidates, those that just finished pushed down by `blocked`.
    running = tl.where(hits, top + blocked, top)  # == top + hits * blocked, bit for bit
    key = tl.where(cand_ok, sort_key(running, j), EMPTY_KEY)
    survivor = tl.zeros([BLOCK_B], tl.int32)
    for i in range(B):
        best = tl.max(key)
        key = tl.where(key == best, EMPTY_KEY, key)
        survivor = tl.where(b == i, 0x7FFFFFFF - best.to(tl.int32), survivor)
    new_score = tl.gather(running, survivor, 0)  # (BLOCK_B,)
    survivor_src = tl.gather(parent, survivor, 0)
    survivor_token = tl.gather(token, survivor, 0)

    improvable, full = still_improvable(new_score, merged, was_improvable, penalty_ptr, penalty, max_length, blocked, b,
                                        B, EARLY_STOPPING)
    done = ~improvable | all_hit
    if EARLY_STOPPING == 1:
        done = done | full

    tl.debug_barrier()  # every thread's reads of the state above come before any write
    tl.store(score_ptr + rows, new_score, mask=beam_ok)
    tl.store(fin_score_ptr + rows, merged, mask=beam_ok)
    tl.store(fin_len_ptr + rows, merged_len, mask=beam_ok)
    tl.store(improvable_ptr + lead, improvable.to(tl.uint8))
    tl.store(finished_ptr + rows, tl.broadcast_to(done.to(tl.uint8), [BLOCK_B]), mask=beam_ok)
    tl.store(done_ptr + s, done.to(tl.uint8))
    tl.store(kv_len_ptr + rows, tl.broadcast_to(n, [BLOCK_B]), mask=beam_ok)

    # The rows' hypotheses, slots and finished hypotheses, a chunk of positions at a time.
    from_old = from_old[:, None]
    for start in range(0, n + 1, CHUNK):
        p = start + tl.arange(0, CHUNK)[None, :]  # (1, CHUNK)
        m = beam_ok[:, None] & (p <= n)
        at_n = p == n
        h = tl.load(hyp_ptr + survivor_src[:, None] * stride_hyp + p, mask=m)
        h = tl.where(at_n, survivor_token[:, None], h)
        slots = tl.load(kv_slots_ptr + survivor_src[:, None] * stride_kv_slots + p, mask=m)
        f_old = tl.load(fin_hyp_ptr + merged_src[:, None] * stride_fin_hyp + p, mask=m & from_old)
        f_new = tl.load(hyp_ptr + merged_src[:, None] * stride_hyp + p, mask=m & ~from_old)
        f = tl.where(from_old, f_old, tl.where(at_n, merged_token[:, None], f_new))
        tl.debug_barrier()  # the chunk's sources are all read before its rows are written
        tl.store(hyp_ptr + rows[:, None] * stride_hyp + p, h, mask=m)
        tl.store(kv_slots_ptr + rows[:, None] * stride_kv_slots + p, slots, mask=m)
        tl.store(fin_hyp_ptr + rows[:, None] * stride_fin_hyp + p, f, mask=m)


def _check(values, tokens, rows, kv_len, score, hyp, kv_slots, fin_score, fin_hyp, fin_len, improvable, finished,
           penalty, limit, width):
    S, B = rows.shape
    assert values.shape == tokens.shape == (S * B, 2 * B + 1), "values, tokens: (S * B, 2B + 1)"
    assert values.dtype == score.dtype == fin_score.dtype == penalty.dtype == torch.float32
    assert tokens.dtype == rows.dtype == hyp.dtype == fin_hyp.dtype == torch.int64
    assert kv_slots.dtype == fin_len.dtype == kv_len.dtype == torch.int32
    assert improvable.dtype == finished.dtype == torch.bool and kv_len.shape == finished.shape == improvable.shape
    assert width <= hyp.shape[1] and hyp.shape == fin_hyp.shape == kv_slots.shape
    assert limit.dtype == torch.int32 and limit.shape == kv_len.shape
    assert hyp.shape[1] < penalty.shape[0], "penalty: a value for every length"


def beam_advance_triton(values, tokens, rows, eos_from, state, penalty, *, eos_id, early_stopping, blocked, width):
    """Triton version of `beam_advance_ref`; same arguments, same result, same state afterwards."""
    kv_len, score, hyp, kv_slots, limit = state.kv_len, state.score, state.hyp, state.kv_slots, state.limit
    fin_score, fin_hyp, fin_len = state.fin_score, state.fin_hyp, state.fin_len
    improvable, finished = state.improvable, state.finished
    _check(values, tokens, rows, kv_len, score, hyp, kv_slots, fin_score, fin_hyp, fin_len, improvable, finished,
           penalty, limit, width)
    assert values.is_contiguous() and tokens.is_contiguous() and rows.is_contiguous()
    assert hyp.stride(1) == kv_slots.stride(1) == fin_hyp.stride(1) == 1
    S, B = rows.shape
    done = torch.empty(S, dtype=torch.bool, device=rows.device)
    if S == 0:
        return done
    BLOCK_B = triton.next_power_of_2(B)
    chained = chained_launch(rows)
    _beam_advance_kernel[(S,)](
        values, tokens, rows, kv_len, score, hyp, kv_slots, fin_score, fin_hyp, fin_len, improvable.view(torch.uint8),
        finished.view(torch.uint8), penalty, done.view(torch.uint8),
        limit, eos_from, eos_id, blocked, width, hyp.stride(0), kv_slots.stride(0), fin_hyp.stride(0),
        B=B, BLOCK_B=BLOCK_B, BLOCK_C=triton.next_power_of_2(2 * B + 1), BLOCK_K=triton.next_power_of_2(2 * B),
        EARLY_STOPPING=early_stopping, CHUNK=max(32, COPY_TILE // BLOCK_B), CHAINED=chained, num_warps=NUM_WARPS,
        **launch_options(chained),
    )
    return done


def _best(x, k):
    """The k largest of each row of x, descending, equal ones in their order in x: (values, indices)."""
    values, indices = x.sort(dim=-1, descending=True, stable=True)
    return values[..., :k], indices[..., :k]


def beam_advance_ref(values, tokens, rows, eos_from, state, penalty, *, eos_id, early_stopping, blocked, width):
    """See the module's docstring. values, tokens (S * B, 2B + 1) float32 / int64; rows (S, B) int64;
    eos_from an int; `state` (kernels.RowState), of which it uses kv_len (R,) int32, score,
    fin_score (R,) float32, hyp, fin_hyp (R, T) int64, kv_slots (R, T) int32, fin_len (R,) int32,
    improvable, finished (R,) bool and limit (R,) int32, each sentence's max_length (<= T) at its
    first row; penalty (T + 1,) float32. Updates the state in place and returns done (S,) bool."""
    kv_len, score, hyp, kv_slots, limit = state.kv_len, state.score, state.hyp, state.kv_slots, state.limit
    fin_score, fin_hyp, fin_len = state.fin_score, state.fin_hyp, state.fin_len
    improvable, finished = state.improvable, state.finished
    _check(values, tokens, rows, kv_len, score, hyp, kv_slots, fin_score, fin_hyp, fin_len, improvable, finished,
           penalty, limit, width)
    S, B = rows.shape
    k = 2 * B
    flat = rows.reshape(-1)  # (S * B,)
    lead = rows[:, 0]  # (S,)
    cur_len = kv_len[lead].long()  # (S,)
    banned = cur_len < eos_from

    # Each row's top k of (log-prob + beam score): drops the banned `</s>`, or the spare.
    values = values.masked_fill(banned.repeat_interleave(B)[:, None] & (tokens == eos_id), NEG_INF)
    values, order = _best(values, k)  # (S * B, k)
    tokens = tokens.gather(1, order)
    values = values + score[flat][:, None]

    # The sentence's top k over all its beams, best first.
    top, pick = _best(values.view(S, B * k), k)  # (S, k)
    token = tokens.view(S, B * k).gather(1, pick)  # (S, k)
    parent = rows.gather(1, pick // k)  # (S, k) the row each candidate extends
    max_length = limit[lead].long()  # (S,) each sentence's own
    hits = (token == eos_id) | (cur_len + 1 >= max_length)[:, None]  # (S, k) finishes here

    def extended(parents: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
        """The parents' hypotheses (S, B, width) with each candidate's token at position cur_len."""
        extended = hyp[:, :width][parents]  # (S, B, width)
        return extended.scatter_(2, cur_len[:, None, None].expand(S, B, 1), new[:, :, None])

    past_n = (torch.arange(width, device=rows.device) > cur_len[:, None])[:, None, :]  # (S, 1, width)

    def write(state: torch.Tensor, new: torch.Tensor) -> None:
        """Rows' positions [0, n] of `state` := new (S, B, width); later ones keep what they hold."""
        state[:, :width][rows] = torch.where(past_n, state[:, :width][rows], new)

    # Finished hypotheses: only the top B candidates may enter, scored with the length penalty.
    old_scores = fin_score[rows]  # (S, B), best first, -inf where empty
    full = old_scores[:, -1] > NEG_INF
    allowed = improvable[lead] & ~(full & (early_stopping == 1))  # (S,)
    normalised = top[:, :B] / penalty[cur_len][:, None]  # (S, B)
    enter = hits[:, :B] & allowed[:, None] & (normalised > blocked)  # else HF's -1e9 placeholders outrank it
    merged, keep = _best(torch.cat([old_scores, normalised.masked_fill(~enter, NEG_INF)], dim=1), B)  # (S, B)
    candidates = extended(parent[:, :B], token[:, :B])  # (S, B, width)
    new_fin_hyp = torch.cat([fin_hyp[:, :width][rows], candidates], dim=1)  # (S, 2B, width)
    new_fin_len = torch.cat([fin_len[rows], (cur_len + 1).int()[:, None].expand(S, B)], dim=1)  # (S, 2B)
    write(fin_hyp, new_fin_hyp.gather(1, keep[:, :, None].expand(S, B, width)))
    fin_len[rows] = new_fin_len.gather(1, keep)
    fin_score[rows] = merged

    # The running beams: the best candidates that did not just finish.
    new_score, survivor = _best(top + hits * blocked, B)  # (S, B)
    survivor_parent = parent.gather(1, survivor)  # (S, B)
    write(kv_slots, kv_slots[:, :width][survivor_parent])
    write(hyp, extended(survivor_parent, token.gather(1, survivor)))
    score[rows] = new_score

    # Can anything still improve? (HF's heuristic for early_stopping False / "never")
    best_penalty = penalty[max_length - 1] if early_stopping == 2 else penalty[cur_len]
    best_possible = new_score[:, 0] / best_penalty
    full = merged[:, -1] > NEG_INF
    worst = torch.where(full, merged[:, -1], torch.full_like(merged[:, -1], blocked))
    still = improvable[lead] & (best_possible > worst)
    improvable[lead] = still
    done = ~still | (full & (early_stopping == 1)) | hits.all(dim=1)
    finished[rows] = done[:, None].expand(S, B)
    kv_len[rows] = cur_len.int()[:, None].expand(S, B)
    return done


def beam_advance(values, tokens, rows, eos_from, state, penalty, *, eos_id, early_stopping, blocked, width):
    """One step of HF's beam search after `logsoftmax_topk(logits, 2B + 1)`, for S sentences of B beams in
    rows (S, B) int64: values, tokens (S * B, 2B + 1) each row's best log-probs, descending, and their
    tokens. A sentence's hypotheses' length n is state.kv_len[its first row], and becomes every one of
    its rows'; `</s>` is not allowed while n < eos_from. Updates the rows' state (a RowState) in place:
    score, fin_score; hyp, fin_hyp and kv_slots over positions [0, n], n < width; fin_len; improvable
    at each sentence's first row; finished, every row of a sentence done; and returns done (S,) bool.
    A sentence's max_length is state.limit at its first row. penalty (T + 1,) float32: n **
    length_penalty; early_stopping 0 (False), 1 (True), 2 ("never" and a positive length penalty);
    blocked: HF's -1e9. Ties go to the lower beam, then the better-ranked token."""
    return dispatch(beam_advance_triton, beam_advance_ref, values, values, tokens, rows, eos_from, state, penalty,
                    eos_id=eos_id, early_stopping=early_stopping, blocked=blocked, width=width)
