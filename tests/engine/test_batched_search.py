"""The device-side searches (engine/batched_search.py) against the per-sentence reference searches
(engine/decoding.py), step by step on random scores: same beams, same scores, same finished
hypotheses, same results. The sentences of a batch share options but each has its own max_length
(engine.generator.Request.max_length)."""

import pytest
import torch
import torch.nn.functional as F

from dragoman import kernels
from dragoman.engine.batched_search import beam_step, greedy_step, ran_out_of_numbers
from dragoman.engine.decoding import BLOCKED, BeamSearch, DecodingOptions, GreedySearch, process_scores
from dragoman.engine.rows import DecoderRows

EOS, VOCAB, T = 2, 60, 32
PREFIXES = [[2, 7], [2, 9, 11, 13], [2, 8, 5]]  # sentences at different lengths in one batch
SHORTER_BY = [0, 4, 2]  # their max_lengths: the options' less these

OPTIONS = [
    DecodingOptions(num_beams=3, max_length=14),
    DecodingOptions(num_beams=4, max_length=16, length_penalty=0.6, early_stopping=True, min_new_tokens=3),
    DecodingOptions(num_beams=2, max_length=12, length_penalty=1.3, early_stopping="never", min_length=6),
    DecodingOptions(num_beams=3, max_length=13, repetition_penalty=1.4, no_repeat_ngram_size=2),  # host histories
]


def own_options(options):
    """Each sentence's options as the reference searches one sentence: with its own max_length."""
    return [options.with_changes(max_length=options.length - less, max_new_tokens=None) for less in SHORTER_BY]


def start(options):
    B = options.num_beams
    state = DecoderRows(len(PREFIXES) * B, T, 4, torch.device("cpu"))
    rows = torch.arange(len(PREFIXES) * B).view(-1, B)  # (S, B)
    for s, (prefix, own) in enumerate(zip(PREFIXES, own_options(options))):
        state.hyp[rows[s], : len(prefix)] = torch.tensor(prefix)
        state.kv_len[rows[s]] = len(prefix)  # as after the step that fed the prefix's last token
        state.score[rows[s]] = torch.tensor([0.0] + [BLOCKED] * (B - 1))
        state.limit[rows[s]] = own.length  # as admission sets it
    return state, rows


def random_logits(step, rows):
    g = torch.Generator().manual_seed(step)
    logits = torch.randn(rows, VOCAB, generator=g) * 3
    logits[:, EOS] += 4 * (step % 3 == 1)  # some steps make `</s>` likely, so hypotheses finish
    return logits


def reference_candidates(search, logits, options):
    """Each live beam's top 2B of (processed log-prob + beam score), from that beam's row of logits."""
    live = logits[: len(search.beams)]
    log_probs = process_scores(F.log_softmax(live, dim=-1), search.live, options, EOS)
    scores = log_probs + torch.tensor([b.score for b in search.beams])[:, None]
    top, tokens = scores.topk(2 * options.num_beams, dim=-1)
    return top.tolist(), tokens.tolist()


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: f"beams{o.num_beams}")
def test_beam_step_follows_the_reference_search(options):
    B = options.num_beams
    state, rows = start(options)
    references = [BeamSearch(prefix, own, EOS) for prefix, own in zip(PREFIXES, own_options(options))]
    active = list(range(len(PREFIXES)))
    lengths = [len(p) for p in PREFIXES]
    results = {}
    for step in range(40):
        if not active:
            break
        logits = random_logits(step, len(PREFIXES) * B).view(len(PREFIXES), B, VOCAB)
        batch = rows[active]  # (S, B)
        done = beam_step(state, batch, logits[active].reshape(-1, VOCAB).clone(), options, EOS, T,
                         [lengths[s] for s in active])
        # What the host reads of the step, as the generator has it report: the done sentences' results.
        report = (torch.empty(len(active), dtype=torch.bool), torch.empty(len(active), T, dtype=torch.int64),
                  torch.empty(len(active), dtype=torch.int32), torch.empty(len(active)))
        kernels.step_report(done, batch, state.tensors, kernels.StepReport(*report), False)
        results.update((s, report[1][i, : report[2][i]].tolist()) for i, s in enumerate(active) if done[i])
        for s in active:
            ref = references[s]
            ref.advance(*reference_candidates(ref, logits[s], options))
            lengths[s] += 1
            state.kv_len[rows[s]] += 1  # the next decoder step feeds the new token
        assert done.tolist() == [references[s].done for s in active], f"step {step}"
        for s in active:
            ref = references[s]
            if ref.done:
                continue
            hyps = state.hyp[rows[s], : lengths[s]].tolist()
            assert hyps == [b.tokens for b in ref.beams], f"sentence {s}, step {step}"
            assert state.score[rows[s]].tolist() == pytest.approx([b.score for b in ref.beams], rel=1e-5, abs=1e-5)
            finished = state.fin_score[rows[s]]
            assert finished[finished > float("-inf")].tolist() == pytest.approx([f[0] for f in ref.finished], rel=1e-5, abs=1e-5)
        active = [s for s in active if not references[s].done]
    assert not active, "every sentence ends by max_length"
    assert [results[s] for s in range(len(PREFIXES))] == [ref.best() for ref in references]
    assert any(len(r) < options.length for r in results.values()) or options.min_length, "no sentence ended on `</s>`"


@pytest.mark.parametrize("options", [DecodingOptions(num_beams=1, max_length=12, min_new_tokens=4),
                                     DecodingOptions(num_beams=1, max_length=12, repetition_penalty=1.5)])
def test_greedy_step_follows_the_reference_search(options):
    state, rows = start(options)
    references = [GreedySearch(prefix, own, EOS) for prefix, own in zip(PREFIXES, own_options(options))]
    lengths = [len(p) for p in PREFIXES]
    for step in range(12):
        active = [s for s in range(len(PREFIXES)) if not references[s].done]
        if not active:
            break
        logits = random_logits(step, len(PREFIXES))
        done = greedy_step(state, rows[active], logits[active].clone(), options, EOS, T, [lengths[s] for s in active])
        for s in active:
            ref = references[s]
            scores = process_scores(logits[s : s + 1].clone(), ref.live, options, EOS)
            ref.advance(int(scores.argmax()))
            lengths[s] += 1
            state.kv_len[rows[s]] += 1
            assert state.hyp[rows[s, 0], : lengths[s]].tolist() == ref.tokens
        assert done.tolist() == [references[s].done for s in active]
    assert all(ref.done for ref in references)


def search_all(options, poisoned=None, from_step=1):
    """Every sentence's result and the step it ended at, by the device-side search alone on
    random_logits; the logits of sentence `poisoned` are NaN from `from_step` on."""
    B = options.num_beams
    state, rows = start(options)
    step_of = beam_step if B > 1 else greedy_step
    active, lengths, results, ended = list(range(len(PREFIXES))), [len(p) for p in PREFIXES], {}, {}
    for step in range(40):
        if not active:
            break
        logits = random_logits(step, len(PREFIXES) * B).view(len(PREFIXES), B, VOCAB)
        if poisoned is not None and step >= from_step:
            logits[poisoned] = float("nan")
        batch = rows[active]
        done = step_of(state, batch, logits[active].reshape(-1, VOCAB).clone(), options, EOS, T,
                       [lengths[s] for s in active])
        report = (torch.empty(len(active), dtype=torch.bool), torch.empty(len(active), T, dtype=torch.int64),
                  torch.empty(len(active), dtype=torch.int32), torch.empty(len(active)))
        kernels.step_report(done, batch, state.tensors, kernels.StepReport(*report), False)
        for i, s in enumerate(active):
            lengths[s] += 1
            state.kv_len[rows[s]] += 1
            if done[i]:
                results[s], ended[s] = report[1][i, : report[2][i]].tolist(), step
        active = [s for s in active if s not in results]
    assert not active
    return results, ended


GREEDY_OPTIONS = [DecodingOptions(num_beams=1, max_length=12, min_new_tokens=4),
                  DecodingOptions(num_beams=1, max_length=12, repetition_penalty=1.5)]


@pytest.mark.parametrize("from_step", [0, 1])
@pytest.mark.parametrize("options", OPTIONS + GREEDY_OPTIONS, ids=lambda o: f"beams{o.num_beams}")
def test_a_sentence_whose_scores_turn_nan_ends_there_and_the_others_keep_their_tokens(options, from_step):
    """Logits of NaN (a forward pass that overflowed) for one sentence's rows: no error, that
    sentence ends at that step as `ran_out_of_numbers` tells (unless a hypothesis of it finished
    before, which is then its result), the others come out token for token as without it."""
    healthy, _ = search_all(options)
    results, ended = search_all(options, poisoned=1, from_step=from_step)
    assert ended[1] == from_step
    limits = [own.length for own in own_options(options)]
    prefix = PREFIXES[1]
    if ran_out_of_numbers(results[1], limits[1], options, EOS):
        assert len(results[1]) == len(prefix) + from_step + 1
        assert results[1][: len(prefix) + from_step] == healthy[1][: len(prefix) + from_step]
    else:
        assert from_step == 1 and options.num_beams > 1 and results[1][-1] == EOS
        assert results[1][: len(prefix)] == prefix and len(results[1]) == len(prefix) + 1  # finished at step 0
    for s in (0, 2):
        assert results[s] == healthy[s]
    assert not any(ran_out_of_numbers(healthy[s], limits[s], options, EOS) for s in range(len(PREFIXES)))
