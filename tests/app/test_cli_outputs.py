"""--report FILE and `dragoman memory export FILE` never replace a file the user did not name as that
output, nor write where no file can be: refused in one line before any work."""

import io
import os
import sys

import pytest

from dragoman.app.cli import main
from dragoman.app.session.jobs import open_cache, open_memory


def run(args, monkeypatch, capsys, stdin=b"Hello.\n"):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def documents(tmp_path, paths):
    """A document, the translation a run wrote of it before, and the memory and cache databases."""
    (tmp_path / "a.txt").write_text("Hello.\n", encoding="utf-8")
    (tmp_path / "a.fra_Latn.txt").write_text("Bonjour.\n", encoding="utf-8")
    open_memory(paths).close()
    open_cache(paths).close()
    return tmp_path


def translating(tmp_path, report):
    # no model there: a refusal must come before the model would load
    return ["translate", "--model", str(tmp_path / "no-model"), "--from", "eng_Latn", "--to", "fra_Latn",
            "--report", str(report), "--overwrite", str(tmp_path / "a.txt")]


def contents(folder):
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("target, said", [
    ("a.txt", "would replace the document"),
    ("a.fra_Latn.txt", "would replace the translation"),
    ("home-memory", "would replace the translation memory"),
    ("home-cache", "would replace the translation cache"),
    ("folder", "is a folder"),
    ("missing/report.jsonl", "does not exist"),
])
def test_a_report_that_would_replace_another_file_or_cannot_be_written_is_refused_first(
        documents, paths, monkeypatch, capsys, target, said):
    (documents / "folder").mkdir()
    report = {"home-memory": paths.data_dir / "memory.sqlite3",
              "home-cache": paths.cache_dir / "translations.sqlite3"}.get(target, documents / target)
    before = contents(documents)
    code, out, err = run(translating(documents, report), monkeypatch, capsys)
    assert code == 2 and out == ""
    [line] = err.strip().splitlines()
    assert line.startswith(f"dragoman: error: --report {report}: ") and said in line
    assert contents(documents) == before  # nothing written, nothing replaced
    # stdin: the databases are guarded too
    if target.startswith("home"):
        code, _, err = run(translating(documents, report)[:-2], monkeypatch, capsys)
        assert code == 2 and said in err


def test_a_report_into_a_device_is_refused(documents, monkeypatch, capsys):
    code, out, err = run(translating(documents, "/dev/full"), monkeypatch, capsys)
    assert code == 2 and "--report /dev/full: not a regular file" in err


def test_a_report_through_a_link_to_the_document_is_refused(documents, monkeypatch, capsys):
    os.symlink(documents / "a.txt", documents / "link.jsonl")
    os.link(documents / "a.fra_Latn.txt", documents / "hard.jsonl")
    for name, said in (("link.jsonl", "the document"), ("hard.jsonl", "the translation")):
        code, out, err = run(translating(documents, documents / name), monkeypatch, capsys)
        assert code == 2 and f"would replace {said}" in err
    assert (documents / "a.txt").read_text(encoding="utf-8") == "Hello.\n"


def test_a_memory_export_onto_the_memory_or_a_device_is_refused(documents, paths, monkeypatch, capsys):
    memory = paths.data_dir / "memory.sqlite3"
    before = memory.read_bytes()
    code, out, err = run(["memory", "export", str(memory)], monkeypatch, capsys)
    assert code == 2 and err.startswith(f"dragoman: error: the export {memory}: would replace the translation memory")
    assert memory.read_bytes() == before
    code, out, err = run(["memory", "export", "/dev/full"], monkeypatch, capsys)
    assert code == 2 and "not a regular file" in err
    code, out, err = run(["memory", "export", str(documents / "missing" / "m.tmx")], monkeypatch, capsys)
    assert code == 2 and "does not exist" in err and not (documents / "missing").exists()
    code, out, err = run(["memory", "export", str(documents / "m.tmx")], monkeypatch, capsys)
    assert code == 0 and (documents / "m.tmx").is_file()
