"""The score processors against Hugging Face's own LogitsProcessors on random scores, and beam
search's alternatives against `generate(num_return_sequences=N)` on the tiny checkpoint."""

import math

import pytest
import torch
from reference_search import beam_step, hf_generate, model_logits, run
from transformers.generation.logits_process import (
    ForcedEOSTokenLogitsProcessor,
    MinLengthLogitsProcessor,
    MinNewTokensLengthLogitsProcessor,
    NoRepeatNGramLogitsProcessor,
    RepetitionPenaltyLogitsProcessor,
)

from dragoman.engine.decoding import MAX_BEAMS, MAX_LENGTH, BeamSearch, DecodingOptions, OptionsError, process_scores

EOS = 2


def histories(rows, length, vocab, seed):
    g = torch.Generator().manual_seed(seed)
    # A small alphabet makes repeated tokens and n-grams likely.
    return torch.randint(0, min(vocab, 12), (rows, length), generator=g)


@pytest.mark.parametrize("length", [2, 3, 7, 20])
def test_processors_match_hugging_face(length):
    vocab = 40
    for seed in range(5):
        ids = histories(4, length, vocab, seed)
        scores = torch.randn(4, vocab, generator=torch.Generator().manual_seed(100 + seed)).log_softmax(-1)
        cases = [
            (DecodingOptions(repetition_penalty=1.7), RepetitionPenaltyLogitsProcessor(1.7)),
            (DecodingOptions(repetition_penalty=0.6), RepetitionPenaltyLogitsProcessor(0.6)),
            (DecodingOptions(no_repeat_ngram_size=2), NoRepeatNGramLogitsProcessor(2)),
            (DecodingOptions(no_repeat_ngram_size=3), NoRepeatNGramLogitsProcessor(3)),
            (DecodingOptions(min_length=8), MinLengthLogitsProcessor(8, EOS)),
            (DecodingOptions(min_new_tokens=5), MinNewTokensLengthLogitsProcessor(1, 5, EOS)),
            (DecodingOptions(max_length=length + 1, forced_eos_id=EOS), ForcedEOSTokenLogitsProcessor(length + 1, EOS)),
        ]
        for options, reference in cases:
            expected = reference(ids, scores.clone())
            ours = process_scores(scores.clone(), ids.tolist(), options, EOS)
            torch.testing.assert_close(ours, expected, rtol=0, atol=0, msg=f"{options}")


def test_options_refuse_nonsense():
    with pytest.raises(OptionsError, match="num_beams"):
        DecodingOptions(num_beams=0)
    with pytest.raises(OptionsError, match="max_length must be an integer from 2 to"):
        DecodingOptions(max_length=1)
    with pytest.raises(OptionsError, match="repetition_penalty"):
        DecodingOptions(repetition_penalty=0)
    assert DecodingOptions(max_new_tokens=32).length == 33  # HF: decoder prompt (1) + new tokens


@pytest.mark.parametrize(
    "field, value",
    [
        ("length_penalty", math.nan),  # NaN scores leave the search's top-k no candidates
        ("length_penalty", math.inf),
        ("length_penalty", -math.inf),
        ("length_penalty", 1e6),  # length ** penalty overflows
        ("repetition_penalty", math.nan),
        ("repetition_penalty", math.inf),
        ("repetition_penalty", 1e-300),  # scores / penalty overflow
        ("repetition_penalty", -1.0),
        ("num_beams", 10**9),
        ("num_beams", True),
        ("num_beams", 4.0),
        ("num_beams", "4"),
        ("max_length", 10**9),
        ("max_length", None),
        ("max_new_tokens", 0),
        ("min_length", -1),
        ("min_new_tokens", math.nan),
        ("no_repeat_ngram_size", -2),
        ("no_repeat_ngram_size", 10**9),
        ("forced_eos_id", -1),
        ("early_stopping", 1),
        ("early_stopping", "always"),
    ],
)
def test_nan_inf_out_of_range_and_mistyped_options_are_refused_in_one_line(field, value):
    with pytest.raises(OptionsError) as error:
        DecodingOptions(**{field: value})
    assert error.value.name == field
    assert str(error.value).startswith(f"{field} must be ") and repr(value) in str(error.value)
    assert "\n" not in str(error.value)


def test_options_changed_later_are_checked_too():
    with pytest.raises(OptionsError, match="length_penalty"):
        DecodingOptions().with_changes(length_penalty=math.nan)


def test_the_bounds_are_inclusive():
    DecodingOptions(num_beams=MAX_BEAMS, max_length=MAX_LENGTH, length_penalty=-10, repetition_penalty=100,
                    early_stopping="never", max_new_tokens=MAX_LENGTH - 1, forced_eos_id=0)


ALTERNATIVE_OPTIONS = [
    dict(num_beams=4, max_length=30),
    dict(num_beams=5, length_penalty=0.5, early_stopping=True, max_length=24),
    dict(num_beams=3, length_penalty=1.5, early_stopping="never", max_length=20),
    dict(num_beams=4, no_repeat_ngram_size=2, repetition_penalty=1.3, max_length=24),
]


@pytest.mark.parametrize("hf_options", ALTERNATIVE_OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_alternatives_are_generates_return_sequences(hf_model, hf_tokenizer, hf_options):
    options = DecodingOptions(**hf_options)
    prefix = [EOS, hf_tokenizer.convert_tokens_to_ids("fra_Latn")]
    for text in ["The quick brown fox jumps over the lazy dog.", "Привет, как дела?", "我们明天去北京。"]:
        search = run(BeamSearch(prefix, options, EOS), beam_step, model_logits(hf_model, hf_tokenizer, text, "eng_Latn"), EOS)
        for n in (1, 2, options.num_beams):
            expected = hf_generate(hf_model, hf_tokenizer, text, "eng_Latn", "fra_Latn", num_return_sequences=n, **hf_options)
            assert search.alternatives(n) == expected, (text, n)
        assert len(set(map(tuple, search.alternatives(options.num_beams)))) == options.num_beams


def test_more_alternatives_than_beams_are_refused():
    search = BeamSearch([EOS, 7], DecodingOptions(num_beams=3), EOS)
    with pytest.raises(OptionsError, match="alternatives must be an integer from 1 to 3, not 4"):
        search.alternatives(4)
