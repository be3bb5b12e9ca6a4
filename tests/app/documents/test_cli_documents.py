"""`dragoman translate FILE...` with the real engine on the tiny checkpoint, and the translation cache."""

import contextlib
import os
import shutil
import signal
import sqlite3
import subprocess
import sys

import docx
from polling import wait_for

from dragoman.app.cli import main
from dragoman.app.session.jobs import open_cache
from dragoman.engine.translation_cache import TranslationCache

from document_fakes import pdf_bytes


def make_docx(path, texts):
    d = docx.Document()
    for t in texts:
        d.add_paragraph(t)
    d.save(path)


def test_translates_files_continues_past_failures_and_names_them(tiny_checkpoint, tmp_path, monkeypatch, capsys):
    make_docx(tmp_path / "report.docx", ["Hello world, how are you?", "The second paragraph. It has two sentences."])
    (tmp_path / "notes.md").write_text("# Title\n\nSome **bold** words.\n", encoding="utf-8")
    (tmp_path / "broken.docx").write_bytes(b"not a zip")
    out_dir = tmp_path / "out"
    args = ["translate", "--model", str(tiny_checkpoint), "--from", "eng_Latn", "--to", "fra_Latn", "--device", "cpu",
            "--dtype", "float32", "--beams", "1", "--max-length", "12", "--output-dir", str(out_dir)]
    files = [str(tmp_path / "report.docx"), str(tmp_path / "broken.docx"), str(tmp_path / "notes.md")]
    monkeypatch.setattr(sys, "stdin", None)
    code = main(args + files)
    out, err = capsys.readouterr()
    assert code == 1
    assert "broken.docx" in err and "not a Word document" in err and "report.docx" not in err.replace("broken", "")
    assert sorted(p.name for p in out_dir.iterdir()) == ["notes.fra_Latn.md", "report.fra_Latn.docx"]
    assert len(docx.Document(out_dir / "report.fra_Latn.docx").paragraphs) == 2
    assert "report.fra_Latn.docx" in out

    cache = open_cache()
    entries = len(cache)
    cache.close()
    assert entries >= 4  # each distinct sentence, stored as it was translated
    code = main(args + [str(tmp_path / "report.docx")])  # exists: refused without --overwrite
    assert code == 1 and "already exists" in capsys.readouterr().err
    code = main(args + ["--overwrite", str(tmp_path / "report.docx")])  # all from the cache now
    assert code == 0


def test_cache_keys_separate_contexts(tmp_path):
    cache = TranslationCache(tmp_path / "c.sqlite3")
    a = TranslationCache.context("m", "", "eng_Latn", "fra_Latn", {"num_beams": 4})
    b = TranslationCache.context("m", "", "eng_Latn", "deu_Latn", {"num_beams": 4})
    cache.put_many(a, {"Hello.": "Bonjour."})
    assert cache.get_many(a, ["Hello.", "Bye."]) == {"Hello.": "Bonjour."}
    assert cache.get_many(b, ["Hello."]) == {}
    cache.close()
    assert TranslationCache(tmp_path / "c.sqlite3").get_many(a, ["Hello."]) == {"Hello.": "Bonjour."}


def translate_args(checkpoint, *more):
    return ["translate", "--model", str(checkpoint), "--from", "eng_Latn", "--to", "fra_Latn", "--device", "cpu",
            "--dtype", "float32", "--beams", "1", "--max-length", "12", *more]


def paragraphs(path):
    return [p for p in path.read_text(encoding="utf-8").split("\n\n") if p.strip()]


def test_inputs_that_map_to_one_output_never_overwrite_each_other(tiny_checkpoint, tmp_path, capsys):
    docs, out = tmp_path / "docs", tmp_path / "out"
    for name, count in (("a/x.txt", 1), ("b/x.txt", 2), ("r.txt", 3)):
        (docs / name).parent.mkdir(parents=True, exist_ok=True)
        (docs / name).write_text("\n\n".join(f"Sentence {i} of {name}." for i in range(count)), encoding="utf-8")
    (docs / "r.pdf").write_bytes(pdf_bytes([["The only line of the report."]]))
    assert main(translate_args(tiny_checkpoint, "--output-dir", str(out), "--overwrite", "--pdf-as", "text", str(docs))) == 0
    written = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert written == ["a/x.fra_Latn.txt", "b/x.fra_Latn.txt", "r.fra_Latn.txt", "r.pdf.fra_Latn.txt"]
    # each its own source's translation: as many paragraphs as it had
    assert [len(paragraphs(out / name)) for name in ("a/x.fra_Latn.txt", "b/x.fra_Latn.txt", "r.fra_Latn.txt")] == [1, 2, 3]
    assert len(paragraphs(out / "r.pdf.fra_Latn.txt")) == 1

    capsys.readouterr()
    twice = docs / "r.txt"
    assert main(translate_args(tiny_checkpoint, "--overwrite", str(twice), str(docs / "a" / ".." / "r.txt"))) == 0
    assert capsys.readouterr().out.splitlines() == [str(docs / "r.fra_Latn.txt")]  # one job, not a failure

    named = [str(docs / "a" / "x.txt"), str(docs / "b" / "x.txt")]  # named, not found in a folder: one output
    assert main(translate_args(tiny_checkpoint, "--output-dir", str(tmp_path / "flat"), *named)) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"dragoman: error: {named[0]} and {named[1]} would both be written to "
                   f"{tmp_path / 'flat' / 'x.fra_Latn.txt'}"]
    assert not (tmp_path / "flat").exists()


RESUME_SENTENCES = 1200


def run_cli(tiny_checkpoint, home, doc):
    """`dragoman translate DOC` in a process of its own."""
    env = {**os.environ, "DRAGOMAN_HOME": str(home), "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen([sys.executable, "-m", "dragoman.app.cli", *translate_args(tiny_checkpoint), str(doc)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def stored(home) -> int:
    """The sentences in the run's translation cache, read without writing to it (opening a
    TranslationCache sets its journal mode, which would race the run's own opening)."""
    cache_file = home / "cache" / "translations.sqlite3"
    if not cache_file.exists():
        return 0
    try:
        with contextlib.closing(sqlite3.connect(f"file:{cache_file}?mode=ro", uri=True, timeout=30)) as db:
            return db.execute("SELECT COUNT(*) FROM translations").fetchone()[0]
    except sqlite3.OperationalError:  # the run has not made its table yet
        return 0


def kill_once_stored(tiny_checkpoint, home, doc) -> tuple[int, int]:
    """Run the CLI on `doc`, SIGKILL it as soon as the cache holds some of its sentences: (its pid,
    the sentences stored)."""
    run = run_cli(tiny_checkpoint, home, doc)
    wait_for(lambda: stored(home) > 0 or run.poll() is not None, seconds=120, every=0.02)
    run.send_signal(signal.SIGKILL)
    _, err = run.communicate()
    assert run.returncode == -signal.SIGKILL, f"the run ended before it could be killed: {err}"
    return run.pid, stored(home)


def test_a_run_killed_mid_document_resumes_without_redoing_a_stored_sentence_and_leaves_nothing(
        tiny_checkpoint, tmp_path, home):
    doc = tmp_path / "docs" / "long.txt"
    doc.parent.mkdir()
    doc.write_text("\n\n".join(f"The small dog {i} sees the green river." for i in range(RESUME_SENTENCES)),
                   encoding="utf-8")
    for _ in range(3):  # on a busy machine this process may look too late, when all is stored: again
        shutil.rmtree(home, ignore_errors=True)
        pid, kept = kill_once_stored(tiny_checkpoint, home, doc)
        if kept < RESUME_SENTENCES:
            break
    assert 0 < kept < RESUME_SENTENCES
    assert sorted(p.name for p in doc.parent.iterdir()) == ["long.txt"]
    # what it would have left had the kill come while it wrote the output
    (doc.parent / f".long.fra_Latn.txt.dragoman-{pid}-0a1b2c3d.part").write_text("half")

    rerun = run_cli(tiny_checkpoint, home, doc)
    out, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err
    assert f"{doc}: {RESUME_SENTENCES - kept} sentences translated, {kept} from the translation cache" in err
    assert stored(home) == RESUME_SENTENCES
    assert sorted(p.name for p in doc.parent.iterdir()) == ["long.fra_Latn.txt", "long.txt"]
    assert len((doc.parent / "long.fra_Latn.txt").read_text(encoding="utf-8").split("\n\n")) == RESUME_SENTENCES


def test_a_windows_1252_subtitle_is_translated_and_its_encoding_said(tiny_checkpoint, tmp_path, monkeypatch, capsys):
    source = ("1\r\n00:00:01,000 --> 00:00:03,000\r\nLe café où l'été dernier\r\nnous avons mangé des crêpes.\r\n\r\n"
              "2\r\n00:00:04,000 --> 00:00:06,000\r\nC'était très agréable, dit-il à l'élève.\r\n")
    (tmp_path / "film.srt").write_bytes(source.encode("cp1252"))
    args = ["translate", "--model", str(tiny_checkpoint), "--from", "fra_Latn", "--to", "eng_Latn", "--device", "cpu",
            "--dtype", "float32", "--beams", "1", "--max-length", "16", str(tmp_path / "film.srt")]
    monkeypatch.setattr(sys, "stdin", None)
    code = main(args)
    out, err = capsys.readouterr()
    assert code == 0, err
    said = [line for line in err.splitlines() if "windows-1252" in line]
    assert said and said[0].startswith(f"dragoman: {tmp_path / 'film.srt'}: read as windows-1252")
    written = (tmp_path / "film.eng_Latn.srt").read_bytes()
    encoding = "utf-8" if any("written as UTF-8" in line for line in said) else "cp1252"
    text = written.decode(encoding)
    assert text.count("-->") == 2 and text.split("\r\n")[:2] == ["1", "00:00:01,000 --> 00:00:03,000"]
