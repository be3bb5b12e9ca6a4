"""How the driver writes an output: with the user's umask, through a temporary file of a recognisable
name that a failure removes, and that a killed run's leftovers are cleaned from."""

import errno
import os
import stat
import subprocess
import sys

import docx
import pytest

from dragoman.app.documents import DocumentError, temporary_pattern, text, translate_document

from document_fakes import upper_keeping_tags


@pytest.fixture
def umask():
    """Set the process's umask for the test; the old one comes back after it."""
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


def mode(path):
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o077])
def test_outputs_are_created_with_the_users_umask(tmp_path, umask, mask):
    (tmp_path / "a.txt").write_text("Hello world.\n", encoding="utf-8")
    d = docx.Document()
    d.add_paragraph("Hello world.")
    d.save(tmp_path / "b.docx")
    umask(mask)
    for name, out in (("a.txt", "a.out.txt"), ("b.docx", "b.out.docx")):
        translate_document(tmp_path / name, tmp_path / out, upper_keeping_tags)
        assert mode(tmp_path / out) == 0o666 & ~mask
        translate_document(tmp_path / name, tmp_path / out, upper_keeping_tags, overwrite=True)  # replaced: the same
        assert mode(tmp_path / out) == 0o666 & ~mask


def test_a_write_that_fails_removes_its_temporary_file_and_keeps_the_old_output(tmp_path, monkeypatch):
    (tmp_path / "a.txt").write_text("Hello world.\n", encoding="utf-8")
    (tmp_path / "a.out.txt").write_text("the old translation", encoding="utf-8")
    written_to = []

    def disk_full(document, translations, out_path):
        written_to.append(out_path.name)
        out_path.write_text("half of it", encoding="utf-8")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(text.SlotDocument, "write", disk_full)
    with pytest.raises(OSError, match="No space left"):
        translate_document(tmp_path / "a.txt", tmp_path / "a.out.txt", upper_keeping_tags, overwrite=True)
    assert temporary_pattern(tmp_path / "a.out.txt").fullmatch(written_to[0])  # beside the output, named for it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.out.txt", "a.txt"]
    assert (tmp_path / "a.out.txt").read_text(encoding="utf-8") == "the old translation"


def test_the_temporary_files_a_killed_run_left_are_removed_when_the_next_job_for_that_output_starts(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / "a.txt").write_text("Hello world.\n", encoding="utf-8")
        ours_stale = f".a.fra_Latn.txt.dragoman-{gone.pid}-0a1b2c3d.part"
        kept = [
            f".a.fra_Latn.txt.dragoman-{running.pid}-0a1b2c3d.part",  # another translation of it, still running
            f".b.fra_Latn.txt.dragoman-{gone.pid}-0a1b2c3d.part",  # another output's: cleaned by its own job
            ".a.fra_Latn.txt.part",  # not ours
            "a.fra_Latn.txt.dragoman-1-0a1b2c3d.part.bak",  # not ours
        ]
        for name in [ours_stale] + kept:
            (tmp_path / name).write_bytes(b"PK partial")
        translate_document(tmp_path / "a.txt", tmp_path / "a.fra_Latn.txt", upper_keeping_tags)
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(kept + ["a.fra_Latn.txt", "a.txt"])

        # killed between putting the output in place and removing its temporary file: the next job
        # refuses to replace the output, and still cleans up
        (tmp_path / ours_stale).write_bytes(b"PK partial")
        with pytest.raises(DocumentError, match="already exists"):
            translate_document(tmp_path / "a.txt", tmp_path / "a.fra_Latn.txt", upper_keeping_tags)
        assert not (tmp_path / ours_stale).exists()
    finally:
        running.kill()
        running.wait()
