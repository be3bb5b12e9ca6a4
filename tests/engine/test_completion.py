"""Completion from the start of a translation: equal to `generate` given the same decoder_input_ids."""

import pytest
import torch

from dragoman.engine.decoding import OptionsError

SRC, TGT = "eng_Latn", "fra_Latn"
TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Good morning, how are you today?",
    "A short sentence",
    "Please call me later.",
]


def hf_completion(hf_model, hf_tokenizer, text, forced, options):
    """HF's translation of `text` with the decoder started by `</s>`, the language code and `forced`."""
    hf_tokenizer.src_lang = SRC
    inputs = hf_tokenizer(text, return_tensors="pt")
    start = [hf_tokenizer.eos_token_id, hf_tokenizer.convert_tokens_to_ids(TGT), *forced]
    with torch.no_grad():
        out = hf_model.generate(**inputs, decoder_input_ids=torch.tensor([start]), do_sample=False, **options)
    return hf_tokenizer.decode(out[0], skip_special_tokens=True)


def test_the_start_of_a_translation_is_tokenized_as_hugging_face_does_without_special_tokens(translator, hf_tokenizer):
    for text in ["Bonjour le monde", "Bonjo", "Le chat, ", "  deux  espaces", "我们明天"]:
        assert translator.tokenizer.encode_target_start(text) == hf_tokenizer(text, add_special_tokens=False).input_ids


@pytest.mark.parametrize("beams", [1, 4])
def test_completions_in_a_batch_with_plain_sentences_equal_generate(translator, hf_model, hf_tokenizer, beams):
    """A start ending in punctuation is forced whole; the plain sentences beside it keep their HF results."""
    options = dict(num_beams=beams, max_length=30)
    starts = [None, "Bonjour, ", "Le chat,"]  # "Bonjour, " ends with a space: first forced as "Bonjour,"
    ours = translator.translate(TEXTS, SRC, TGT, translator.default_options(**options), starts=starts)
    plain = hf_completion(hf_model, hf_tokenizer, TEXTS[0], [], options)
    assert ours[0] == plain
    tok = translator.tokenizer
    assert ours[2] == hf_completion(hf_model, hf_tokenizer, TEXTS[2], tok.encode_target_start("Le chat,"), options)
    assert ours[2].startswith("Le chat,")
    first = hf_completion(hf_model, hf_tokenizer, TEXTS[1], tok.encode_target_start("Bonjour,"), options)
    whole = hf_completion(hf_model, hf_tokenizer, TEXTS[1], tok.encode_target_start("Bonjour, "), options)
    expected = first if first.startswith("Bonjour, ") else "Bonjour, " + whole.removeprefix("Bonjour, ")
    assert ours[1] == expected


def mid_word_starts(text):
    """(`text` cut two letters into a word after a space, the words before that word), for each such word."""
    return [(text[: at + 3], text[:at]) for at, char in enumerate(text) if char == " " and text[at + 1 : at + 3].isalpha()]


@pytest.mark.parametrize("beams", [1, 4])
def test_a_start_ending_within_a_word_lets_the_model_write_the_word(translator, hf_model, hf_tokenizer, beams):
    """Typed "<words> <part of a word>": first forced without the part, and kept when the model's
    word begins with it; else the part is forced in its own pieces. Both cases, from the model's own words."""
    options = dict(num_beams=beams, max_length=30)
    tok = translator.tokenizer

    def agreeing():
        """(text, typed start, HF's completion of the words before the part) where that completion keeps the part."""
        for text in TEXTS:
            plain = hf_completion(hf_model, hf_tokenizer, text, [], options)
            for typed, head in mid_word_starts(plain):
                free = hf_completion(hf_model, hf_tokenizer, text, tok.encode_target_start(head), options)
                if free.startswith(typed):
                    return text, typed, free
        pytest.fail("the checkpoint writes no word after a space that its own start continues")

    text, typed, free = agreeing()
    straying = typed[:-2] + ("zq" if not typed.endswith("zq") else "qz")  # a part the model does not write
    ours = translator.translate([text, text], SRC, TGT, translator.default_options(**options),
                                starts=[typed, straying])
    assert ours[0] == free
    assert ours[1] == hf_completion(hf_model, hf_tokenizer, text, tok.encode_target_start(straying), options)
    assert ours[1].startswith(straying)


def test_a_start_within_the_first_word_is_the_plain_translation_when_it_begins_so(translator):
    options = translator.default_options(num_beams=4, max_length=30)
    plain = translator.translate(TEXTS, SRC, TGT, options)
    typed = [text[:2] if text[:2].isalpha() else None for text in plain]
    assert any(typed)
    assert translator.translate(TEXTS, SRC, TGT, options, starts=typed) == plain


def test_the_typed_start_comes_back_exactly_as_typed(translator):
    typed = "  Le   chat,"  # spaces the tokenizer squeezes and drops
    [ours] = translator.translate([TEXTS[0]], SRC, TGT, translator.default_options(num_beams=2, max_length=20),
                                  starts=[typed])
    assert ours.startswith(typed)


def test_partial_results_of_a_completion_start_with_the_typed_start(translator):
    seen = []
    [ours] = translator.translate([TEXTS[0]], SRC, TGT, translator.default_options(num_beams=4, max_length=20),
                                  on_partial=lambda i, text: seen.append(text), starts=["Le ch"])
    assert seen and all(text.startswith("Le ch") for text in seen)
    assert ours.startswith("Le ch")


def test_a_start_that_leaves_no_room_within_max_length_is_refused_in_one_line(translator):
    options = translator.default_options(num_beams=1, max_length=8)
    start = "un deux trois quatre cinq six sept huit"
    with pytest.raises(OptionsError, match=r"^start of \d+ tokens leaves nothing to complete within max_length 8"):
        translator.translate([TEXTS[0]], SRC, TGT, options, starts=[start])


def test_a_start_for_a_text_too_long_to_read_at_once_is_refused_in_one_line(translator):
    long_text = "word " * (translator.generator.model.max_positions + 8)
    with pytest.raises(OptionsError, match=r"^start cannot complete a text of more than the model's \d+ source tokens$"):
        translator.translate([long_text], SRC, TGT, translator.default_options(num_beams=1, max_length=8),
                             starts=["Le"])
