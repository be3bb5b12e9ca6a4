"""app/session/session.py: the pipeline's own parts (recent translations, a document yielding to typed
text) and the terms that alternatives and completions keep, on the real engine."""

import pytest

from dragoman.app.session.glossary import read_glossary
from dragoman.app.session.session import RecentTranslations, TranslationJob, TranslationSession, TypedTextFirst, YieldingTranslator
from dragoman.app.session.terms import Terms

OPTIONS = {"num_beams": 4, "max_length": 40}
MANY_LINES = [f"The small dog {i} sees the green river tomorrow." for i in range(24)]
SENTENCE = "Save the file before you go."


@pytest.fixture
def glossary(tmp_path):
    path = tmp_path / "terms.csv"
    path.write_text("source,target\nsave,enregistrer\nfile,fichier\n", encoding="utf-8")
    return read_glossary(path)


def test_recent_translations_forget_the_least_recently_used(translator, monkeypatch):
    session = TranslationSession(translator)
    session.recent = RecentTranslations(capacity=2)
    decoded = []
    translate = translator.translate
    monkeypatch.setattr(translator, "translate",
                        lambda texts, *args, **kwargs: decoded.append(list(texts)) or translate(texts, *args, **kwargs))
    options = translator.default_options(**OPTIONS)

    def run(texts):
        return session.translate(TranslationJob(texts, "eng_Latn", "fra_Latn", OPTIONS)).translations

    assert run(["One.", "Two."]) == translate(["One.", "Two."], "eng_Latn", "fra_Latn", options)
    run(["Two.", "Three."])  # "One." is now the least recently used of three: dropped
    assert run(["One.", "Two.", "Three."]) == translate(["One.", "Two.", "Three."], "eng_Latn", "fra_Latn", options)
    assert decoded == [["One.", "Two."], ["Three."], ["One."]]


class TypedTextArriving:
    """Typed text that "arrives" once `after` of the document's sentences are in `reported`, and is run once."""

    def __init__(self, reported: dict, after: int):
        self.reported, self.after, self.paused = reported, after, 0
        self.first = TypedTextFirst(self.waiting, self.run)

    def waiting(self) -> bool:
        return self.paused == 0 and len(self.reported) >= self.after

    def run(self) -> None:
        self.paused += 1


def test_a_document_paused_for_typed_text_reports_each_result_under_its_own_index(translator):
    reported = {}
    typed = TypedTextArriving(reported, after=3)
    options = translator.default_options(**OPTIONS)
    results = YieldingTranslator(translator, typed.first).translate(
        MANY_LINES, "eng_Latn", "fra_Latn", options, on_result=lambda i, text: reported.setdefault(i, text))
    assert typed.paused == 1
    assert results == translator.translate(MANY_LINES, "eng_Latn", "fra_Latn", options)
    assert reported == dict(enumerate(results))


def test_a_document_paused_for_typed_text_gives_each_text_its_own_terms_again(translator, monkeypatch):
    calls = []
    translate = translator.translate
    monkeypatch.setattr(translator, "translate", lambda texts, *a, terms=None, **k: calls.append(
        dict(zip(texts, terms))) or translate(texts, *a, terms=terms, **k))
    reported = {}
    typed = TypedTextArriving(reported, after=2)
    terms = [[f"term {i}"] for i in range(len(MANY_LINES))]
    YieldingTranslator(translator, typed.first).translate(
        MANY_LINES, "eng_Latn", "fra_Latn", translator.default_options(**OPTIONS),
        on_result=lambda i, text: reported.setdefault(i, text), terms=terms)
    assert typed.paused == 1 and len(calls) == 2 and len(calls[1]) < len(MANY_LINES)
    assert all(given == [f"term {MANY_LINES.index(text)}"] for call in calls for text, given in call.items())


def test_alternatives_keep_the_sentences_terms(translator, glossary):
    job = TranslationJob([SENTENCE], "eng_Latn", "fra_Latn", OPTIONS)
    plain = TranslationSession(translator).alternatives(job, SENTENCE)
    assert not all("enregistrer" in t.text for t in plain)  # the random model does not say it by itself
    found = TranslationSession(translator, terms=Terms((glossary,))).alternatives(job, SENTENCE)
    assert len(found) >= 2
    assert all("enregistrer" in t.text and "fichier" in t.text for t in found)


def test_a_completion_keeps_the_sentences_terms_and_the_persons_start(translator, glossary):
    session = TranslationSession(translator, terms=Terms((glossary,)))
    job = TranslationJob([SENTENCE], "eng_Latn", "fra_Latn", OPTIONS, completion=(0, "Vite,"))
    [completed] = session.translate(job).translations
    assert completed.startswith("Vite,") and "enregistrer" in completed and "fichier" in completed


def test_a_translation_a_person_accepts_comes_back_from_the_memory_undoubted(translator, tmp_path):
    from dragoman.app.session.translation_memory import TranslationMemory

    session = TranslationSession(translator, memory=TranslationMemory(tmp_path / "memory.sqlite3"))
    job = TranslationJob(["The quick brown fox jumps over the lazy dog."], "eng_Latn", "fra_Latn", OPTIONS)
    session.accept(job, job.texts[0], "Le renard saute.")
    result = session.translate(job)
    assert result.lines() == ["Le renard saute."] and result.doubts == [[]] and result.found == [None]
    session.close()


def test_segments_held_in_memory_are_translated_as_a_documents(translator, paths, tmp_path):
    from dragoman.app.documents.html import MarkupFragment
    from dragoman.app.session.jobs import DocumentJob, JobReport

    html = '<p>Hello <b>world</b>, how are you?</p><p>The cat sleeps.</p>'
    page = tmp_path / "page.html"
    page.write_text(f"<html><body>{html}</body></html>", encoding="utf-8")
    session = TranslationSession.open(translator, paths)
    try:
        written = session.translate_document(DocumentJob(page, tmp_path / "page.fra_Latn.html", "eng_Latn", "fra_Latn",
                                                         OPTIONS))
        fragment = MarkupFragment(html)
        report = JobReport()
        job = DocumentJob(page, page, "eng_Latn", "fra_Latn", OPTIONS)
        translated = fragment.text(session.translate_segments(job, fragment.segments, report))
    finally:
        session.close()
    assert "<b>" in translated and translated in written.read_text(encoding="utf-8")
    assert report.sentences == report.cached > 0  # the document's cache: the page translated them first
