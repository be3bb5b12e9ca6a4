"""app/session/jobs.py: how a document job feeds the engine and the translation cache."""

import sqlite3

import pytest

import dragoman.app.session.document_batch
from dragoman.app.documents import Cancelled, DocumentError, output_path
from dragoman.app.session.jobs import DocumentJob, JobReport, distinct_jobs, find_documents
from dragoman.app.session.session import TranslationSession
from dragoman.engine.translation_cache import TranslationCache

# Many waves of the engine (16 sentences of 2 beams at CPU_ROWS): a stop after the first leaves
# several undecoded, however fast the machine decodes while the stop is being looked at.
SENTENCES = [f"The small dog {i} sees the green river tomorrow." for i in range(64)]


def translate_document(job, translator, cache, terms=None, **kwargs):
    """`job` through a pipeline over `translator` and `cache` (no translation memory)."""
    return TranslationSession(translator, cache, terms=terms).translate_document(job, **kwargs)


@pytest.fixture
def job(tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("\n\n".join(SENTENCES + SENTENCES[:3]), encoding="utf-8")  # three repeated
    return DocumentJob(source, tmp_path / "out.txt", "eng_Latn", "fra_Latn",
                       options={"num_beams": 2, "max_length": 16}, overwrite=True)


def engine_calls(translator, monkeypatch) -> list[int]:
    """The number of texts of each call into the engine from now on."""
    calls = []
    original = translator.translate
    monkeypatch.setattr(translator, "translate", lambda texts, *a, **k: calls.append(len(texts)) or original(texts, *a, **k))
    return calls


def assert_translated(job, translator) -> None:
    """The job's output holds the engine's translation of each of its sentences, in order."""
    lines = [line for line in job.output_path.read_text(encoding="utf-8").splitlines() if line]
    expected = translator.translate(SENTENCES, "eng_Latn", "fra_Latn", translator.default_options(**job.options))
    assert lines == expected + expected[:3]


def test_a_document_goes_to_the_engine_in_one_call_whose_results_are_counted_and_stored_as_they_come(
        translator, job, tmp_path, monkeypatch):
    monkeypatch.setattr(dragoman.app.session.document_batch, "CACHE_SECONDS", 0.0)
    calls = engine_calls(translator, monkeypatch)
    cache = TranslationCache(tmp_path / "cache.sqlite3")
    stored_while_decoding = []
    put_many = cache.put_many
    monkeypatch.setattr(cache, "put_many", lambda *a: stored_while_decoding.append(len(calls) == 1) or put_many(*a))
    progress = []
    translate_document(job, translator, cache, progress=lambda done, total: progress.append((done, total)))

    assert calls == [len(SENTENCES)]
    assert {total for _, total in progress} == {len(SENTENCES)}
    done = [d for d, _ in progress]
    assert done == sorted(done) and done[-1] == len(SENTENCES)
    assert len([d for d in done if 0 < d < len(SENTENCES)]) >= 3, "progress moved only at the call's ends"
    assert len(stored_while_decoding) >= 4 and all(stored_while_decoding)
    assert len(cache) == len(SENTENCES)
    assert_translated(job, translator)


def test_a_stopped_document_keeps_what_finished_and_its_next_run_translates_only_the_rest(
        translator, job, tmp_path, monkeypatch):
    cache = TranslationCache(tmp_path / "cache.sqlite3")
    counted = []
    with pytest.raises(Cancelled):
        translate_document(job, translator, cache, progress=lambda done, total: counted.append(done),
                         should_stop=lambda: max(counted, default=0) >= 6)
    assert not job.output_path.exists()
    kept = len(cache)
    assert 6 <= kept < len(SENTENCES), "what finished before the stop was not stored"

    calls = engine_calls(translator, monkeypatch)
    report = JobReport()
    translate_document(job, translator, cache, report=report)
    assert calls == [len(SENTENCES) - kept]
    assert (report.translated, report.cached) == (len(SENTENCES) - kept, kept)
    assert_translated(job, translator)


def test_blank_texts_are_reported_at_once_and_each_text_once(translator):
    reported = []
    texts = ["Hello world.", "  ", "The cat reads a book.", ""]
    results = translator.translate(texts, "eng_Latn", "fra_Latn", translator.default_options(max_length=12),
                                   on_result=lambda i, text: reported.append((i, text)))
    assert sorted(reported) == sorted(enumerate(results))
    assert reported[:2] == [(1, ""), (3, "")]


def test_a_cache_that_cannot_be_written_fails_the_job_and_the_next_one_runs(translator, job, tmp_path, monkeypatch):
    monkeypatch.setattr(dragoman.app.session.document_batch, "CACHE_SECONDS", 0.0)  # stores while sentences still decode
    full = TranslationCache(tmp_path / "full.sqlite3")

    def no_room(*_):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(full, "put_many", no_room)
    with pytest.raises(sqlite3.OperationalError, match="disk is full"):
        translate_document(job, translator, full)
    assert not job.output_path.exists()
    generator = translator.generator
    assert generator.rows.num_free_rows() == generator.rows.capacity
    assert generator.num_free_blocks() == generator.num_total_blocks()
    translate_document(job, translator, TranslationCache(tmp_path / "cache.sqlite3"))
    assert job.output_path.is_file()


def jobs_for(paths, output_dir=None, target="fra_Latn", options=None):
    return [DocumentJob(p, output_path(p, target, output_dir, options), "eng_Latn", target, overwrite=True,
                        document_options=options or {}) for p in paths]


def outputs(jobs):
    return {job.source_path.name: job.output_path for job in jobs}


def test_inputs_of_two_types_that_map_to_one_output_each_get_their_own(tmp_path):
    as_text = {"pdf_as": "text"}  # PDFs translated into text files
    jobs = distinct_jobs(jobs_for([tmp_path / "a.pdf", tmp_path / "a.txt", tmp_path / "b.pdf"], options=as_text))
    assert outputs(jobs) == {"a.pdf": tmp_path / "a.pdf.fra_Latn.txt", "a.txt": tmp_path / "a.fra_Latn.txt",
                             "b.pdf": tmp_path / "b.fra_Latn.txt"}
    queued = distinct_jobs(jobs_for([tmp_path / "b.txt"]))  # a job queued already writes b.fra_Latn.txt
    later = distinct_jobs(jobs_for([tmp_path / "b.pdf"], options=as_text), taken=[job.output_path for job in queued])
    assert outputs(later) == {"b.pdf": tmp_path / "b.pdf.fra_Latn.txt"}


def test_the_same_file_named_twice_is_one_job(tmp_path):
    (tmp_path / "sub").mkdir()
    jobs = distinct_jobs(jobs_for([tmp_path / "a.txt", tmp_path / "sub" / ".." / "a.txt", tmp_path / "a.txt"]))
    assert [job.source_path for job in jobs] == [tmp_path / "a.txt"]


def test_a_clash_no_name_resolves_is_refused_in_one_line_naming_both_files(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(DocumentError, match=r"^\S*x/a.txt and \S*y/a.txt would both be written to \S*out/a.fra_Latn.txt$"):
        distinct_jobs(jobs_for([tmp_path / "x" / "a.txt", tmp_path / "y" / "a.txt"], out))
    with pytest.raises(DocumentError, match="would replace a document that is to be translated too"):
        distinct_jobs(jobs_for([tmp_path / "a.txt", tmp_path / "a.fra_Latn.txt"]))
    with pytest.raises(DocumentError, match="a.fra_Latn.txt is being written by a job queued already"):
        distinct_jobs(jobs_for([tmp_path / "a.txt"]), taken=[tmp_path / "a.fra_Latn.txt"])


def test_a_folder_gives_its_documents_sorted_without_hidden_files_and_our_translations(tmp_path):
    for name in ["b.txt", "a.md", "a.fra_Latn.md", ".hidden.txt", "notes.xyz", "sub/c.docx", ".git/d.txt"]:
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("x")
    assert find_documents(tmp_path) == [tmp_path / "a.md", tmp_path / "b.txt", tmp_path / "sub" / "c.docx"]
