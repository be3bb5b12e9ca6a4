"""A translation's score and alternatives against `generate(num_return_sequences=N, output_scores=True)`
on the tiny checkpoint, token for token and score for score in float32."""

import pytest
import torch

from dragoman.engine import OptionsError, Translation

SRC, TGT = "eng_Latn", "fra_Latn"
TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Привет, как дела?",
    "我们明天去北京。",
    "Please call me later.",
]


def hf_scored(hf_model, hf_tokenizer, text, **options):
    """generate's sequences of `text` with their scores: beam search's `sequences_scores`, greedy's
    mean log-probability of the tokens after the forced language code."""
    hf_tokenizer.src_lang = SRC
    inputs = hf_tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        out = hf_model.generate(**inputs, forced_bos_token_id=hf_tokenizer.convert_tokens_to_ids(TGT), do_sample=False,
                                output_scores=True, return_dict_in_generate=True, **options)
    sequences = []
    for ids in out.sequences.tolist():
        while ids[-1] == hf_tokenizer.pad_token_id:
            ids.pop()
        sequences.append(ids)
    if options.get("num_beams", 1) > 1:
        return sequences, out.sequences_scores.tolist()
    steps = hf_model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)[0]
    return sequences, [steps[1:].mean().item()]  # step 0 is the forced language code


BEAM_OPTIONS = [
    dict(num_beams=4, max_length=30),
    dict(num_beams=5, length_penalty=0.5, early_stopping=True, max_length=24),
    dict(num_beams=3, no_repeat_ngram_size=2, repetition_penalty=1.3, max_length=24),
]


@pytest.mark.parametrize("pipelined", [False, True], ids=["steps finished at once", "pipelined as on the GPU"])
@pytest.mark.parametrize("hf_options", BEAM_OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_alternatives_are_generates_return_sequences_with_their_scores(translator, hf_model, hf_tokenizer, hf_options,
                                                                       pipelined, monkeypatch):
    """Every text of one batch: its text, score and alternatives are HF's sequences and sequences_scores.
    Pipelined, the hypotheses are read after the next step was queued, which must not touch them."""
    monkeypatch.setattr(translator.generator, "pipelined", pipelined)
    options = translator.default_options(**hf_options)
    beams = hf_options["num_beams"]
    for n in (1, 2, beams):
        ours = translator.translate_full(TEXTS, SRC, TGT, options, alternatives=n)
        for text, translation in zip(TEXTS, ours):
            sequences, scores = hf_scored(hf_model, hf_tokenizer, text, num_return_sequences=n, **hf_options)
            got = [translation] + translation.alternatives
            assert [t.text for t in got] == [hf_tokenizer.decode(s, skip_special_tokens=True) for s in sequences]
            assert [t.score for t in got] == pytest.approx(scores, abs=1e-5)
            assert all(t.alternatives == [] for t in translation.alternatives)


def test_the_greedy_score_is_the_mean_log_probability_of_its_tokens(translator, hf_model, hf_tokenizer):
    for hf_options in (dict(num_beams=1, max_length=30), dict(num_beams=1, repetition_penalty=1.5, max_length=24)):
        ours = translator.translate_full(TEXTS, SRC, TGT, translator.default_options(**hf_options))
        for text, translation in zip(TEXTS, ours):
            [sequence], [score] = hf_scored(hf_model, hf_tokenizer, text, **hf_options)
            assert translation.text == hf_tokenizer.decode(sequence, skip_special_tokens=True)
            assert translation.score == pytest.approx(score, abs=1e-5)
            assert translation.alternatives == []


def test_plain_translate_reads_no_hypotheses_and_gives_the_same_texts(translator, monkeypatch):
    runner = translator.generator.runner
    reads = []
    read = runner._read_hypotheses
    monkeypatch.setattr(runner, "_read_hypotheses",
                        lambda sentences, scores: reads.append(sentences) or read(sentences, scores))
    for beams in (1, 4):
        options = translator.default_options(num_beams=beams, max_length=30)
        plain = translator.translate(TEXTS, SRC, TGT, options)
        assert reads == []
        full = translator.translate_full(TEXTS, SRC, TGT, options)
        assert [t.text for t in full] == plain
        assert sum(len(r) for r in reads) == len(TEXTS)
        reads.clear()


def test_blank_texts_and_texts_in_pieces(translator):
    """A blank text has no score; one too long to read at once has its pieces' mean score and no alternatives."""
    long = " ".join(["The quick brown fox jumps over the lazy dog."] * 30)
    options = translator.default_options(num_beams=2, max_length=20)
    assert len(translator._sources(long, SRC)) > 1
    seen = []
    results = translator.translate_full(["  ", long, TEXTS[0]], SRC, TGT, options, alternatives=2,
                                        on_translation=lambda i, t: seen.append(i))
    assert sorted(seen) == [0, 1, 2]
    assert results[0] == Translation("", None, [])
    assert results[1].text == translator.translate([long], SRC, TGT, options)[0]
    assert results[1].alternatives == [] and results[1].score < 0
    assert results[2].score < 0 and len(results[2].alternatives) == 1


def test_more_alternatives_than_beams_are_refused_in_one_line(translator):
    options = translator.default_options(num_beams=3, max_length=20)
    with pytest.raises(OptionsError, match=r"^alternatives must be an integer from 1 to 3, not 4$"):
        translator.translate_full(TEXTS, SRC, TGT, options, alternatives=4)
    with pytest.raises(OptionsError, match=r"^alternatives must be an integer from 1 to 1, not 2$"):
        translator.translate_full(TEXTS, SRC, TGT, options.with_changes(num_beams=1), alternatives=2)


def test_a_completion_s_alternatives_begin_as_typed(translator):
    options = translator.default_options(num_beams=4, max_length=30)
    [translation] = translator.translate_full([TEXTS[0]], SRC, TGT, options, alternatives=4, starts=["Le chat,"])
    assert translation.text.startswith("Le chat,") and translation.score is not None
    assert all(t.text.startswith("Le chat,") for t in translation.alternatives)
    assert translation.alternatives
