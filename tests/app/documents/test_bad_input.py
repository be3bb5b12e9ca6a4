"""Bad files are refused with a clear message, nothing is left behind, and the input is untouched."""

import zipfile

import pytest

from dragoman.app.documents import DocumentError, translate_document

from document_fakes import make_epub, upper_keeping_tags


def refuse(tmp_path, name, data, match):
    tmp_path = tmp_path / name.replace(".", "_")
    tmp_path.mkdir()
    path = tmp_path / name
    path.write_bytes(data)
    out = tmp_path / ("out-" + name)
    with pytest.raises(DocumentError, match=match):
        translate_document(path, out, upper_keeping_tags)
    assert path.read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # no output, no temporary file


def docx_bytes(tmp_path):
    import docx

    d = docx.Document()
    d.add_paragraph("Some text")
    d.save(tmp_path / "ok.docx")
    data = (tmp_path / "ok.docx").read_bytes()
    (tmp_path / "ok.docx").unlink()
    return data


def zip_with(entries, compression=zipfile.ZIP_DEFLATED):
    import io

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as z:
        for name, data in entries:
            z.writestr(name, data)
    return buf.getvalue()


def test_empty_file(tmp_path):
    refuse(tmp_path, "empty.docx", b"", "empty")


def test_truncated_archive(tmp_path):
    data = docx_bytes(tmp_path)
    refuse(tmp_path, "cut.docx", data[: len(data) // 2], "corrupt or truncated")


def test_content_not_matching_extension(tmp_path):
    refuse(tmp_path, "text.docx", b"just some text", "not a Word document")
    refuse(tmp_path, "sheet.xlsx", zip_with([("hello.txt", b"hi")]), "not an Excel workbook .its package relationships name no main document")


def test_password_protected(tmp_path):
    refuse(tmp_path, "secret.docx", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 600, "password-protected")


def test_path_escape(tmp_path):
    for name in ("../../evil.txt", "/etc/evil.txt", "C:/evil.txt", "word\\..\\..\\evil.txt"):
        refuse(tmp_path, "escape.docx", zip_with([("word/document.xml", b"<a/>"), (name, b"x")]), "unsafe path")
        (tmp_path / "escape_docx" / "escape.docx").unlink()
        (tmp_path / "escape_docx").rmdir()


def test_xml_entity_expansion(tmp_path):
    laughs = b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]><w:document xmlns:w="x"><w:body>&b;</w:body></w:document>'
    import io

    with zipfile.ZipFile(io.BytesIO(docx_bytes(tmp_path))) as z:
        members = [(i.filename, laughs if i.filename == "word/document.xml" else z.read(i)) for i in z.infolist()]
    refuse(tmp_path, "laughs.docx", zip_with(members), "word/document.xml declares XML entities")


def test_binary_content_is_refused(tmp_path):
    import random

    rng = random.Random(7)
    refuse(tmp_path, "bin.md", b"\x00\x01\x02binary", "binary")
    refuse(tmp_path, "noise.txt", bytes(rng.randrange(1, 256) for _ in range(4000)), "binary")
    refuse(tmp_path, "noise.srt", bytes(rng.randrange(256) for _ in range(4001)), "binary")
    refuse(tmp_path, "controls.txt", "Text with\x01\x02\x03 controls \xe9t\xe9".encode("cp1252"), "binary")
    refuse(tmp_path, "subs.srt", b"no cues in here", "no cue timings")


def test_unsupported_type(tmp_path):
    refuse(tmp_path, "drawing.svg", b"<svg/>", "unsupported file type")


def test_a_failing_translation_leaves_no_output(tmp_path):
    make_epub(tmp_path / "book.epub")

    def broken(texts):
        raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError):
        translate_document(tmp_path / "book.epub", tmp_path / "book.fra_Latn.epub", broken)
    assert [p.name for p in tmp_path.iterdir()] == ["book.epub"]
