"""The translation memory and cache files (app.session.jobs, engine.open_database, TranslationSession.open):
garbage, truncated, foreign, locked or read-only ones give one line naming the file (never SQLite's bare
message, never a 30 s wait), and translating goes on without them."""

import io
import os
import sqlite3
import sys
import time

import pytest

from dragoman.app.cli import main
from dragoman.app.session.jobs import open_cache, open_memory
from dragoman.engine import DatabaseError


def memory_file(paths):
    return paths.data_dir / "memory.sqlite3"


def cache_file(paths):
    return paths.cache_dir / "translations.sqlite3"


def garbage(path):
    path.write_bytes(b"this is no database at all\n" * 200)


def truncated(path):
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE t (x)")
    db.executemany("INSERT INTO t VALUES (?)", [("x" * 500,)] * 100)
    db.commit()
    db.close()
    path.write_bytes(path.read_bytes()[:1500])


def foreign(path):
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE photos (name TEXT)")
    db.commit()
    db.close()


@pytest.mark.parametrize("spoil, said", [(garbage, "not a translation"), (truncated, "not a translation"),
                                         (foreign, "a database of another program")])
@pytest.mark.parametrize("place, opener", [(memory_file, open_memory), (cache_file, open_cache)])
def test_an_unusable_database_file_is_one_line_naming_it_and_left_as_it_was(paths, spoil, said, place, opener):
    path = place(paths)
    path.parent.mkdir(parents=True, exist_ok=True)
    spoil(path)
    before = path.read_bytes()
    with pytest.raises(DatabaseError) as raised:
        opener(paths)
    assert str(raised.value).startswith(f"{path}: ") and said in str(raised.value)
    assert "\n" not in str(raised.value) and path.read_bytes() == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files")
def test_a_read_only_memory_is_said(paths):
    open_memory(paths).close()
    memory_file(paths).chmod(0o444)
    with pytest.raises(DatabaseError, match="read-only"):
        open_memory(paths)


def test_a_locked_memory_is_said_within_seconds(paths):
    open_memory(paths).close()
    holder = sqlite3.connect(memory_file(paths))
    holder.execute("PRAGMA journal_mode=DELETE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        started = time.monotonic()
        with pytest.raises(DatabaseError, match="locked by another program"):
            open_memory(paths)
        assert time.monotonic() - started < 20  # not SQLite's 30 s
    finally:
        holder.rollback()
        holder.close()


def test_a_session_goes_on_without_an_unusable_store_where_told_to(paths, translator):
    from dragoman.app.session.session import TranslationSession

    memory_file(paths).parent.mkdir(parents=True, exist_ok=True)
    garbage(memory_file(paths))
    with pytest.raises(DatabaseError, match="not a translation memory"):
        TranslationSession.open(translator, paths)
    said = []
    pipeline = TranslationSession.open(translator, paths, unusable=said.append)
    try:
        assert pipeline.memory is None and pipeline.cache is not None
        assert len(said) == 1 and said[0].startswith(f"{memory_file(paths)}: not a translation memory")
    finally:
        pipeline.close()


def test_stdin_and_documents_are_translated_without_a_broken_memory_and_cache(
        paths, tiny_checkpoint, tmp_path, monkeypatch, capsys):
    for place in (memory_file, cache_file):
        place(paths).parent.mkdir(parents=True, exist_ok=True)
        garbage(place(paths))
    base = ["translate", "--model", str(tiny_checkpoint), "--from", "eng_Latn", "--to", "fra_Latn", "--device", "cpu",
            "--dtype", "float32", "--beams", "1", "--max-length", "10"]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"The cat reads.\n"), encoding="utf-8"))
    assert main(base) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 1
    assert f"dragoman: {memory_file(paths)}: not a translation memory" in err
    (tmp_path / "a.txt").write_text("The cat reads.\n", encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", None)
    assert main(base + [str(tmp_path / "a.txt")]) == 0
    err = capsys.readouterr().err
    assert f"dragoman: {cache_file(paths)}: not a translation cache" in err and (tmp_path / "a.fra_Latn.txt").is_file()
    code = main(["memory", "list"])
    assert code == 1 and capsys.readouterr().err.startswith(f"dragoman: error: {memory_file(paths)}: not a translation memory")
