"""HF's greedy and beam search for many sentences at once, as tensor operations on the device.

`engine/decoding.py` holds the same searches written for one sentence as plain bookkeeping; it is
the readable reference, and tests/engine/test_batched_search.py checks these against it step by
step. Here a step of S sentences that share decoding options is a fixed handful of tensor ops,
whatever S is, so the host's work per step does not grow with the batch.

Each function takes the sentences' rows (S, B) in `DecoderRows` right after the decoder step that
fed every row's last token (so `kv_len` of a row is its hypothesis length), the step's logits
(S * B, V) in the same order, and `width`, a bound on the hypotheses' lengths after this step; it
updates the rows' hypotheses and search state and returns which sentences are done (S,) bool, on
the device. Without host syncs, so a CUDA graph can hold a step: only options that do more than
ban `</s>` (repetition penalty, n-gram bans, forced `</s>`) need the host's `lengths` of the
hypotheses, to hand whole histories to `decoding.process_scores`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

import kernels
from engine.decoding import BLOCKED, NEG_INF, DecodingOptions, bans_only_eos, process_scores
from engine.rows import DecoderRows


def _histories(state: DecoderRows, rows: torch.Tensor, lengths: list[int] | None) -> list[list[int]]:
    """Each row's hypothesis as a host list, for the score processors that need whole histories."""
    assert lengths is not None, "these decoding options need the hypotheses' lengths"
    S, B = rows.shape
    width = max(lengths)
    tokens = state.hyp[:, :width][rows.reshape(-1)].tolist()  # (S * B, width)
    return [h[: lengths[i // B]] for i, h in enumerate(tokens)]


def _eos_banned(cur_len: torch.Tensor, options: DecodingOptions) -> torch.Tensor:
    """(S,) bool: min_length / min_new_tokens still forbid `</s>` (as `decoding.eos_banned`)."""
    return (cur_len < options.min_length) | (cur_len - 1 < options.min_new_tokens)


def greedy_step(
    state: DecoderRows,
    rows: torch.Tensor,
    logits: torch.Tensor,
    options: DecodingOptions,
    eos_id: int,
    width: int,
    lengths: list[int] | None = None,
) -> torch.Tensor:
    """HF's `_sample` without sampling: the argmax of the processed raw logits. rows (S, 1)."""
    row = rows[:, 0]  # (S,)
    cur_len = state.kv_len[row].long()  # (S,)
    if bans_only_eos(options):
        # The argmax of bf16 logits is the argmax of their float32 copies: no float32 copy is made.
        # The logits are this step's own buffer, so `</s>` is masked in place; then one read of
        # them, split over the vocabulary so that few rows still fill the GPU.
        logits[:, eos_id] = logits[:, eos_id].masked_fill(_eos_banned(cur_len, options), NEG_INF)
        token = kernels.argmax(logits)  # (S,)
    else:
        scores = process_scores(logits.float(), _histories(state, rows, lengths), options, eos_id)
        token = scores.argmax(dim=-1)  # (S,)
    state.hyp[row, cur_len] = token
    return (token == eos_id) | (cur_len + 1 >= options.length)


def beam_step(
    state: DecoderRows,
    rows: torch.Tensor,
    logits: torch.Tensor,
    options: DecodingOptions,
    eos_id: int,
    width: int,
    lengths: list[int] | None = None,
) -> torch.Tensor:
    """HF's vectorised `_beam_search`, one step, for sentences of B beams each. rows (S, B).

    A sentence starts with B rows holding the same hypothesis and scores (0, -1e9, ...), as in HF.
    """
    S, B = rows.shape
    k, lp = 2 * B, options.length_penalty
    flat = rows.reshape(-1)  # (S * B,)
    lead = rows[:, 0]  # (S,)
    cur_len = state.kv_len[lead].long()  # (S,) hypothesis length before this step's token

    # Each row's top k of (processed log-prob + beam score).
    if bans_only_eos(options):
        # Fused log-softmax + top-k; one extra candidate stands in for `</s>` where it is banned.
        values, tokens, _ = kernels.logsoftmax_topk(logits, k + 1)  # (S * B, k + 1)
        banned = _eos_banned(cur_len, options).repeat_interleave(B)  # (S * B,)
        values = values.masked_fill(banned[:, None] & (tokens == eos_id), NEG_INF)
        values, order = values.topk(k, dim=-1)  # (S * B, k): drops the banned `</s>`, or the spare
        tokens = tokens.gather(1, order)
    else:
        log_probs = process_scores(F.log_softmax(logits.float(), dim=-1), _histories(state, rows, lengths), options, eos_id)
        values, tokens = log_probs.topk(k, dim=-1)  # (S * B, k)
    values = values + state.score[flat][:, None]

    # The sentence's top k over all its beams, best first.
    top, pick = values.view(S, B * k).topk(k, dim=-1)  # (S, k)
    token = tokens.view(S, B * k).gather(1, pick)  # (S, k)
    parent = rows.gather(1, pick // k)  # (S, k) the row each candidate extends
    hits = (token == eos_id) | (cur_len + 1 >= options.length)[:, None]  # (S, k) finishes here

    def extended(parents: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
        """The parents' hypotheses (S, B, width) with each candidate's token at position cur_len."""
        hyp = state.hyp[:, :width][parents]  # (S, B, width)
        return hyp.scatter_(2, cur_len[:, None, None].expand(S, B, 1), new[:, :, None])

    # Finished hypotheses: only the top B candidates may enter, scored with the length penalty.
    finished = state.fin_score[rows]  # (S, B), best first, -inf where empty
    full = finished[:, -1] > NEG_INF
    allowed = state.improvable[lead] & ~(full & (options.early_stopping is True))  # (S,)
    normalised = top[:, :B] / (cur_len.double() ** lp).float()[:, None]  # (S, B)
    enter = hits[:, :B] & allowed[:, None] & (normalised > BLOCKED)  # else HF's -1e9 placeholders outrank it
    merged, keep = torch.cat([finished, normalised.masked_fill(~enter, NEG_INF)], dim=1).topk(B, dim=-1)  # (S, B)
    candidates = extended(parent[:, :B], token[:, :B])  # (S, B, width)
    fin_hyp = torch.cat([state.fin_hyp[:, :width][rows], candidates], dim=1)  # (S, 2B, width)
    fin_len = torch.cat([state.fin_len[rows], (cur_len + 1).int()[:, None].expand(S, B)], dim=1)  # (S, 2B)
    state.fin_hyp[:, :width][rows] = fin_hyp.gather(1, keep[:, :, None].expand(S, B, width))
    state.fin_len[rows] = fin_len.gather(1, keep)
    state.fin_score[rows] = merged

    # The running beams: the best candidates that did not just finish.
    score, survivor = (top + hits * BLOCKED).topk(B, dim=-1)  # (S, B)
    survivor_parent = parent.gather(1, survivor)  # (S, B)
    state.kv_slots[:, :width][rows] = state.kv_slots[:, :width][survivor_parent]
    state.hyp[:, :width][rows] = extended(survivor_parent, token.gather(1, survivor))
    state.score[rows] = score

    # Can anything still improve? (HF's heuristic for early_stopping False / "never")
    if options.early_stopping == "never" and lp > 0.0:
        best_length = torch.full_like(cur_len, options.length - 1)
    else:
        best_length = cur_len
    best_possible = score[:, 0] / (best_length.double() ** lp).float()
    full = merged[:, -1] > NEG_INF
    worst = torch.where(full, merged[:, -1], torch.full_like(merged[:, -1], BLOCKED))
    improvable = state.improvable[lead] & (best_possible > worst)
    state.improvable[lead] = improvable
    return ~improvable | (full & (options.early_stopping is True)) | hits.all(dim=1)


def search_step(options: DecodingOptions):
    """The step function for these options: beam search, or greedy for one beam."""
    return beam_step if options.num_beams > 1 else greedy_step


def best_hypotheses(state: DecoderRows, leads: list[int], lengths: list[int], done: bool) -> list[list[int]]:
    """Each sentence's best hypothesis as a host list: when `done`, its best finished one (or its best
    running one if none finished), else its best running one. `leads`: the sentences' first rows;
    `lengths`: their hypotheses' lengths (no finished hypothesis is longer)."""
    lead = torch.tensor(leads, device=state.hyp.device)
    width = max(lengths)
    best = state.hyp[:, :width][lead]  # (S, width)
    length = torch.tensor(lengths, dtype=torch.int32, device=lead.device)
    if done:
        has_finished = state.fin_score[lead] > NEG_INF  # (S,)
        best = torch.where(has_finished[:, None], state.fin_hyp[:, :width][lead], best)
        length = torch.where(has_finished, state.fin_len[lead], length)
    return [t[:n] for t, n in zip(best.tolist(), length.tolist())]
