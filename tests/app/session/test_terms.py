"""app/session/terms.py: a sentence's terms, what reaches the engine from a document job, and the cache key."""

from dataclasses import replace

import pytest

from dragoman.app.documents.segments import PLACEHOLDER_TAG
from dragoman.app.session.glossary import read_glossary
from dragoman.app.session.jobs import DocumentJob, JobReport
from dragoman.app.session.session import TranslationJob, TranslationSession
from dragoman.app.session.terms import (FIXED_POSITIONS, GlossaryPair, Marks, Terms, cache_text, glossary_pairs,
                                        token_bound)
from dragoman.engine.translation_cache import TranslationCache

def translate_document(job, translator, cache, terms=None, **kwargs):
    """`job` through a pipeline over `translator` and `cache` (no translation memory)."""
    return TranslationSession(translator, cache, terms=terms).translate_document(job, **kwargs)


@pytest.fixture
def glossary(tmp_path):
    path = tmp_path / "terms.csv"
    path.write_text("source,target,source_lang,target_lang\nsave,enregistrer,eng_Latn,fra_Latn\n"
                    "file,fichier,,\nwww.example.com,example.fr,eng_Latn,fra_Latn\n"
                    "save,speichern,eng_Latn,deu_Latn\n", encoding="utf-8")
    return read_glossary(path)


class RecordingTranslator:
    """The real engine, with the texts and terms of each translate or translate_full call kept."""

    def __init__(self, translator):
        self.translator = translator
        self.calls: list[tuple[list[str], list[list[str]] | None]] = []

    def __getattr__(self, name):
        return getattr(self.translator, name)

    def translate(self, texts, *args, terms=None, **kwargs):
        self.calls.append((list(texts), terms))
        return self.translator.translate(texts, *args, terms=terms, **kwargs)

    def translate_full(self, texts, *args, terms=None, **kwargs):
        self.calls.append((list(texts), terms))
        return self.translator.translate_full(texts, *args, terms=terms, **kwargs)


def test_a_sentences_terms_are_its_glossary_targets_and_protected_spans_in_source_order(glossary):
    terms = Terms((glossary,), do_not_translate=("Dragoman",)).for_pair("eng_Latn", "fra_Latn")
    sentence = "Save the FILE to https://a.org/x, dragoman costs $5.99 for 5 kg; mail bob@a.org."
    assert terms.of(sentence) == ["enregistrer", "fichier", "https://a.org/x", "dragoman", "$5.99", "5 kg", "bob@a.org"]
    assert terms.of("Nothing to keep here.") == []
    # the pair decides: the German entry for the same word, and the entries for any pair
    assert Terms((glossary,)).for_pair("eng_Latn", "deu_Latn").of("save the file") == ["speichern", "fichier"]


def test_the_glossary_wins_where_it_overlaps_a_protected_span(glossary):
    terms = Terms((glossary,)).for_pair("eng_Latn", "fra_Latn")
    assert terms.of("See www.example.com today.") == ["example.fr"]


def test_no_protect_keeps_only_the_glossary_and_the_users_list(glossary):
    terms = Terms((glossary,), do_not_translate=("Dragoman",), protect=False).for_pair("eng_Latn", "fra_Latn")
    assert terms.of("Dragoman saves 5 kg at https://a.org and the file.") == ["Dragoman", "fichier"]


def test_a_disabled_pair_of_a_glossary_gives_no_terms(glossary):
    pairs = glossary_pairs(glossary)
    assert pairs == {GlossaryPair("terms.csv", "eng_Latn", "fra_Latn"): 2, GlossaryPair("terms.csv", None, None): 1,
                     GlossaryPair("terms.csv", "eng_Latn", "deu_Latn"): 1}
    off = Terms((glossary,), disabled=frozenset({GlossaryPair("terms.csv", "eng_Latn", "fra_Latn")}))
    assert off.for_pair("eng_Latn", "fra_Latn").of("save the file") == ["fichier"]


def test_a_document_sentences_tags_are_one_chain_and_crowded_terms_keep_the_tags_first(glossary):
    terms = Terms((glossary,)).for_pair("eng_Latn", "fra_Latn")
    sentence = "Click <x1>save</x1> to keep the file <x2/> of 5 kg."
    tags = ("<x1>", None, "</x1>", "<x2/>")  # in the source's order, a gap for the pair's words
    assert terms.of(sentence, tagged=True) == [tags, "enregistrer", "fichier", "5 kg"]
    assert terms.of(sentence) == ["enregistrer", "fichier", "5 kg"]  # typed text has no tags
    assert terms.of("No tags here.", tagged=True) == []
    bound = sum(map(token_bound, ("<x1>", "</x1>", "<x2/>"))) + 1  # the gap takes a token at least
    room = FIXED_POSITIONS + bound + token_bound("enregistrer")
    assert terms.of(sentence, tagged=True, max_length=room) == [tags, "enregistrer"]
    # one position less: the first glossary term no longer fits, a shorter one after it does
    assert terms.of(sentence, tagged=True, max_length=room - 1) == [tags, "fichier"]
    assert terms.of(sentence, tagged=True, max_length=FIXED_POSITIONS + bound) == [tags]
    # too little room for all the tags: none of them, since one missing is as bad as all
    assert terms.of(sentence, tagged=True, max_length=FIXED_POSITIONS + bound - 1) == ["enregistrer"]
    assert cache_text(sentence, [tags]) != cache_text(sentence, ["<x1>", "</x1>", "<x2/>"]), "a chain keys apart"
    assert terms.of("An <x1> </x1> empty pair.", tagged=True) == [("<x1>", "</x1>")]  # no words: no gap


def test_a_text_the_model_might_not_read_at_once_gets_no_terms(glossary, translator, tmp_path):
    terms = Terms((glossary,)).for_pair("eng_Latn", "fra_Latn")
    short = "Save the file."
    assert terms.of(short, max_positions=token_bound(short) + 2) == ["enregistrer", "fichier"]
    assert terms.of(short, max_positions=token_bound(short) + 1) == []
    # in a document: the engine would cut such a text in pieces, where no term can be kept
    positions = translator.config.max_position_embeddings
    long = "Save " + ", ".join(["the file"] * (positions // 8)) + "."  # one sentence, longer than the positions
    source = tmp_path / "in.txt"
    source.write_text(f"{long}\n\nSave the file now.\n", encoding="utf-8")
    recording = RecordingTranslator(translator)
    job = DocumentJob(source, tmp_path / "out.txt", "eng_Latn", "fra_Latn", options={"num_beams": 1, "max_length": 40},
                      overwrite=True)
    translate_document(job, recording, None, terms=Terms((glossary,)))
    assert recording.calls == [([long, "Save the file now."], [[], ["enregistrer", "fichier"]])]


def test_the_cache_text_is_the_sentence_itself_without_terms():
    assert cache_text("Save it.", []) == "Save it."
    assert cache_text("Save it.", ["enregistrer"]) != cache_text("Save it.", [])
    assert cache_text("Save it.", ["a", "b"]) != cache_text("Save it.", ["b", "a"])


def test_a_document_job_hands_each_sentence_its_terms_and_the_cache_keys_on_them(translator, glossary, tmp_path):
    source = tmp_path / "in.md"
    source.write_text("Save the report.\n\nClick **here** to go on.\n\nRead the rest.\n", encoding="utf-8")
    job = DocumentJob(source, tmp_path / "out.md", "eng_Latn", "fra_Latn",
                      options={"num_beams": 2, "max_length": 24}, overwrite=True)
    cache = TranslationCache(tmp_path / "cache.sqlite3")
    recording = RecordingTranslator(translator)
    with_glossary = Terms((glossary,))

    translate_document(job, recording, cache)
    [(texts, terms)] = recording.calls
    assert dict(zip(texts, terms)) == {"Save the report.": [], "Click <x1>here</x1> to go on.": [("<x1>", None, "</x1>")],
                                       "Read the rest.": []}

    recording.calls.clear()
    translate_document(job, recording, cache, terms=with_glossary)
    assert recording.calls == [(["Save the report."], [["enregistrer"]])]  # the others mean the same: cached

    recording.calls.clear()
    translate_document(job, recording, cache, terms=with_glossary)
    translate_document(job, recording, cache)
    assert recording.calls == []  # each kind of translation is reused with its own terms only
    cache.close()


def test_typed_text_in_the_worker_hands_its_sentences_their_terms(translator, glossary, qtbot, paths):
    from dragoman.app.session.session import TranslationJob
    from dragoman.app.window.worker import EngineWorker
    from recorder import Recorder

    worker = EngineWorker(paths=paths)
    recording = RecordingTranslator(translator)
    worker.pipeline = TranslationSession(recording)
    worker.set_terms(Terms((glossary,)))
    events = Recorder(worker)
    worker.start()
    try:
        job = TranslationJob(["Save it. It weighs 5 kg now."], "eng_Latn", "fra_Latn", {"num_beams": 1, "max_length": 20})
        events.wait(qtbot, "translated", worker.submit(job))
        events.wait(qtbot, "translated", worker.submit(job))  # the same sentences and terms: recent translations
        worker.set_terms(Terms())
        events.wait(qtbot, "translated", worker.submit(job))
    finally:
        worker.pipeline = None
        worker.stop()
        worker.wait()
    # the number with its unit is a mark the tiny vocabulary spells (it has no `<`), its bytes put back after
    assert recording.calls == [(["Save it.", "It weighs (1) now."], [["enregistrer"], ["(1)"]]),
                               (["Save it."], [[]])]  # without the glossary: only the sentence it changed


def test_a_document_job_reports_the_sentences_whose_formatting_was_placed_by_proportion(translator, tmp_path):
    source = tmp_path / "in.md"
    source.write_text("Click **here** to go on.\n\nPress *Save* and **wait** a bit.\n\nPlain words only.\n"
                      "\nClick **here** to go on.\n", encoding="utf-8")
    job = DocumentJob(source, tmp_path / "out.md", "eng_Latn", "fra_Latn",
                      options={"num_beams": 1, "max_length": 24}, overwrite=True)
    recording = RecordingTranslator(translator)
    report = JobReport()
    translate_document(job, recording, None, report=report)
    [(texts, _)] = recording.calls
    results = translator.translate(texts, "eng_Latn", "fra_Latn", translator.default_options(**job.options),
                                   terms=recording.calls[0][1])
    lost = sum(1 for text, result in zip(texts, results)
               if PLACEHOLDER_TAG.search(text) and PLACEHOLDER_TAG.findall(result) != PLACEHOLDER_TAG.findall(text))
    assert report.proportional == lost  # each distinct tagged sentence once, the repeated one too


def keeps(translator, term: str) -> bool:
    """Whether the engine puts `term` in a translation (the constrained search, and a vocabulary that can write it)."""
    [text] = translator.translate(["Hello."], "eng_Latn", "fra_Latn", translator.default_options(max_length=20),
                                  terms=[[term]])
    return term in text


def around_nothing(tags: list[str], result: str) -> bool | None:
    """Whether a pair of `tags`, each taken where it first comes after the one before, holds no words
    in `result`; None when they are not all there in order."""
    at, opened, empty = 0, {}, False
    for tag in tags:
        start = result.find(tag, at)
        if start < 0:
            return None
        at = start + len(tag)
        if tag.startswith("</"):
            empty |= not result[opened[tag[2:]] : start].strip()
        else:
            opened[tag[1:]] = at
    return empty


def test_with_constraints_every_tag_of_a_document_sentence_comes_back_in_order_and_none_is_placed_by_proportion(
        tag_translator, tmp_path):
    """The tags come back in the source's order, each at least once, each pair around some words
    (the chain's gaps): no sentence's formatting is placed by proportion."""
    if not keeps(tag_translator, "<x1>"):
        pytest.skip("the engine does not keep terms (constrained search) in this build")
    source = tmp_path / "in.md"
    source.write_text("Click **here** to go on.\n\nPress *Save* and **wait** a bit.\n\n"
                      "A [link](https://example.org) and `code` here.\n\nSee *this*, **that** and *the other* one.\n",
                      encoding="utf-8")
    recording = RecordingTranslator(tag_translator)
    for beams in (1, 4):
        job = DocumentJob(source, tmp_path / "out.md", "eng_Latn", "fra_Latn",
                          options={"num_beams": beams, "max_length": 40}, overwrite=True)
        recording.calls.clear()
        report = JobReport()
        translate_document(job, recording, None, report=report)
        [(texts, terms)] = recording.calls
        results = tag_translator.translate(texts, "eng_Latn", "fra_Latn", tag_translator.default_options(**job.options),
                                           terms=terms)
        tagged = [(text, result) for text, result in zip(texts, results) if "<x" in text]
        assert len(tagged) == 4
        for text, result in tagged:
            assert around_nothing(PLACEHOLDER_TAG.findall(text), result) is False, (text, result)
        assert report.proportional == 0, beams
        written = (tmp_path / "out.md").read_text(encoding="utf-8")
        assert written.count("**") == 6 and "https://example.org" in written and "`code`" in written


def test_with_constraints_glossary_and_protected_terms_appear_in_the_translation(translator, glossary):
    if not keeps(translator, "chat"):
        pytest.skip("the engine does not keep terms (constrained search) in this build")
    terms = Terms((glossary,)).for_pair("eng_Latn", "fra_Latn")
    texts = ["Save the file now.", "The cat weighs 5 kg and 42% more.", "A plain sentence."]
    options = translator.default_options(num_beams=4, max_length=40)
    wanted = [terms.of(t, max_length=options.length, max_positions=translator.config.max_position_embeddings)
              for t in texts]
    assert wanted == [["enregistrer", "fichier"], ["5 kg", "42%"], []]
    for beams in (1, 4):
        options = translator.default_options(num_beams=beams, max_length=40)
        for text, translation, must in zip(texts, translator.translate(texts, "eng_Latn", "fra_Latn", options,
                                                                       terms=wanted), wanted):
            assert all(term in translation for term in must), (text, translation, must)


UNSPELLED = "Read http://www.perl.org/~x?a=1&b={id} or mail bob@a-b.org, it costs 5 €."  # `/ ~ & { } @ €`: not in the tiny vocabulary


def test_verbatim_spans_come_back_byte_for_byte_whatever_the_vocabulary(translator):
    assert not translator.spells("http://www.perl.org/")  # forced through the vocabulary, it lost its slashes
    recording = RecordingTranslator(translator)
    job = TranslationJob([UNSPELLED], "eng_Latn", "fra_Latn", {"num_beams": 2, "max_length": 40}, split=False)
    [result] = TranslationSession(recording).translate(job).translations
    for span in ("http://www.perl.org/~x?a=1&b=", "{id}", "bob@a-b.org", "5 €"):  # a URL ends at a brace
        assert result.count(span) == 1
    [(texts, terms)] = recording.calls
    assert texts == ["Read (1)(2) or mail (3), it costs (4)."] and terms == [["(1)", "(2)", "(3)", "(4)"]]
    assert all(mark not in result for mark in terms[0])


def test_alternatives_and_completions_give_verbatim_spans_back_byte_for_byte(translator):
    recording = RecordingTranslator(translator)
    pipeline = TranslationSession(recording)
    job = TranslationJob([UNSPELLED], "eng_Latn", "fra_Latn", {"num_beams": 2, "max_length": 40}, split=False)
    found = pipeline.alternatives(job, UNSPELLED, 2)
    assert len(found) == 2 and all(t.text.count("bob@a-b.org") == 1 and "(3)" not in t.text for t in found)
    start = "Lire http://www.perl.org/~x?a=1&b="  # the person typed the URL: the model reads its mark
    streamed = []
    result = pipeline.translate(replace(job, completion=(0, start)), lambda i, text: streamed.append(text))
    [completed] = result.translations
    assert completed.startswith(start) and completed.count("bob@a-b.org") == 1
    assert all("(1)" not in text for text in streamed)
    assert [texts for texts, _ in recording.calls] == [["Read (1)(2) or mail (3), it costs (4)."]] * 2


def test_a_mark_is_one_the_sentence_does_not_hold_and_comes_back_once_where_the_model_put_it(translator):
    marks = Marks.for_translator(translator)
    masked = Terms().for_pair("eng_Latn", "fra_Latn").mask("See (1) at www.a.org/x now.", marks)
    assert masked.text == "See (1) at (2) now." and masked.terms == ["(2)"]
    assert masked.restore("Voir (1) à(2)ici (2).") == "Voir (1) à www.a.org/x ici ."
    assert masked.restore("Voir (1) ici") == "Voir (1) ici www.a.org/x"  # the model lost it: not the bytes
    assert masked.restore("Voir (1) ici", partial=True) == "Voir (1) ici"


def test_text_with_nothing_to_translate_never_reaches_the_model(translator, tmp_path):
    recording = RecordingTranslator(translator)
    pipeline = TranslationSession(recording)
    texts = ["https://example.org/a_b", "bob@a-b.org", "5 kg", "{name}"]
    job = TranslationJob(texts, "eng_Latn", "fra_Latn", {"num_beams": 1, "max_length": 20})
    assert pipeline.translate(job).lines() == texts
    assert [t.text for t in pipeline.alternatives(job, texts[0])] == [texts[0]] and recording.calls == []
    # in a document: a paragraph, a table cell that is only a URL
    source = tmp_path / "in.html"
    source.write_text("<html><body><p>https://example.org/a_b?x=1</p><table><tr><td>mail@a-b.org</td></tr></table>"
                      "<p>Read https://example.org/a_b?x=1 today.</p></body></html>", encoding="utf-8")
    job = DocumentJob(source, tmp_path / "out.html", "eng_Latn", "fra_Latn", options={"num_beams": 1, "max_length": 30},
                      overwrite=True)
    translate_document(job, recording, None)
    [(sent, _)] = recording.calls
    assert sent == ["Read (1) today."]
    out = (tmp_path / "out.html").read_text(encoding="utf-8")
    assert "<p>https://example.org/a_b?x=1</p>" in out and "<td>mail@a-b.org</td>" in out
    assert out.count("https://example.org/a_b?x=1") == 2
