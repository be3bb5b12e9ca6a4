"""Text drawn by form XObjects (app.documents.pdf_forms): moved onto the page, in its place and its
font, and translated like the page's own text, by a fake and by the real engine."""

import io
from collections.abc import Iterable
from pathlib import Path

import pikepdf
import pytest
from pdfminer.high_level import extract_pages, extract_text
from pdfminer.layout import LTChar

from dragoman.app.documents import DocumentError, translate_document
from dragoman.app.documents.pdf_forms import inline_text_forms

from document_fakes import upper_keeping_tags


def font(pdf, name):
    return pdf.make_indirect(pikepdf.Dictionary(Type=pikepdf.Name.Font, Subtype=pikepdf.Name.Type1,
                                                BaseFont=pikepdf.Name("/" + name)))


def form(pdf, content: bytes, resources: dict | None, matrix=(1, 0, 0, 1, 0, 0)):
    stream = pikepdf.Stream(pdf, content)
    stream.Type, stream.Subtype = pikepdf.Name.XObject, pikepdf.Name.Form
    stream.BBox, stream.Matrix = [0, 0, 612, 792], list(matrix)
    if resources is not None:
        stream.Resources = pikepdf.Dictionary(resources)
    return pdf.make_indirect(stream)


def make_pdf(path: Path, with_text: bool = True) -> None:
    """Two pages drawing one form (shifted down 100 pt) whose font /F1 is Times-Bold where the page's
    /F1 is Helvetica, and which draws a form of its own in Times; page 1 has a heading and a blue square."""
    pdf = pikepdf.new()
    nested = form(pdf, b"BT /F2 12 Tf 72 400 Td (Nested form text here.) Tj ET" if with_text else b"0 0 m 9 9 l S",
                  {"/Font": pikepdf.Dictionary(F2=font(pdf, "Times-Roman"))})
    outer = form(pdf, (b"BT /F1 12 Tf 72 600 Td (A sentence inside a form.) Tj ET " if with_text else b"") + b"/Fm2 Do",
                 {"/Font": pikepdf.Dictionary(F1=font(pdf, "Times-Bold")), "/XObject": pikepdf.Dictionary(Fm2=nested)},
                 matrix=(1, 0, 0, 1, 0, -100))
    for content in (b"BT /F1 14 Tf 72 740 Td (The page's own heading.) Tj ET q 0 0 1 rg 50 50 100 100 re f Q /Fm1 Do",
                    b"/Fm1 Do"):
        page = pikepdf.Dictionary(Type=pikepdf.Name.Page, MediaBox=[0, 0, 612, 792], Contents=pdf.make_stream(content),
                                  Resources=pikepdf.Dictionary(Font=pikepdf.Dictionary(F1=font(pdf, "Helvetica")),
                                                               XObject=pikepdf.Dictionary(Fm1=outer)))
        pdf.pages.append(pikepdf.Page(page))
    pdf.save(path)


def chars(data: bytes) -> list[tuple[str, str, int, int]]:
    """The first page's characters, drawn by the page or by a form: (character, font, x, y)."""
    found = []

    def walk(element):
        if isinstance(element, LTChar):
            found.append((element.get_text(), element.fontname, round(element.x0), round(element.y0)))
        elif isinstance(element, Iterable):
            for child in element:
                walk(child)

    walk(next(iter(extract_pages(io.BytesIO(data)))))
    return sorted(found)


def line_font(found, y: int) -> set[str]:
    return {font for _, font, _, char_y in found if abs(char_y - y) <= 4}  # y0 is the baseline less the descent


def test_text_drawn_by_forms_moves_onto_the_page_in_its_place_and_font(tmp_path):
    make_pdf(tmp_path / "forms.pdf")
    before = chars((tmp_path / "forms.pdf").read_bytes())
    with pikepdf.open(tmp_path / "forms.pdf") as pdf:
        assert inline_text_forms(pdf) == 4  # both pages: the form and the form inside it
        buffer = io.BytesIO()
        pdf.save(buffer)
        contents = pdf.pages[0].Contents.read_bytes()
        assert b" Do" not in contents and b"/F1_f1 12 Tf" in contents  # Times-Bold renamed beside the page's Helvetica
    after = chars(buffer.getvalue())
    assert after == before and len(after) > 60  # the same characters, fonts and places
    # the heading, the form's line (600 - 100 pt) and the nested form's (400 - 100 pt)
    assert [line_font(after, y) for y in (737, 498, 297)] == [{"Helvetica"}, {"Times-Bold"}, {"Times-Roman"}]


def test_a_page_inheriting_its_resources_gets_its_own(tmp_path):
    make_pdf(tmp_path / "forms.pdf")
    with pikepdf.open(tmp_path / "forms.pdf") as pdf:
        pdf.Root.Pages.Resources = pdf.pages[1].Resources
        del pdf.pages[1].obj["/Resources"]  # page 2 draws the form through its page tree's resources
        assert inline_text_forms(pdf) == 4
        assert b"/F1_f1 12 Tf" in pdf.pages[1].Contents.read_bytes()
        assert "/F1_f1" in pdf.pages[1].Resources.Font and "/F1_f1" not in pdf.Root.Pages.Resources.Font


def test_forms_without_text_are_left_alone(tmp_path):
    make_pdf(tmp_path / "drawing.pdf", with_text=False)
    with pikepdf.open(tmp_path / "drawing.pdf") as pdf:
        assert inline_text_forms(pdf) == 0
        assert b"/Fm1 Do" in pdf.pages[0].Contents.read_bytes()


def test_a_page_whose_text_is_all_in_forms_is_translated(tmp_path):
    make_pdf(tmp_path / "forms.pdf")
    source = (tmp_path / "forms.pdf").read_bytes()
    sent = []

    def translate(texts):
        sent.extend(texts)
        return upper_keeping_tags(texts)

    translate_document(tmp_path / "forms.pdf", tmp_path / "out.pdf", translate)
    assert (tmp_path / "forms.pdf").read_bytes() == source
    assert {"A sentence inside a form.", "Nested form text here."} <= set(sent)
    text = " ".join(extract_text(tmp_path / "out.pdf").split())  # translations wrap in their boxes
    assert "T:A SENTENCE INSIDE A FORM." in text and "T:NESTED FORM TEXT HERE." in text
    assert "A sentence inside a form." not in text
    with pikepdf.open(tmp_path / "out.pdf") as out:
        assert len(out.pages) == 2 and b"0 0 1 rg" in out.pages[0].Contents.read_bytes()  # the square is still drawn


def test_a_pdf_drawing_only_forms_without_text_still_says_it_has_no_text(tmp_path):
    make_pdf(tmp_path / "drawing.pdf", with_text=False)
    with pikepdf.open(tmp_path / "drawing.pdf", allow_overwriting_input=True) as pdf:
        pdf.pages[0].Contents = pdf.make_stream(b"/Fm1 Do")
        pdf.save(tmp_path / "drawing.pdf")
    with pytest.raises(DocumentError, match="no text"):
        translate_document(tmp_path / "drawing.pdf", tmp_path / "out.pdf", upper_keeping_tags)


def test_the_real_engine_translates_the_text_of_forms(tmp_path, tiny_checkpoint):
    from dragoman.app.session.jobs import DocumentJob
    from dragoman.app.session.session import TranslationSession
    from dragoman.engine import Translator

    make_pdf(tmp_path / "forms.pdf")
    pipeline = TranslationSession(Translator(tiny_checkpoint, device="cpu", dtype="float32"))
    pipeline.translate_document(DocumentJob(tmp_path / "forms.pdf", tmp_path / "out.pdf", "eng_Latn", "fra_Latn"))
    text = extract_text(tmp_path / "out.pdf")
    assert "A sentence inside a form." not in text and "Nested form text here." not in text
    with pikepdf.open(tmp_path / "out.pdf") as out:
        assert len(out.pages) == 2
