"""bench.realdocs: its stand-in translator is as hard as a model, and its checker finds what a broken
output lost, on documents made here (and on the shared real documents where they exist)."""

import io
import re
import struct
import zipfile
import zlib
from pathlib import Path

import docx
import openpyxl
import pytest
from docx.opc.constants import RELATIONSHIP_TYPE
from docx.oxml import parse_xml
from openpyxl.worksheet.formula import ArrayFormula

from dragoman.app.documents import DocumentError, is_supported
from bench.realdocs import TAG, EngineDocuments, StandIn, Unreadable, check_file, check_folder, compare, read_facts

REALDOCS = Path(__file__).resolve().parents[3] / "shared" / "realdocs"
W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
R = 'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"'


def png(width=2, height=2) -> bytes:
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def make_docx(path: Path) -> None:
    d = docx.Document()
    d.add_paragraph("The first paragraph of the report says what the report is about.")
    p = d.add_paragraph("Read ")
    rid = d.part.relate_to("https://example.org/guide", RELATIONSHIP_TYPE.HYPERLINK, is_external=True)
    p._p.append(parse_xml(f'<w:hyperlink {W} {R} r:id="{rid}"><w:r><w:t>the whole guide for the details</w:t></w:r></w:hyperlink>'))
    p.add_run(" before you start.")
    bold = d.add_paragraph("Some words are ")
    bold.add_run("printed in bold letters for emphasis").bold = True
    bold.add_run(" in this sentence.")
    table = d.add_table(rows=1, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Left cell of the table", "Right cell of the table"
    image = path.with_suffix(".png")
    image.write_bytes(png())
    d.add_picture(str(image))
    d.save(path)


def make_documents(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    make_docx(folder / "report.docx")
    (folder / "page.html").write_text(
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>A small page</title></head><body>'
        '<p id="top">Go to <a href="https://example.org/next">the next page of the manual</a> now.</p>'
        "<table><tr><td>First cell here</td><td>Second cell here</td></tr></table></body></html>",
        encoding="utf-8",
    )
    (folder / "film.srt").write_text(
        "1\n00:00:01,000 --> 00:00:02,500\nWhere are you going?\n\n2\n00:00:03,000 --> 00:00:04,000\nHome, at last.\n",
        encoding="utf-8",
    )
    (folder / "notes.md").write_text(
        "# Notes\n\nRun `make install` to build it. See [the docs](https://example.org/docs) too.\n",
        encoding="utf-8",
    )
    book = openpyxl.Workbook()
    sheet = book.active
    sheet["A1"], sheet["A2"], sheet["A3"], sheet["B1"] = 2, 3, "=SUM(A1:A2)", "Total of the column"
    sheet["C1"] = ArrayFormula("C1:C2", "=A1:A2*2")
    book.save(folder / "sums.xlsx")


def rewrite_member(source: Path, out: Path, member: str, change) -> None:
    """A copy of the zip `source` with `member` passed through `change(bytes) -> bytes`."""
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            zout.writestr(info, change(data) if info.filename == member else data)


def test_stand_in_rewrites_every_sentence_loses_tags_in_some_and_writes_chinese_without_spaces():
    sentences = [f"Sentence number {n} has <x1>some bold words</x1> and a few more words after them." for n in range(400)]
    french = StandIn("Latn")(sentences)
    assert french == StandIn("Latn")(sentences)  # deterministic
    assert all(t != s for t, s in zip(french, sentences))
    assert 0 < french.count("") < 12  # a few come back empty, as from a model now and then
    sentences = [s for s, t in zip(sentences, french) if t]
    french = [t for t in french if t]
    assert any("<x1>" in t and "</x1>" in t for t in french) and any("<x" not in t for t in french)
    assert any(len(t) < len(s) / 2 for t, s in zip(french, sentences))  # some much shorter
    assert not set(" ".join(french).split()) & set(" ".join(sentences).split()) - {"<x1>", "</x1>"} - set(map(str, range(400)))
    chinese = StandIn("Hans")(sentences)
    assert all(" " not in t and re.search(r"[\u4e00-\u9fff]", t) and not re.search(r"[a-z]", TAG.sub("", t)) for t in chinese)
    assert any("<x1>" in t for t in chinese) and any("<x" not in t for t in chinese)


@pytest.mark.parametrize("target", ["fra_Latn", "zho_Hans"])
def test_sound_documents_pass_and_a_file_no_library_reads_is_rightly_refused(tmp_path, target):
    make_documents(tmp_path / "docs")
    (tmp_path / "docs" / "broken.docx").write_bytes(b"not a zip archive")
    out = io.StringIO()
    problems = check_folder(tmp_path / "docs", target, out)
    report = out.getvalue()
    assert problems == 0, report
    assert report.splitlines()[-1] == f"{target}: 6 files, 0 problems"
    assert "broken.docx: refused, and rightly" in report
    assert report.count("translated") == 5


def drop_hyperlink(data: bytes) -> bytes:
    return re.sub(rb"<w:hyperlink[^>]*>(.*?)</w:hyperlink>", rb"\1", data)


def unbold(data: bytes) -> bytes:
    return data.replace(b"<w:b/>", b"")


def drop_paragraph(data: bytes) -> bytes:
    return re.sub(rb"<w:p>.*?</w:p>", b"", data, count=1)


def empty_a_table_cell(data: bytes) -> bytes:
    return data.replace(b"Left cell of the table", b"")


@pytest.mark.parametrize("change, expected", [
    (drop_hyperlink, "links: 1 became 0"),
    (unbold, "lost bold or italic"),
    (drop_paragraph, "paragraphs became"),
    (empty_a_table_cell, "came back without text"),
])
def test_a_word_output_that_lost_something_is_reported(tmp_path, change, expected):
    make_docx(tmp_path / "a.docx")
    rewrite_member(tmp_path / "a.docx", tmp_path / "b.docx", "word/document.xml", change)
    problems = compare(read_facts(tmp_path / "a.docx"), read_facts(tmp_path / "b.docx"))
    assert any(expected in p for p in problems), problems
    assert compare(read_facts(tmp_path / "a.docx"), read_facts(tmp_path / "a.docx")) == []


def test_bold_kept_on_a_figure_is_kept_and_bold_on_spaces_alone_is_lost(tmp_path):
    """A translation may put a run's mark on a figure (its words turned into numbers): the mark is
    kept. On spaces alone it is not."""
    make_docx(tmp_path / "a.docx")
    bold = "printed in bold letters for emphasis".encode()
    for text, kept in ((b"(1) 2026", True), (b"   ", False)):
        rewrite_member(tmp_path / "a.docx", tmp_path / "b.docx", "word/document.xml",
                       lambda data, text=text: data.replace(bold, text))
        problems = compare(read_facts(tmp_path / "a.docx"), read_facts(tmp_path / "b.docx"))
        assert (not any("lost bold" in p for p in problems)) == kept, problems


def test_a_changed_image_and_a_changed_formula_are_reported(tmp_path):
    make_documents(tmp_path)
    with zipfile.ZipFile(tmp_path / "report.docx") as z:
        image = next(n for n in z.namelist() if n.startswith("word/media/"))
    rewrite_member(tmp_path / "report.docx", tmp_path / "other.docx", image, lambda data: png(3, 2))
    assert any(p.startswith("media:") for p in compare(read_facts(tmp_path / "report.docx"), read_facts(tmp_path / "other.docx")))

    rewrite_member(tmp_path / "sums.xlsx", tmp_path / "other.xlsx", "xl/worksheets/sheet1.xml",
                   lambda data: data.replace(b"SUM(A1:A2)", b"SUM(A1:A3)"))
    problems = compare(read_facts(tmp_path / "sums.xlsx"), read_facts(tmp_path / "other.xlsx"))
    assert any(p.startswith("formulas:") and "SUM(A1:A3)" in p for p in problems), problems


def test_html_markdown_and_subtitle_outputs_that_lost_something_are_reported(tmp_path):
    make_documents(tmp_path)
    page = (tmp_path / "page.html").read_text(encoding="utf-8")
    (tmp_path / "page.html").write_text(page.replace('<p id="top">', '<p><a name="top"></a>'), encoding="utf-8")
    (tmp_path / "notes.md").write_text("Run `make` then `make install`.\n", encoding="utf-8")
    cases = {
        "page.html": [(lambda t: t.replace('<a name="top"></a>', ""), "anchors: 1 became 0"),
                      (lambda t: t.replace('href="https://example.org/next"', ""), "links: 1 became 0"),
                      (lambda t: t.replace('<meta charset="utf-8">', ""), "meta: 1 became 0"),
                      (lambda t: t.replace("<td>Second cell here</td>", ""), "table cells became 1")],
        "notes.md": [(lambda t: t.replace("`make` then `make install`", "`make``make install`"), "code:")],
        "film.srt": [(lambda t: t.replace("00:00:02,500", "00:00:02,600"), "timings:"),
                     (lambda t: t.replace("Home, at last.", "Home,\nat last."), "cue line counts:"),
                     (lambda t: t.replace("Where are you going?", "?"), "came back without text")],
    }
    for name, changes in cases.items():
        source = tmp_path / name
        for change, expected in changes:
            broken = tmp_path / f"broken{source.suffix}"
            broken.write_text(change(source.read_text(encoding="utf-8")), encoding="utf-8")
            problems = compare(read_facts(source), read_facts(broken))
            assert any(expected in p for p in problems), (name, expected, problems)


def test_an_output_its_library_cannot_open_is_unreadable(tmp_path):
    (tmp_path / "x.docx").write_bytes(b"PK\x03\x04 truncated")
    (tmp_path / "x.srt").write_text("no timings here\n", encoding="utf-8")
    for path in (tmp_path / "x.docx", tmp_path / "x.srt"):
        with pytest.raises(Unreadable):
            read_facts(path)


@pytest.mark.skipif(not REALDOCS.is_dir(), reason="no shared real documents on this machine")
def test_every_real_document_is_checked_without_a_crash():
    out = io.StringIO()
    problems = check_folder(REALDOCS, "zho_Hans", out)
    report = out.getvalue()
    files = sum(1 for p in REALDOCS.rglob("*") if p.is_file() and is_supported(p))
    assert report.splitlines()[-1] == f"zho_Hans: {files} files, {problems} problems"
    assert "crashed" not in report, report


def test_a_text_must_keep_its_lines_without_letters_in_order_and_may_gain_a_translation_without_letters(tmp_path):
    source = tmp_path / "notes.txt"
    source.write_text("Title\n=====\n\nFirst part.\nSecond part.\n\n----\n2024\n", encoding="utf-8")
    kept = tmp_path / "kept.txt"
    kept.write_text("Titre\n=====\n\n(1) (1)\nDeux.\n\n----\n2024\n", encoding="utf-8")  # a model's letterless line
    assert compare(read_facts(source), read_facts(kept)) == []
    for broken, lost in (("Titre\n==\n\nPartie.\n\n----\n2024\n", "'====='"),
                         ("Titre\n=====\n\nPartie.\n\n2024\n----\n", "'2024'")):
        (tmp_path / "broken.txt").write_text(broken, encoding="utf-8")
        problems = compare(read_facts(source), read_facts(tmp_path / "broken.txt"))
        assert problems == [f"lines without letters: 1 of 5 lost or moved, the first {lost}"], problems


@pytest.mark.skipif(not REALDOCS.is_dir(), reason="no shared real documents on this machine")
def test_real_documents_through_the_engine_on_the_tests_checkpoint(tiny_checkpoint, tmp_path):
    """What `python -m bench.realdocs --checkpoint` runs, on the real files of one project in every
    format (all of them take minutes on the CPU): the translation pipeline's document path with the real engine."""
    for path in REALDOCS.glob("*/argos-example.*"):
        (tmp_path / path.name).symlink_to(path)
    engine = EngineDocuments(tiny_checkpoint, "eng_Latn")
    for target in ("fra_Latn", "zho_Hans"):
        out = io.StringIO()
        assert check_folder(tmp_path, target, out, translate=engine) == 0, out.getvalue()


def make_pdf(path: Path, pages: list[str]) -> None:
    """A PDF of one line of text a page ("" for a page without text)."""
    from reportlab.pdfgen import canvas

    drawing = canvas.Canvas(str(path), invariant=1)
    for text in pages:
        if text:
            drawing.drawString(72, 720, text)
        else:
            drawing.rect(72, 600, 100, 100, fill=1)
        drawing.showPage()
    drawing.save()


def test_a_pdf_output_that_lost_a_page_or_a_page_s_text_is_reported(tmp_path):
    make_pdf(tmp_path / "a.pdf", ["The first page says something.", "The second page says more."])
    make_pdf(tmp_path / "short.pdf", ["Die erste Seite sagt etwas."])
    make_pdf(tmp_path / "blank.pdf", ["Die erste Seite sagt etwas.", ""])
    source = read_facts(tmp_path / "a.pdf")
    assert compare(source, read_facts(tmp_path / "a.pdf")) == []
    assert compare(source, read_facts(tmp_path / "short.pdf")) == ["2 pages became 1"]
    assert compare(source, read_facts(tmp_path / "blank.pdf")) == ["1 pages came back without text: 'The second page says more.'"]


def test_a_document_without_text_is_rightly_refused_and_one_with_text_is_not(tmp_path):
    make_pdf(tmp_path / "picture.pdf", [""])
    make_pdf(tmp_path / "text.pdf", ["A page with a sentence on it."])

    def refuse(path, out_path, target):
        raise DocumentError("no text to translate")

    what, problems = check_file(tmp_path / "picture.pdf", tmp_path / "out.pdf", "fra_Latn", refuse)
    assert what.startswith("refused, and rightly (its library finds no text either)") and problems == []
    what, problems = check_file(tmp_path / "text.pdf", tmp_path / "out.pdf", "fra_Latn", refuse)
    assert what == "refused" and problems == ["refused, though its format's library reads it: no text to translate"]
