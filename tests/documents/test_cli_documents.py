"""`dragoman translate FILE...` with the real engine on the tiny checkpoint, and the translation cache."""

import sys

import docx

from app.cli import main
from app.jobs import open_cache
from engine.translation_cache import TranslationCache


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
