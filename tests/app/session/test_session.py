"""app/session/session.py: the pipeline's own parts (recent translations, typed text beside a running
document) and the terms that alternatives and completions keep, on the real engine."""

import threading

import pytest

from dragoman.app.session.glossary import read_glossary
from dragoman.app.session.jobs import DocumentJob
from dragoman.app.session.session import RecentTranslations, TranslationJob, TranslationSession
from dragoman.engine import DOCUMENT, TYPED
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
    pipeline = TranslationSession(translator)
    pipeline.recent = RecentTranslations(capacity=2)
    decoded = []
    translate, translate_full = translator.translate, translator.translate_full

    def recording(texts, *args, priority=DOCUMENT, **kwargs):
        if priority == TYPED:  # the pipeline's calls, not this test's own below
            decoded.append(list(texts))
        return translate_full(texts, *args, priority=priority, **kwargs)

    monkeypatch.setattr(translator, "translate_full", recording)
    options = translator.default_options(**OPTIONS)

    def run(texts):
        return pipeline.translate(TranslationJob(texts, "eng_Latn", "fra_Latn", OPTIONS)).translations

    assert run(["One.", "Two."]) == translate(["One.", "Two."], "eng_Latn", "fra_Latn", options)
    run(["Two.", "Three."])  # "One." is now the least recently used of three: dropped
    assert run(["One.", "Two.", "Three."]) == translate(["One.", "Two.", "Three."], "eng_Latn", "fra_Latn", options)
    assert decoded == [["One.", "Two."], ["Three."], ["One."]]


def test_typed_text_while_a_document_runs_neither_stops_nor_restarts_it(make_translator, tmp_path, monkeypatch):
    """The document goes to the engine once (restarts: zero) and goes on while typed text, translated
    on another thread meanwhile, comes back first and as it would alone."""
    small = make_translator(max_rows=8)  # two sentences of 4 beams at once: the document takes 12 turns
    submitted = []
    submit = small.submit
    monkeypatch.setattr(small, "submit", lambda request: submitted.append(request) or submit(request))
    pipeline = TranslationSession(small)
    typed_job = TranslationJob([SENTENCE], "eng_Latn", "fra_Latn", OPTIONS)
    typed_alone = pipeline.translate(typed_job).translations
    pipeline.recent = RecentTranslations()  # translated again below, not remembered
    source = tmp_path / "long.txt"
    source.write_text("\n\n".join(MANY_LINES) + "\n", encoding="utf-8")
    job = DocumentJob(source, tmp_path / "long.fra_Latn.txt", "eng_Latn", "fra_Latn", OPTIONS)
    started = threading.Event()
    document = threading.Thread(target=pipeline.translate_document,
                                args=(job, lambda done, total: done and started.set()))
    submitted.clear()
    document.start()
    assert started.wait(timeout=120)
    assert pipeline.translate(typed_job).translations == typed_alone
    still_running = document.is_alive()
    document.join(timeout=120)
    assert still_running
    [once] = [request for request in submitted if request.priority == DOCUMENT]
    assert sorted(once.texts) == sorted(MANY_LINES)  # every sentence submitted once: no restart
    alone = pipeline.translate_document(DocumentJob(source, tmp_path / "alone.txt", "eng_Latn", "fra_Latn", OPTIONS))
    assert job.output_path.read_text(encoding="utf-8") == alone.read_text(encoding="utf-8")


def test_alternatives_keep_the_sentences_terms(translator, glossary):
    job = TranslationJob([SENTENCE], "eng_Latn", "fra_Latn", OPTIONS)
    plain = TranslationSession(translator).alternatives(job, SENTENCE)
    assert not all("enregistrer" in t.text for t in plain)  # the random model does not say it by itself
    found = TranslationSession(translator, terms=Terms((glossary,))).alternatives(job, SENTENCE)
    assert len(found) >= 2
    assert all("enregistrer" in t.text and "fichier" in t.text for t in found)


def test_a_completion_keeps_the_sentences_terms_and_the_persons_start(translator, glossary):
    pipeline = TranslationSession(translator, terms=Terms((glossary,)))
    job = TranslationJob([SENTENCE], "eng_Latn", "fra_Latn", OPTIONS, completion=(0, "Vite,"))
    [completed] = pipeline.translate(job).translations
    assert completed.startswith("Vite,") and "enregistrer" in completed and "fichier" in completed


def test_a_translation_a_person_accepts_comes_back_from_the_memory_undoubted(translator, tmp_path):
    from dragoman.app.session.translation_memory import TranslationMemory

    pipeline = TranslationSession(translator, memory=TranslationMemory(tmp_path / "memory.sqlite3"))
    job = TranslationJob(["The quick brown fox jumps over the lazy dog."], "eng_Latn", "fra_Latn", OPTIONS)
    pipeline.accept(job, job.texts[0], "Le renard saute.")
    result = pipeline.translate(job)
    assert result.lines() == ["Le renard saute."] and result.doubts == [[]] and result.found == [None]
    pipeline.close()


def test_the_memory_keys_on_the_weights_an_engine_read_not_on_the_files_as_they_are_now(tiny_checkpoint, tmp_path):
    """Stored translations name the model's weights as the engine read them: its weights replaced on
    disk while it runs, the engine still translates with what it read, and gets back what was
    stored with it; an engine that reads the new files is another model."""
    import os
    import shutil

    from dragoman.app.session.translation_memory import TranslationMemory
    from dragoman.engine import Translator

    folder = shutil.copytree(tiny_checkpoint, tmp_path / "model")
    memory = TranslationMemory(tmp_path / "memory.sqlite3")
    job = TranslationJob(["The quick brown fox jumps over the lazy dog."], "eng_Latn", "fra_Latn", OPTIONS)
    first = Translator(folder, device="cpu", dtype="float32")
    pipeline = TranslationSession(first, memory=memory)
    pipeline.accept(job, job.texts[0], "Le renard saute.")
    weights = folder / "model.safetensors"
    os.utime(weights, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns + 5_000_000_000))  # replaced
    assert pipeline.translate(job).lines() == ["Le renard saute."]
    second = Translator(folder, device="cpu", dtype="float32")
    assert TranslationSession(second, memory=memory).translate(job).lines() != ["Le renard saute."]
    memory.close()
    first.teardown()
    second.teardown()


def test_doubts_are_judged_only_for_a_job_that_wants_them(translator):
    """The random model's gibberish looks wrong: judged, it has doubts; a job with no use for them
    (stdin with no report) has none judged, and the same translations."""
    pipeline = TranslationSession(translator)
    lines = ["The quick brown fox jumps over the lazy dog.", "We went to the market early and bought some bread."]
    judged = pipeline.translate(TranslationJob(lines, "eng_Latn", "fra_Latn", OPTIONS, typed=False))
    unjudged = pipeline.translate(TranslationJob(lines, "eng_Latn", "fra_Latn", OPTIONS, typed=False, doubts=False))
    assert any(judged.doubts) and unjudged.doubts == [[], []]
    assert unjudged.translations == judged.translations


def test_segments_held_in_memory_are_translated_as_a_documents(translator, paths, tmp_path):
    from dragoman.app.documents.html import MarkupFragment
    from dragoman.app.session.jobs import DocumentJob, JobReport

    html = '<p>Hello <b>world</b>, how are you?</p><p>The cat sleeps.</p>'
    page = tmp_path / "page.html"
    page.write_text(f"<html><body>{html}</body></html>", encoding="utf-8")
    pipeline = TranslationSession.open(translator, paths)
    try:
        written = pipeline.translate_document(DocumentJob(page, tmp_path / "page.fra_Latn.html", "eng_Latn", "fra_Latn",
                                                         OPTIONS))
        fragment = MarkupFragment(html)
        report = JobReport()
        job = DocumentJob(page, page, "eng_Latn", "fra_Latn", OPTIONS)
        translated = fragment.text(pipeline.translate_segments(job, fragment.segments, report))
    finally:
        pipeline.close()
    assert "<b>" in translated and translated in written.read_text(encoding="utf-8")
    assert report.sentences == report.cached > 0  # the document's cache: the page translated them first



def test_best_hypotheses_are_streamed_only_to_a_listener(translator, monkeypatch):
    """A job nobody follows sentence by sentence (stdin, a corpus, the server's texts) asks the
    engine for no partial results, each of which costs its thread a read and a decode a step; one
    followed (the window) hears each sentence's hypotheses as they grow."""
    submitted = []
    submit = translator.submit
    monkeypatch.setattr(translator, "submit", lambda request: submitted.append(request.partials) or submit(request))
    pipeline = TranslationSession(translator)
    job = TranslationJob(MANY_LINES[:3], "eng_Latn", "fra_Latn", OPTIONS, typed=False)
    quiet = pipeline.translate(job)
    heard: dict[int, list[str]] = {}
    pipeline.translate(TranslationJob(MANY_LINES[3:6], "eng_Latn", "fra_Latn", OPTIONS, typed=False),
                       on_sentence=lambda i, text: heard.setdefault(i, []).append(text))
    assert submitted == [False, True]
    assert len(quiet.lines()) == 3 and sorted(heard) == [0, 1, 2]
    assert all(len(heard[i]) > 1 for i in heard)  # step by step
