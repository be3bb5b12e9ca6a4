"""What the PDF reader is asked to do is bounded: the glyphs and operators of a page and of the
document, the graphics states saved, the content decoded. Each hostile PDF is made here, refused in
one line naming the page or the bound, and leaves no output; with the stand-in and with the engine."""

import io
import zlib

import pikepdf
import pytest

from dragoman.app.documents import DocumentError, translate_document
from dragoman.app.documents import pdf as pdf_format
from dragoman.app.documents import pdf_blocks

from document_fakes import pdf_bytes


def with_contents(tmp_path, *pages: bytes, forms: dict[str, bytes] | None = None):
    """A PDF whose pages run the given content streams (each Flate-compressed), with Helvetica as
    /F1 and `forms` as form XObjects every page may draw."""
    path = tmp_path / "hostile.pdf"
    with pikepdf.open(io.BytesIO(pdf_bytes([["A first sentence."]] * len(pages)))) as pdf:
        xobjects = pikepdf.Dictionary()
        for name, content in (forms or {}).items():
            form = pikepdf.Stream(pdf, b"")
            form.write(zlib.compress(content), filter=pikepdf.Name.FlateDecode)
            form.Type, form.Subtype, form.BBox = pikepdf.Name.XObject, pikepdf.Name.Form, [0, 0, 612, 792]
            xobjects[name] = pdf.make_indirect(form)
        for page, content in zip(pdf.pages, pages):
            stream = pikepdf.Stream(pdf, b"")
            stream.write(zlib.compress(content), filter=pikepdf.Name.FlateDecode)
            page.Contents = pdf.make_indirect(stream)
            page.Resources.XObject = xobjects
        pdf.save(path)
    return path


def refused(path, tmp_path, translate, message):
    with pytest.raises(DocumentError, match=message):
        translate_document(path, tmp_path / "out.pdf", translate)
    assert not (tmp_path / "out.pdf").exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == [path.name]  # no temporary left


def test_one_show_of_ten_million_characters_is_refused_before_it_is_read(tmp_path, translate):
    path = with_contents(tmp_path, b"BT /F1 12 Tf 72 720 Td (" + b"a" * 10_000_000 + b") Tj ET")
    assert path.stat().st_size < 100_000
    refused(path, tmp_path, translate, r"^page 1 shows over 100,000 characters, which is refused$")


def test_drawing_operators_run_by_a_form_drawn_many_times_are_bounded(tmp_path, translate, monkeypatch):
    monkeypatch.setattr(pdf_blocks, "MAX_PAGE_OPERATORS", 20_000)  # the real bound works alike, slower to pass
    path = with_contents(tmp_path, b"BT /F1 12 Tf 72 720 Td (Text.) Tj ET " + b"/Fm Do " * 100,
                         forms={"/Fm": b"0 0 m 1 1 l S\n" * 100})
    refused(path, tmp_path, translate, r"^page 1 runs over 20,000 drawing and text operators, which is refused$")


def test_graphics_states_saved_without_end_are_bounded(tmp_path, translate):
    path = with_contents(tmp_path, b"q " * 1_000_000 + b"BT /F1 12 Tf 72 720 Td (Text.) Tj ET")
    refused(path, tmp_path, translate, r"^page 1 saves the graphics state over 256 times without restoring it")


def test_the_documents_glyphs_and_operators_are_bounded_over_pages_each_within_its_own(tmp_path, translate, monkeypatch):
    page = b"BT /F1 12 Tf 72 720 Td (" + b"word " * 2_000 + b") Tj ET"
    monkeypatch.setattr(pdf_blocks, "MAX_DOCUMENT_GLYPHS", 25_000)
    refused(with_contents(tmp_path, *[page] * 3), tmp_path, translate, r"^its pages show over 25,000 characters")
    monkeypatch.undo()
    monkeypatch.setattr(pdf_blocks, "MAX_DOCUMENT_OPERATORS", 25_000)
    drawing = b"0 0 m 1 1 l S\n" * 1_000
    refused(with_contents(tmp_path, *[drawing] * 5), tmp_path, translate,
            r"^its pages run over 25,000 drawing and text operators")


def test_bounds_hold_over_pages_read_in_several_processes(tmp_path, translate, monkeypatch):
    monkeypatch.setattr(pdf_blocks, "PAGES_PER_READER", 1)
    monkeypatch.setattr(pdf_blocks, "RANGE_PAGES", 1)
    monkeypatch.setattr(pdf_blocks, "usable_cores", lambda: 4)
    page = b"BT /F1 12 Tf 72 720 Td (" + b"word " * 2_000 + b") Tj ET"
    hostile = b"BT /F1 12 Tf 72 720 Td (" + b"a" * 200_000 + b") Tj ET"
    # a page's bound, passed in a reading process: the page named as in one process
    refused(with_contents(tmp_path, page, page, hostile, page), tmp_path, translate,
            r"^page 3 shows over 100,000 characters, which is refused$")
    # the document's, which each process's range keeps on its own: their sum is bounded here
    monkeypatch.setattr(pdf_blocks, "MAX_DOCUMENT_GLYPHS", 25_000)
    refused(with_contents(tmp_path, *[page] * 4), tmp_path, translate, r"^its pages show over 25,000 characters")


def test_content_spread_over_many_pages_each_under_the_page_bound_is_bounded(tmp_path, translate, monkeypatch):
    monkeypatch.setattr(pdf_format, "MAX_CONTENT_BYTES", 3 * 2**20)  # the real bound works alike, slower to build
    spaces = b" " * 2**20 + b"BT /F1 12 Tf 72 720 Td (Text.) Tj ET"
    path = with_contents(tmp_path, *[spaces] * 4)
    assert path.stat().st_size < 2**20 // 10
    refused(path, tmp_path, translate, r"^its pages' content decodes to over 3 MiB of text and drawing operators")


def test_a_page_within_every_bound_is_translated(tmp_path, translate):
    content = b"q " * 100 + b"Q " * 100 + b"0 0 m 1 1 l S\n" * 1_000 + b"BT /F1 12 Tf 72 720 Td (A sentence to read.) Tj ET"
    out = translate_document(with_contents(tmp_path, content, forms={"/Fm": b"0 0 m 1 1 l S\n"}), tmp_path / "out.pdf",
                             translate)
    assert out.exists()
