"""The pipeline's behaviour through each way in: the window's worker (typed text and a dropped
document), the command line (stdin, a document file and a corpus) and the local server (DeepL's
API through its official client, over HTTP on 127.0.0.1), all on the real engine with the tiny
checkpoint. The same sentences give the same behaviour everywhere: the translation memory's
sentence comes from it and is never doubted, glossary terms and protected spans are kept, and the
engine's translations are doubted (the score threshold raised above every score)."""

import io
import json
import logging
import sys

import deepl
import pytest
from PySide6.QtCore import QCoreApplication

from dragoman.app.cli import main
from dragoman.app.session import confidence
from dragoman.app.session.glossary import read_glossary
from dragoman.app.session.jobs import DocumentJob, open_memory
from dragoman.app.session.session import TranslationJob
from dragoman.app.session.terms import Terms
from dragoman.app.window.worker import EngineWorker
from local_server import run as run_server
from recorder import WAIT_MS, Recorder

REMEMBERED = "The old town is quiet at night."
REMEMBERED_AS = "La vieille ville est calme la nuit."
WITH_TERM = "Save the report before you go home."
WITH_SPAN = "The parcel weighs 5 kg this morning."
SENTENCES = [REMEMBERED, WITH_TERM, WITH_SPAN]
OPTIONS = {"num_beams": 2, "max_length": 40}


def through_worker_typed(checkpoint, glossary, paths, tmp_path, qtbot, **_) -> tuple[dict, set]:
    with running_worker(checkpoint, glossary, paths, qtbot) as worker:
        job_id = worker.submit(TranslationJob(SENTENCES, "eng_Latn", "fra_Latn", OPTIONS))
        lines = worker.events.wait(qtbot, "translated", job_id)[2]
        doubted = worker.events.find("doubted", job_id)[2]
    return dict(zip(SENTENCES, lines)), {SENTENCES[line] for line in doubted}


def through_worker_document(checkpoint, glossary, paths, tmp_path, qtbot, **_) -> tuple[dict, set]:
    source, output = document(tmp_path), tmp_path / "out.txt"
    with running_worker(checkpoint, glossary, paths, qtbot) as worker:
        job_id = worker.submit(DocumentJob(source, output, "eng_Latn", "fra_Latn", OPTIONS, overwrite=True))
        worker.events.wait(qtbot, "document_done", job_id)
        report = worker.events.find("document_report", job_id)[2]
    return read_document(output), {d.source for d in report.doubtful}


def through_cli_stdin(checkpoint, glossary, paths, tmp_path, monkeypatch, capsys, **_) -> tuple[dict, set]:
    report = tmp_path / "report.jsonl"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("\n".join(SENTENCES).encode()), encoding="utf-8"))
    assert main(cli_args(checkpoint, glossary, report)) == 0
    lines = capsys.readouterr().out.splitlines()
    return dict(zip(SENTENCES, lines)), reported(report)


def through_cli_document(checkpoint, glossary, paths, tmp_path, capsys, **_) -> tuple[dict, set]:
    report = tmp_path / "report.jsonl"
    source = document(tmp_path)
    assert main(cli_args(checkpoint, glossary, report, str(source))) == 0
    [written] = capsys.readouterr().out.splitlines()
    return read_document(tmp_path / written), reported(report)


def through_cli_corpus(checkpoint, glossary, paths, tmp_path, capsys, **_) -> tuple[dict, set]:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": s}) + "\n" for s in SENTENCES), encoding="utf-8")
    assert main(cli_args(checkpoint, glossary, tmp_path / "report.jsonl", "--corpus", "--scores", str(corpus))) == 0
    records = [json.loads(line) for line in (tmp_path / "corpus.fra_Latn.jsonl").read_text(encoding="utf-8").splitlines()]
    return ({r["text"]: r["text.fra_Latn"] for r in records},
            {r["text"] for r in records if r["text.fra_Latn.doubts"]})


def through_server(checkpoint, glossary, paths, tmp_path, caplog, **_) -> tuple[dict, set]:
    """The glossary as a DeepL glossary of the request; the doubts as the server logs them."""
    server = run_server(checkpoint, paths, overrides=OPTIONS)
    client = deepl.Translator("any-key", server_url=server.url)
    try:
        terms = client.create_glossary_from_csv("Terms", "EN", "FR", glossary.read_text(encoding="utf-8")
                                                .removeprefix("source,target\n"))
        with caplog.at_level(logging.INFO, logger="dragoman.server"):
            results = client.translate_text(SENTENCES, source_lang="EN", target_lang="FR", glossary=terms)
    finally:
        client.close()
        server.stop()
    doubted = {s for s in SENTENCES for record in caplog.records
               if record.getMessage().startswith("doubtful translation") and repr(s) in record.getMessage()}
    return dict(zip(SENTENCES, (r.text for r in results))), doubted


@pytest.fixture
def glossary(tmp_path):
    path = tmp_path / "terms.csv"
    path.write_text("source,target\nsave,enregistrer\nreport,rapport\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("entry", [through_worker_typed, through_worker_document, through_cli_stdin,
                                   through_cli_document, through_cli_corpus, through_server])
def test_every_entry_point_runs_the_same_pipeline(entry, tiny_checkpoint, glossary, paths, tmp_path, qtbot,
                                                  monkeypatch, capsys, caplog):
    monkeypatch.setattr(confidence, "LOW_SCORE", 0.0)  # every score is low: every engine translation is doubted
    memory = open_memory(paths)
    memory.add("eng_Latn", "fra_Latn", {REMEMBERED: REMEMBERED_AS})
    memory.close()
    translations, doubted = entry(tiny_checkpoint, glossary, paths=paths, tmp_path=tmp_path, qtbot=qtbot,
                                  monkeypatch=monkeypatch, capsys=capsys, caplog=caplog)
    assert translations[REMEMBERED] == REMEMBERED_AS
    assert "enregistrer" in translations[WITH_TERM] and "rapport" in translations[WITH_TERM]
    assert "5 kg" in translations[WITH_SPAN]
    assert doubted == {WITH_TERM, WITH_SPAN}


class running_worker:
    """The window's engine thread with the tiny checkpoint loaded and the glossary's terms set."""

    def __init__(self, checkpoint, glossary, paths, qtbot):
        self.worker = EngineWorker(paths=paths)
        self.worker.events = Recorder(self.worker)
        self.worker.set_terms(Terms((read_glossary(glossary),)))
        self.checkpoint, self.qtbot = checkpoint, qtbot

    def __enter__(self) -> EngineWorker:
        self.worker.start()
        self.worker.load(self.checkpoint, "cpu", "float32")
        self.worker.events.wait(self.qtbot, "loaded")
        return self.worker

    def __exit__(self, *_) -> None:
        self.worker.stop()
        assert self.worker.wait(WAIT_MS)
        QCoreApplication.sendPostedEvents()


def cli_args(checkpoint, glossary, report, *files):
    return ["translate", "--model", str(checkpoint), "--from", "eng_Latn", "--to", "fra_Latn", "--device", "cpu",
            "--dtype", "float32", "--beams", str(OPTIONS["num_beams"]), "--max-length", str(OPTIONS["max_length"]),
            "--glossary", str(glossary), "--report", str(report), *files]


def document(tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("\n\n".join(SENTENCES) + "\n", encoding="utf-8")
    return source


def read_document(path) -> dict:
    return dict(zip(SENTENCES, [line for line in path.read_text(encoding="utf-8").splitlines() if line]))


def reported(report) -> set:
    return {json.loads(line)["source"] for line in report.read_text(encoding="utf-8").splitlines()}
