"""`Translator.translate(..., terms=...)`: terms tokenized as they stand in running text, every term
in the translation (greedy and beams, one and several, overlapping and conflicting ones), a chain's
segments in its order, texts
without terms exactly as `generate` gives them, terms that cannot fit refused in one line."""

import pytest
from reference_search import hf_generate

from dragoman.engine.decoding import OptionsError
from dragoman.engine.translator import term_ids

TEXTS = ["The quick brown fox jumps over the lazy dog.", "Привет, как дела?", "Ein kurzer Satz",
         "Bonjour, comment allez-vous aujourd'hui ?"]


def contains(ids, part):
    return any(ids[i : i + len(part)] == part for i in range(len(ids) - len(part) + 1))


def test_a_term_is_tokenized_as_it_stands_in_running_text(translator):
    tok = translator.tokenizer
    # mid-sentence and at the start: word-initial, as the words of a sentence are
    assert contains(tok.encode_target_start("le chat noir"), term_ids(tok, "chat", "fra_Latn"))
    assert tok.encode_target_start("Bonjour le monde")[:5] == term_ids(tok, "Bonjour", "fra_Latn")
    # a script written without spaces: no word-initial piece, the pieces it has after other text
    chinese = term_ids(tok, "明天", "zho_Hans")
    assert contains(tok.encode_target_start("我们明天去。"), chinese)
    assert chinese != tok.encode_target_start("明天") and tok.decode(chinese) == "明天"
    # a tag glued to the word before it
    tag, word = term_ids(tok, "</x1>", "fra_Latn"), tok.encode_target_start("Bonjour")
    assert tok.encode_target_start("Bonjour</x1>") == word + tag
    assert tag != tok.encode_target_start("</x1>")


CASES = {
    "one term": [["chat"]],
    "three terms": [["chat", "bonjour le monde", "rouge"]],
    "overlapping": [["le chat", "chat noir"]],  # may share "chat": "le chat noir"
    "conflicting": [["le chat", "le monde"]],  # both continue "le"
    "a script without spaces": [["明天", "我"]],
}


@pytest.mark.parametrize("num_beams", [1, 4])
@pytest.mark.parametrize("case", CASES)
def test_every_term_appears_in_the_translation(translator, num_beams, case):
    tgt = "zho_Hans" if case == "a script without spaces" else "fra_Latn"
    terms = CASES[case] * len(TEXTS)
    options = translator.default_options(num_beams=num_beams, max_length=48)
    plain = translator.translate(TEXTS, "eng_Latn", tgt, options)
    ours = translator.translate(TEXTS, "eng_Latn", tgt, options, terms=terms)
    for text, translation, own in zip(TEXTS, ours, terms):
        assert all(term in translation for term in own), (text, translation)
    assert ours != plain


@pytest.mark.parametrize("num_beams", [1, 4])
def test_texts_without_terms_are_translated_as_generate_translates_them(translator, hf_model, hf_tokenizer, num_beams):
    terms = [["chat"], [], ["", "  "], None]  # none, blank ones, and a list shorter than the texts
    options = dict(num_beams=num_beams, max_length=40)
    ours = translator.translate(TEXTS, "eng_Latn", "fra_Latn", translator.default_options(**options), terms=terms)
    assert "chat" in ours[0]
    for text, translation in zip(TEXTS[1:], ours[1:]):
        [expected] = hf_generate(hf_model, hf_tokenizer, text, "eng_Latn", "fra_Latn", **options)
        assert translation == hf_tokenizer.decode(expected, skip_special_tokens=True), text


def test_terms_that_cannot_fit_within_max_length_are_refused_in_one_line(translator):
    options = translator.default_options(num_beams=2, max_length=8)
    with pytest.raises(OptionsError) as error:
        translator.translate(TEXTS[:2], "eng_Latn", "fra_Latn", options, terms=[[], ["bonjour le monde"]])
    assert str(error.value).startswith("terms of text 2: need up to 11 tokens, but max_length 8 leaves 6")
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("num_beams", [1, 4])
def test_a_constrained_translation_carries_its_score_and_alternatives_that_keep_the_terms(translator, num_beams):
    """Scores and alternatives (translate_full) of constrained sentences: every alternative is a
    finished hypothesis, which meets every constraint, best first; greedy's score is its
    finished hypothesis's normalised score, a per-token figure as for plain sentences."""
    options = translator.default_options(num_beams=num_beams, max_length=48)
    terms = [["chat", "rouge"]] * len(TEXTS)
    full = translator.translate_full(TEXTS, "eng_Latn", "fra_Latn", options, terms=terms, alternatives=num_beams)
    plain = translator.translate_full(TEXTS, "eng_Latn", "fra_Latn", options)
    for ours, theirs in zip(full, plain):
        assert "chat" in ours.text and "rouge" in ours.text
        assert all("chat" in a.text and "rouge" in a.text for a in ours.alternatives)
        scores = [ours.score] + [a.score for a in ours.alternatives]
        assert scores == sorted(scores, reverse=True) and len(ours.alternatives) == num_beams - 1
        # forcing words the model would not write costs log-probability per token, within reason
        assert theirs.score - 20 < ours.score <= theirs.score + 1e-4


def in_order(text, segments):
    at = 0
    for segment in segments:
        at = text.find(segment, at)
        if at < 0:
            return False
        at += len(segment)
    return True


CHAINS = {
    "two segments": [("rouge", "chat")],
    "with a gap": [("le", None, "chat")],
    "three segments beside a term": [("le", "monde", "le"), "chat"],
    "as a list, sharing a word": [["chat noir", "chat"]],
}


@pytest.mark.parametrize("num_beams", [1, 4])
@pytest.mark.parametrize("case", CHAINS)
def test_every_chains_segments_appear_in_order(translator, num_beams, case):
    terms = [CHAINS[case]] * len(TEXTS)
    options = translator.default_options(num_beams=num_beams, max_length=48)
    for text, translation in zip(TEXTS, translator.translate(TEXTS, "eng_Latn", "fra_Latn", options, terms=terms)):
        for term in CHAINS[case]:
            assert in_order(translation, [term] if isinstance(term, str) else [t for t in term if t]), (text, translation)


def test_a_chain_is_not_the_same_terms_unordered(translator):
    """Without the chain the model is free to write the words in any order; the chain's order holds."""
    options = translator.default_options(num_beams=4, max_length=48)
    loose = translator.translate(TEXTS, "eng_Latn", "fra_Latn", options, terms=[["chat", "rouge"]] * len(TEXTS))
    chained = translator.translate(TEXTS, "eng_Latn", "fra_Latn", options, terms=[[("chat", "rouge")]] * len(TEXTS))
    assert all(in_order(t, ["chat", "rouge"]) for t in chained)
    assert not all(in_order(t, ["chat", "rouge"]) for t in loose), "the tiny model writes some the other way round"


@pytest.mark.parametrize("num_beams", [1, 4])
def test_a_gap_holds_something_that_shows(translator, num_beams):
    options = translator.default_options(num_beams=num_beams, max_length=48)
    for translation in translator.translate(TEXTS, "eng_Latn", "fra_Latn", options,
                                            terms=[[("chat", None, "rouge")]] * len(TEXTS)):
        start = translation.index("chat") + len("chat")
        assert translation[start : translation.index("rouge", start)].strip(), translation
    tok = translator.tokenizer
    assert tok.lang_id("fra_Latn") in translator._shows_nothing and tok.eos_id not in translator._shows_nothing


def test_texts_with_terms_are_decoded_after_those_without(translator, monkeypatch):
    """Steps mixing constrained and plain groups run every search eagerly: a document's texts
    with terms are fed after its plain ones, whatever their places, and come back in place."""
    fed = []
    run = translator.generator.run

    def recording(requests, feed=None, *rest):
        fed.extend(bool(r.constraints) for r in requests)

        def recorded(idle):
            more = feed(idle)
            fed.extend(bool(r.constraints) for r in more or [])
            return more

        return run(requests, recorded if feed is not None else None, *rest)

    monkeypatch.setattr(translator.generator, "run", recording)
    texts = TEXTS * 20
    terms = [["chat"] if i % 3 == 0 else [] for i in range(len(texts))]
    options = translator.default_options(num_beams=1, max_length=32)
    ours = translator.translate(texts, "eng_Latn", "fra_Latn", options, terms=terms)
    assert fed == sorted(fed) and any(fed) and not all(fed)  # every plain text before the first with terms
    assert all("chat" in t for t, own in zip(ours, terms) if own)
    monkeypatch.undo()
    assert ours == [translator.translate([t], "eng_Latn", "fra_Latn", options, terms=[own])[0]
                    for t, own in zip(texts, terms)]


def test_a_texts_terms_are_compiled_once(translator, monkeypatch):
    from dragoman.engine.constraints import Constraints

    compiled = []
    original = Constraints.__init__

    def counting(self, sequences, eos_id):
        compiled.append(sequences)
        original(self, sequences, eos_id)

    monkeypatch.setattr(Constraints, "__init__", counting)
    terms = [["chat"], [], ["chien", "maison"]]
    translations = translator.translate(TEXTS[:3], "eng_Latn", "fra_Latn",
                                        translator.default_options(num_beams=2, max_length=32), terms=terms)
    assert "chat" in translations[0] and "chien" in translations[2]
    assert len(compiled) == 2  # the translator's, which the generator takes as they are

    compiled.clear()  # texts sharing their terms (a document's marks) share one compilation
    shared = [["chien", "maison"], ["chat"], ["chien", "maison"], ["chat"]]
    again = translator.translate(TEXTS[:4], "eng_Latn", "fra_Latn",
                                 translator.default_options(num_beams=2, max_length=32), terms=shared)
    assert len(compiled) == 2 and "chien" in again[2] and "maison" in again[2] and "chat" in again[3]
    alone = translator.translate(TEXTS[2:4], "eng_Latn", "fra_Latn",
                                 translator.default_options(num_beams=2, max_length=32), terms=shared[2:])
    assert again[2:] == alone


def test_a_text_with_terms_is_tokenized_once(translator, monkeypatch):
    """Submitting checks that a text with terms fits the model's positions; its decoding takes the
    ids that check made rather than tokenizing the text again."""
    tokenized = []
    encode_source = translator.tokenizer.encode_source

    def counting(text, src_lang):
        tokenized.append(text)
        return encode_source(text, src_lang)

    monkeypatch.setattr(translator.tokenizer, "encode_source", counting)
    terms = [["chat"], [], ["chien", "maison"]]
    translations = translator.translate(TEXTS[:3], "eng_Latn", "fra_Latn",
                                        translator.default_options(num_beams=2, max_length=32), terms=terms)
    assert "chat" in translations[0] and "chien" in translations[2]
    assert sorted(tokenized) == sorted(TEXTS[:3])
