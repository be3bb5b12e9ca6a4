"""HF's greedy and beam search for many sentences at once, as tensor operations on the device.

`engine/decoding.py` holds the same searches written for one sentence as plain bookkeeping; it is
the readable reference, and tests/engine/test_batched_search.py checks these against it step by
step. Here a step of S sentences that share decoding options is a fixed handful of tensor ops
(for beam search, two kernels: `kernels.logsoftmax_topk` and `kernels.beam_advance`), whatever S
is, so the host's work per step does not grow with the batch.

Each function takes the sentences' rows (S, B) in `DecoderRows` right after the decoder step that
fed every row's last token (so `kv_len` of a row is its hypothesis length), the step's logits
(S * B, V) in the same order, and `width`, a bound on the hypotheses' lengths after this step; it
updates the rows' hypotheses and search state, flags the rows of the sentences it finds done
(`finished`, so that they sit the next step out), and returns which sentences are done (S,) bool,
on the device. Without host syncs, so a CUDA graph can hold a step: only options that do more than
ban `</s>` (repetition penalty, n-gram bans, forced `</s>`) need the host's `lengths` of the
hypotheses, to hand whole histories to `decoding.process_scores`.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from dragoman import kernels
from dragoman.engine.decoding import BLOCKED, NEG_INF, DecodingOptions, bans_only_eos, process_scores
from dragoman.engine.rows import DecoderRows


def _histories(state: DecoderRows, rows: torch.Tensor, lengths: list[int] | None) -> list[list[int]]:
    """Each row's hypothesis as a host list, for the score processors that need whole histories."""
    assert lengths is not None, "these decoding options need the hypotheses' lengths"
    S, B = rows.shape
    width = max(lengths)
    tokens = state.hyp[:, :width][rows.reshape(-1)].tolist()  # (S * B, width)
    return [h[: lengths[i // B]] for i, h in enumerate(tokens)]


def _eos_from(options: DecodingOptions) -> int:
    """The hypothesis length from which min_length / min_new_tokens allow `</s>` (as
    `decoding.eos_banned`: banned while cur_len < min_length or cur_len - 1 < min_new_tokens)."""
    return max(options.min_length, options.min_new_tokens + 1)


def greedy_step(
    state: DecoderRows,
    rows: torch.Tensor,
    logits: torch.Tensor,
    options: DecodingOptions,
    eos_id: int,
    width: int,
    lengths: list[int] | None = None,
    scored: bool = False,
) -> torch.Tensor:
    """HF's `_sample` without sampling: the argmax of the processed raw logits. rows (S, 1).

    `scored`: each row's `score` also sums the log-probabilities of its tokens (the log-softmax of
    the processed logits at the token chosen, as HF's `compute_transition_scores` with
    `normalize_logits`). It costs one more read of the logits, so only steps with a sentence that
    asks for its score pay it."""
    row = rows[:, 0]  # (S,)
    cur_len = state.kv_len[row].long()  # (S,)
    if bans_only_eos(options):
        # The argmax of bf16 logits is the argmax of their float32 copies: no float32 copy is made.
        # The logits are this step's own buffer, so `</s>` is masked in place; then one read of
        # them, split over the vocabulary so that few rows still fill the GPU.
        logits[:, eos_id] = logits[:, eos_id].masked_fill(cur_len < _eos_from(options), NEG_INF)
        scores = logits
    else:
        scores = process_scores(logits.float(), _histories(state, rows, lengths), options, eos_id)
    token = kernels.argmax(scores)  # (S,) NaN counts as -inf
    # A row without a number (NaN throughout: the forward pass overflowed) ends its sentence here,
    # as `ran_out_of_numbers` tells.
    numberless = ~(scores.gather(1, token[:, None])[:, 0] > NEG_INF)  # (S,)
    if scored:
        _, _, lse = kernels.logsoftmax_topk(scores, 1)  # (S,) one more read of the scores
        state.score[row] += scores.gather(1, token[:, None])[:, 0].float() - lse
    state.hyp[row, cur_len] = token
    done = (token == eos_id) | (cur_len + 1 >= state.limit[row]) | numberless
    state.mark_finished(rows, done)
    return done


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
    Each row's best 2B + 1 processed log-probs, then `kernels.beam_advance` does the rest (one
    launch on the GPU): candidates, finished hypotheses with the length penalty, the new beams, the
    finished flags. The hypotheses' length it reads from `kv_len` itself: every op of its own
    would add a kernel to each captured step.
    """
    k, lp = 2 * rows.shape[1], options.length_penalty

    # Each row's top k + 1, descending; the extra candidate stands in for `</s>` where it is banned.
    if bans_only_eos(options):
        values, tokens, _ = kernels.logsoftmax_topk(logits, k + 1)  # (S * B, k + 1)
        eos_from = _eos_from(options)
    else:
        # NaN and +inf count as -inf, as in kernels.logsoftmax_topk; a row without a number then has
        # NaN log-probs, which become -inf among its candidates.
        scores = logits.float().nan_to_num_(nan=NEG_INF, posinf=NEG_INF, neginf=NEG_INF)
        log_probs = process_scores(F.log_softmax(scores, dim=-1), _histories(state, rows, lengths), options, eos_id)
        values, tokens = log_probs.topk(k + 1, dim=-1)  # (S * B, k + 1)
        values = values.nan_to_num_(nan=NEG_INF, neginf=NEG_INF)
        eos_from = 0  # process_scores banned `</s>` already
    # HF's "never" assumes the longest hypothesis only where the length penalty favours length.
    early_stopping = 1 if options.early_stopping is True else 2 if options.early_stopping == "never" and lp > 0.0 else 0
    penalty = _length_penalties(lp, state.max_length + 1, rows.device)
    return kernels.beam_advance(values, tokens, rows, eos_from, state.tensors, penalty, eos_id=eos_id,
                                early_stopping=early_stopping, blocked=BLOCKED, width=width)


@functools.cache
def _length_penalties(length_penalty: float, size: int, device: torch.device) -> torch.Tensor:
    """(size,) float32: n ** length_penalty for each hypothesis length n, in float64 then rounded.
    Made once on the device, so that a captured step copies nothing from the host."""
    return (torch.arange(size, dtype=torch.float64) ** length_penalty).float().to(device)


def ran_out_of_numbers(result: list[int], limit: int, options: DecodingOptions, eos_id: int) -> bool:
    """Whether a sentence's result (its whole hypothesis, of at most `limit` tokens) ended at a step
    whose scores held no number (NaN throughout: the weights, or the forward pass overflowing in
    float16 or bfloat16). Such a step ends its sentence short of its limit without `</s>`: greedy,
    and beam search with every candidate -inf, which no finished hypothesis takes. A healthy search
    ends on `</s>` or at its limit; not so beam search with a negative length penalty, which may
    stop a sentence with no finished hypothesis as HF does, so there nothing is told."""
    if options.num_beams > 1 and options.length_penalty < 0:
        return False
    return len(result) < limit and result[-1] != eos_id


def search_step(options: DecodingOptions):
    """The step function for these options: beam search, or greedy for one beam."""
    return beam_step if options.num_beams > 1 else greedy_step
