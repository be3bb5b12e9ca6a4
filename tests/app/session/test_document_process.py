"""app/session/document_process.py: a document job in a process of its own (as on a GPU), the real
engine in this one on the CPU, gives what the job gives in this process."""

import dataclasses
import multiprocessing
import threading
import zipfile

import pypdf
import pytest

from bench import docx_book
from polling import wait_for
from dragoman.app.documents import pdf_blocks
from dragoman.app.documents import Cancelled
from dragoman.app.documents.safety import DocumentError
from dragoman.app.session.document_process import (DocumentOrder, DocumentProcess, EngineAcross, EngineTokenizer,
                                                    TokenizerRead)
from dragoman.app.session.glossary import read_glossary
from dragoman.app.session.jobs import DocumentJob, JobReport
from dragoman.app.session.session import TranslationSession
from dragoman.app.session.terms import Terms
from dragoman.app.settings import AppPaths
from dragoman.engine import AdapterError

OPTIONS = {"num_beams": 2, "max_length": 12}


@pytest.fixture
def book(tmp_path):
    """A Word book of 3 pages: bold, italic and linked runs, numbers, prices, URLs, a table."""
    path = tmp_path / "book.docx"
    docx_book.make_book(path, 3)
    return path


def pipeline_in(translator, home, apart, terms=None):
    pipeline = TranslationSession.open(translator, AppPaths.under(home), terms=terms)
    pipeline.documents_apart = apart
    return pipeline


def running_jobs():
    return [p for p in multiprocessing.active_children() if p.name == "dragoman-document"]


def no_document_process_left():
    """No job's process is left once it has ended (a spare may wait for the next)."""
    return wait_for(lambda: not running_jobs(), seconds=10, every=0.05)


def test_a_document_translated_apart_is_the_one_translated_here_and_its_translations_are_stored(
        translator, book, tmp_path):
    """The same file (a glossary's term forced), report and progress, and the job's translations in
    the cache that a second run then reads."""
    glossary = tmp_path / "terms.csv"
    glossary.write_text("source,target\nbridge,pont\n", encoding="utf-8")
    terms = Terms((read_glossary(glossary),))
    runs = {}
    for apart in (False, True):
        pipeline = pipeline_in(translator, tmp_path / f"home-{apart}", apart, terms)
        report, heard = JobReport(), []
        written = pipeline.translate_document(
            DocumentJob(book, tmp_path / f"out-{apart}.docx", "eng_Latn", "fra_Latn", OPTIONS), report=report,
            progress=lambda done, total: heard.append((done, total)))
        runs[apart] = (zipfile.ZipFile(written).read("word/document.xml"), report, heard)
        pipeline.close()
    assert no_document_process_left()
    (here, report_here, heard_here), (apart, report_apart, heard_apart) = runs[False], runs[True]
    assert apart == here and b"pont" in apart  # the glossary's term, forced where it fits
    # The scores to float32's last bits: the steps' batches are timed differently.
    assert [dataclasses.replace(d, score=pytest.approx(d.score, abs=1e-5)) for d in report_apart.doubtful] == \
        report_here.doubtful
    assert dataclasses.replace(report_apart, doubtful=[]) == dataclasses.replace(report_here, doubtful=[])
    assert report_apart.translated > 64  # more than the first part
    assert report_apart.doubtful and report_apart.proportional  # the random model's
    assert heard_apart[-1] == heard_here[-1] == (report_here.sentences, report_here.sentences)

    # The next job runs in the spare process the last one left ready.
    spare = DocumentProcess._spare
    assert spare is not None and spare.process.is_alive()
    pipeline = pipeline_in(translator, tmp_path / "home-True", True, terms)
    again, pids = JobReport(), set()
    pipeline.translate_document(DocumentJob(book, tmp_path / "again.docx", "eng_Latn", "fra_Latn", OPTIONS),
                               report=again, progress=lambda done, total: pids.update(p.pid for p in running_jobs()))
    pipeline.close()
    assert (again.translated, again.cached) == (0, report_apart.translated)
    assert pids == {spare.process.pid}


@pytest.mark.parametrize("given", [True, False], ids=["given while it waited", "sent with the job"])
def test_the_documents_process_sends_its_texts_tokenized_with_the_engines_tokenizer(translator, book, tmp_path,
                                                                                   monkeypatch, given):
    """Once it has read the engine's tokenizer, the document's process sends each call's texts
    tokenized, so that the engine's thread does not tokenize them: the ids the engine would have
    made, and the file the one translated here. A process kept ready is given the tokenizer while
    it waits, so every call goes tokenized; one started for the job reads it beside the first."""
    DocumentProcess._spare = None  # a spare another test left may hold the tokenizer already
    if given:
        DocumentProcess.start_spare(translator)
    else:
        monkeypatch.setattr(DocumentProcess, "start_spare", lambda translator=None: None)
    sent = []
    submit = translator.submit
    monkeypatch.setattr(translator, "submit", lambda request: sent.append(request) or submit(request))
    written, calls = {}, {}
    for apart in (True, False):
        pipeline = pipeline_in(translator, tmp_path / f"home-{apart}", apart)
        written[apart] = zipfile.ZipFile(pipeline.translate_document(
            DocumentJob(book, tmp_path / f"out-{apart}.docx", "eng_Latn", "fra_Latn", OPTIONS))).read("word/document.xml")
        pipeline.close()
        calls[apart] = sent[len(calls.get(True, [])):]
    assert written[True] == written[False]
    assert calls[False] and all(request.sources is None for request in calls[False])  # the job here's
    apart = [request for request in calls[True] if request.sources is not None]
    assert apart == calls[True] if given else apart  # beside the first call, maybe not yet
    for request in apart:
        assert request.sources == [translator._sources(text, "eng_Latn") if text.strip() else []
                                   for text in request.texts]


def test_a_document_stopped_apart_raises_cancelled_and_writes_nothing(translator, book, tmp_path):
    pipeline = pipeline_in(translator, tmp_path / "home", True)
    heard = []
    with pytest.raises(Cancelled):
        pipeline.translate_document(DocumentJob(book, tmp_path / "out.docx", "eng_Latn", "fra_Latn", OPTIONS),
                                   progress=lambda done, total: heard.append(done), should_stop=lambda: bool(heard))
    pipeline.close()
    assert not (tmp_path / "out.docx").exists() and heard
    assert no_document_process_left()


def test_errors_apart_are_those_raised_here(translator, book, tmp_path):
    """The document's own (a corrupt file) and the engine's (an adapter that is not there)."""
    broken = tmp_path / "broken.docx"
    broken.write_bytes(b"PK\x03\x04 not a zip archive at all")
    jobs = [DocumentJob(broken, tmp_path / "broken.out.docx", "eng_Latn", "fra_Latn", OPTIONS),
            DocumentJob(book, tmp_path / "adapter.docx", "eng_Latn", "fra_Latn", OPTIONS, adapter="nowhere")]
    for job, error in zip(jobs, (DocumentError, AdapterError)):
        raised = []
        for apart in (False, True):
            pipeline = pipeline_in(translator, tmp_path / f"home-{apart}", apart)
            with pytest.raises(error) as e:
                pipeline.translate_document(job)
            pipeline.close()
            raised.append(str(e.value))
        assert raised[0] == raised[1]
        assert not job.output_path.exists()
    assert broken.read_bytes() == b"PK\x03\x04 not a zip archive at all"
    assert no_document_process_left()


def test_a_document_process_that_dies_is_one_clear_error_and_its_sentences_leave_the_engine(
        translator, book, tmp_path):
    pipeline = pipeline_in(translator, tmp_path / "home", True)

    def kill(done, total):
        for process in multiprocessing.active_children():
            if process.name == "dragoman-document":
                process.kill()

    with pytest.raises(DocumentError, match="the document's process ended unexpectedly"):
        pipeline.translate_document(DocumentJob(book, tmp_path / "out.docx", "eng_Latn", "fra_Latn", OPTIONS),
                                   progress=kill)
    pipeline.close()
    assert not (tmp_path / "out.docx").exists()
    # The engine is free: a sentence now is translated at once, nothing of the document's ahead of it.
    assert translator.translate(["The river is wide."], "eng_Latn", "fra_Latn", translator.default_options(**OPTIONS))[0]


def test_typed_text_while_a_document_runs_apart_is_translated_as_alone_and_the_document_goes_on(
        translator, book, tmp_path):
    """Typed text through the same pipeline while the document's process runs: its translation is
    the one it gets alone, and the document comes out as it does with nothing beside it."""
    from dragoman.app.session.session import TranslationJob

    typed = TranslationJob(["The old bridge crosses the quiet river."], "eng_Latn", "fra_Latn", OPTIONS)
    quiet_pipeline = pipeline_in(translator, tmp_path / "quiet", True)
    alone = quiet_pipeline.translate(typed).lines()
    quiet = quiet_pipeline.translate_document(DocumentJob(book, tmp_path / "quiet.docx", "eng_Latn", "fra_Latn", OPTIONS))
    quiet_pipeline.close()
    pipeline = pipeline_in(translator, tmp_path / "busy", True)
    beside = []

    def type_now(done, total):
        if not beside:
            beside.append(pipeline.translate(typed).lines())

    busy = pipeline.translate_document(DocumentJob(book, tmp_path / "busy.docx", "eng_Latn", "fra_Latn", OPTIONS),
                                      progress=type_now)
    pipeline.close()
    assert beside == [alone]
    assert zipfile.ZipFile(busy).read("word/document.xml") == zipfile.ZipFile(quiet).read("word/document.xml")


def test_a_pipeline_opened_on_a_gpu_has_a_document_process_ready(tmp_path, monkeypatch):
    """The window, the server and the command line open their pipeline: on a GPU (an engine that
    says it runs on one) a document's process is started then, given the engine's tokenizer, so
    that the first document waits for neither; on the CPU none is."""
    import types

    started = []
    monkeypatch.setattr(DocumentProcess, "start_spare", classmethod(lambda cls, translator: started.append(translator)))
    for kind in ("cpu", "cuda"):
        engine = types.SimpleNamespace(device=types.SimpleNamespace(type=kind))
        pipeline = TranslationSession.open(engine, AppPaths.under(tmp_path / kind))
        pipeline.close()
        assert pipeline.documents_apart == (kind == "cuda") and started == ([engine] if kind == "cuda" else [])


def test_a_long_pdf_read_by_processes_of_its_own_translates_apart_as_here(translator, tmp_path):
    """The document's process starts the PDF's page readers (pdf_blocks.read_page_ranges), as the
    app's own process does."""
    from bench import pdf_book

    book = tmp_path / "book.pdf"
    pdf_book.make_book(str(book), 2 * pdf_blocks.PAGES_PER_READER)
    assert pdf_blocks.usable_cores() >= 2  # else the pages are read in one process, which this is not about
    texts = []
    for apart in (False, True):
        pipeline = pipeline_in(translator, tmp_path / f"home-{apart}", apart)
        report = JobReport()
        written = pipeline.translate_document(
            DocumentJob(book, tmp_path / f"out-{apart}.pdf", "eng_Latn", "fra_Latn", OPTIONS), report=report)
        pipeline.close()
        texts.append((pypdf.PdfReader(written).pages[-1].extract_text(), report.translated))
    assert texts[1] == texts[0] and texts[0][1] > 0
    assert no_document_process_left()


def test_the_documents_process_reads_the_pipe_while_what_it_sends_waits_to_be_read(translator, tmp_path):
    """Translations heard in the document's process make it send (progress), on the thread that
    reads the pipe: the app sending its translations while the document's process sent its own,
    each side's pipe full, hung a job. Here the app sends many large batches before it reads a
    thing, each answered by a large message: all arrive, and the answers in order."""
    app_end, document_end = multiprocessing.Pipe()
    order = DocumentOrder(DocumentJob(tmp_path / "a.txt", tmp_path / "b.txt", "eng_Latn", "fra_Latn", {}), Terms(),
                          None, None, translator.model_identity, translator.config, None, None)
    engine = EngineAcross(document_end, order, TokenizerRead(EngineTokenizer.of(translator)))
    heard: list[int] = []

    def on_translation(i, translation):
        heard.append(i)
        engine.send(("progress", i, translation.text))

    outcome, number = engine._open(on_translation)
    large = "x" * 20_000
    sending = threading.Thread(target=lambda: [app_end.send(("heard", [(number, i, large, None)])) for i in range(100)]
                               + [app_end.send(("done", number, []))], daemon=True)
    sending.start()
    sending.join(20)
    assert not sending.is_alive(), "the document's process stopped reading the pipe"
    assert [app_end.recv()[1] for _ in range(100)] == list(range(100)) == heard
    assert outcome.result(timeout=5) == []
    engine.close()
    app_end.close()
