"""The score processors against Hugging Face's own LogitsProcessors on random scores."""

import pytest
import torch
from transformers.generation.logits_process import (
    ForcedEOSTokenLogitsProcessor,
    MinLengthLogitsProcessor,
    MinNewTokensLengthLogitsProcessor,
    NoRepeatNGramLogitsProcessor,
    RepetitionPenaltyLogitsProcessor,
)

from engine.decoding import DecodingOptions, process_scores

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
    with pytest.raises(ValueError, match="num_beams"):
        DecodingOptions(num_beams=0)
    with pytest.raises(ValueError, match="max length"):
        DecodingOptions(max_length=1)
    with pytest.raises(ValueError, match="repetition_penalty"):
        DecodingOptions(repetition_penalty=0)
    assert DecodingOptions(max_new_tokens=32).length == 33  # HF: decoder prompt (1) + new tokens
