"""PDF in, PDF out: documents made with reportlab, translated with the fakes, read back with pdfminer.six
and pikepdf. Pages, images and links stay; each block's text is replaced in its place by real,
embedded, extractable text; bilingual output; scans, missing fonts and hostile files refused."""

import io
import re
import unicodedata
import zlib
from pathlib import Path

import pikepdf
import pytest
from PIL import Image
from reportlab.lib.pagesizes import A4
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.cidfonts import UnicodeCIDFont
from reportlab.pdfbase.ttfonts import TTFont
from reportlab.pdfgen import canvas

from dragoman.app.documents import DocumentError, translate_document
from dragoman.app.documents import pdf as pdf_format
from dragoman.app.documents import pdf_blocks

from document_fakes import Recording, pdf_bytes, upper_keeping_tags, upper_losing_tags

NOTO = "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf"
W, H = A4
PARAGRAPH = [
    "This paragraph explains what the project does and why it",
    "matters to the people who use it every day. It continues",
    "on a third line.",
]
LEFT = ["The left column starts here and runs", "down the page for a few lines of", "ordinary words."]
RIGHT = ["The right column is read after the", "left one, from its top to its", "bottom."]


def draw_lines(c, x, y, lines, size=11, leading=14):
    """Lines of Helvetica from (x, y) down, as one text object (one block for the reader)."""
    text = c.beginText(x, y)
    text.setFont("Helvetica", size)
    text.setLeading(leading)
    for line in lines:
        text.textLine(line)
    c.drawText(text)


def make_pdf(path):
    """Page 1: header, heading, paragraph, bold run, Cyrillic, Chinese, a link, an image, a footnote, a page number.
    Page 2: two columns and a ruled table."""
    pdfmetrics.registerFont(TTFont("NotoSans", NOTO))
    pdfmetrics.registerFont(UnicodeCIDFont("STSong-Light"))
    c = canvas.Canvas(str(path), pagesize=A4)
    c.setFont("Helvetica", 9)
    c.drawString(72, H - 40, "Annual report of the society")
    c.drawRightString(W - 72, H - 40, "Spring issue")
    c.setFont("Helvetica-Bold", 18)
    c.drawString(72, H - 90, "Introduction to the project")
    draw_lines(c, 72, H - 120, PARAGRAPH)
    text = c.beginText(72, H - 190)
    text.setFont("Helvetica", 11)
    text.textOut("A line with ")
    text.setFont("Helvetica-Bold", 11)
    text.textOut("bold words")
    text.setFont("Helvetica", 11)
    text.textLine(" inside it.")
    c.drawText(text)
    c.setFont("NotoSans", 11)
    c.drawString(72, H - 230, "Привет, мир. Это строка по-русски.")
    c.setFont("STSong-Light", 11)
    c.drawString(72, H - 260, "这是一个中文句子。")
    c.setFont("Helvetica", 11)
    c.drawString(72, H - 290, "Visit our website for more.")
    c.linkURL("https://example.org/report", (72, H - 293, 220, H - 280))
    image = io.BytesIO()
    Image.new("RGB", (40, 30), (200, 30, 30)).save(image, "PNG")
    image.seek(0)
    from reportlab.lib.utils import ImageReader

    c.drawImage(ImageReader(image), 400, H - 300, 80, 60)
    c.setFont("Helvetica", 7)
    c.drawString(72, 60, "1 A footnote at the foot of the page.")
    c.setFont("Helvetica", 9)
    c.drawString(W / 2, 30, "3")
    c.showPage()
    for x, lines in ((72, LEFT), (320, RIGHT)):
        draw_lines(c, x, H - 80, lines)
    c.setFont("NotoSans", 11)
    c.drawString(72, H - 200, "• The first item of a list")
    c.drawString(72, H - 216, "• The second item")
    c.setFont("Courier", 10)
    c.drawString(72, H - 240, "print(value)  # code")
    rows = [("Name", "Colour"), ("Apple", "Green"), ("Cherry", "Dark red")]
    for r, row in enumerate(rows):
        y = H - 300 - 24 * r
        for col, cell in enumerate(row):
            c.setFont("Helvetica", 10)
            c.drawString(78 + 150 * col, y + 7, cell)
        c.line(72, y, 372, y)
    for x in (72, 222, 372):
        c.line(x, H - 300 - 24 * 2, x, H - 276)
    c.showPage()
    c.save()


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    path = tmp_path_factory.mktemp("pdf") / "report.pdf"
    make_pdf(path)
    return path


@pytest.fixture(scope="module")
def translated(source):
    out = source.with_name("report.fra_Latn.pdf")
    translate_document(source, out, upper_keeping_tags)
    return out


def chars(path):
    """(page number, LTChar) of every character pdfminer reads."""
    from pdfminer.high_level import extract_pages
    from pdfminer.layout import LTChar

    def walk(item):
        if isinstance(item, LTChar):
            yield item
        for child in getattr(item, "_objs", []) if not isinstance(item, LTChar) else []:
            yield from walk(child)

    return [(n, c) for n, page in enumerate(extract_pages(str(path))) for c in walk(page)]


def lines(path):
    """Each page's text lines as pdfminer groups them: their boxes."""
    from pdfminer.high_level import extract_pages
    from pdfminer.layout import LTTextLineHorizontal

    def walk(item):
        if isinstance(item, LTTextLineHorizontal):
            yield item.bbox
        else:
            for child in getattr(item, "_objs", []):
                yield from walk(child)

    return [list(walk(page)) for page in extract_pages(str(path))]


def page_texts(path):
    from pdfminer.high_level import extract_text

    return [extract_text(str(path), page_numbers=[n]) for n in range(len(pikepdf.open(path).pages))]


def test_pages_images_and_links_are_kept(source, translated):
    with pikepdf.open(source) as a, pikepdf.open(translated) as b:
        assert len(a.pages) == len(b.pages) == 2
        assert [list(p.mediabox) for p in a.pages] == [list(p.mediabox) for p in b.pages]
        images = lambda pdf: [x.read_raw_bytes() for page in pdf.pages for x in page.get_images().values()]
        assert images(a) == images(b) and len(images(a)) == 1
        links = lambda pdf: [(str(an.A.URI), [float(v) for v in an.Rect]) for page in pdf.pages for an in page.get("/Annots", [])]
        assert links(a) == links(b) and [uri for uri, _ in links(a)] == ["https://example.org/report"]


def test_every_block_is_replaced_by_its_translation(translated):
    first, second = page_texts(translated)
    for expected in ("T:ANNUAL REPORT OF THE SOCIETY", "T:INTRODUCTION TO THE PROJECT", "T:ПРИВЕТ, МИР.",
                     "T:ЭТО СТРОКА ПО-РУССКИ.", "T:这是一个中文句子。", "T:VISIT OUR WEBSITE FOR MORE.",
                     "T:1 A FOOTNOTE AT THE FOOT OF THE PAGE."):
        assert expected in first
    flat = " ".join(first.split())
    # the paragraph's lines were one text: its first sentence runs across the line break
    assert "T:THIS PARAGRAPH EXPLAINS WHAT THE PROJECT DOES AND WHY IT MATTERS TO THE PEOPLE WHO USE IT EVERY DAY." in flat
    assert "T:A LINE WITH BOLD WORDS INSIDE IT." in flat
    assert re.search(r"(?m)^3$", first)  # the page number is kept as it was
    flat = " ".join(second.split())
    assert flat.index("T:THE LEFT COLUMN") < flat.index("T:THE RIGHT COLUMN")  # reading order across columns
    for cell in ("T:NAME", "T:COLOUR", "T:APPLE", "T:GREEN", "T:CHERRY", "T:DARK RED"):
        assert cell in flat
    assert "• T:THE FIRST ITEM OF A LIST • T:THE SECOND ITEM" in flat  # list markers kept out of the translation
    assert "print(value)  # code" in second  # code (monospaced text) is kept as it is
    for text in (first, second.replace("print(value)  # code", "")):  # no source text left: translated words are upper case
        assert not re.search(r"[a-zа-я]{2,}", text), text


def test_the_translation_is_real_embedded_text_in_its_boxes(source, translated):
    source_chars = chars(source)
    out = chars(translated)
    ours = [(n, c) for n, c in out if "+Noto" in c.fontname]
    assert {c.get_text() for _, c in ours} >= set("T:ANNUALПРИВЕТ这是中文")
    assert all(c.get_text() != "\ufffd" and not c.get_text().startswith("(cid:") for _, c in ours)
    assert not any(n == 0 and c.fontname.endswith("Helvetica") and c.get_text().isalpha() for n, c in out)
    # each glyph lies within the page, and no two lines of the translation overlap
    for n, c in ours:
        assert 0 <= c.x0 and c.x1 <= W and 0 <= c.y0 and c.y1 <= H
    for boxes in lines(translated):
        for i, a in enumerate(boxes):
            for b in boxes[i + 1 :]:
                assert min(a[2], b[2]) - max(a[0], b[0]) < 0.5 or min(a[3], b[3]) - max(a[1], b[1]) < 0.5, (a, b)
    # a right-aligned header stays flush right
    header = [c for n, c in ours if n == 0 and c.y0 > H - 45 and c.x0 > W / 2]
    assert "".join(c.get_text() for c in header) == "T:SPRING ISSUE" and abs(max(c.x1 for c in header) - (W - 72)) < 1
    # the paragraph's translation stays in the paragraph's box
    paragraph = [c for n, c in source_chars if n == 0 and c.bbox[1] < H - 110 and c.bbox[3] > H - 150]
    x0, y0 = min(c.bbox[0] for c in paragraph), min(c.bbox[1] for c in paragraph)
    x1, y1 = max(c.bbox[2] for c in paragraph), max(c.bbox[3] for c in paragraph)
    inside = [c for n, c in ours if n == 0 and c.bbox[1] < H - 110 and c.bbox[3] > H - 150]
    assert inside and all(x0 - 1 <= c.bbox[0] and c.bbox[2] <= x1 + 1 and y0 - 1 <= c.bbox[1] and c.bbox[3] <= y1 + 1 for c in inside)
    with pikepdf.open(translated) as pdf:
        fonts = [f for page in pdf.pages for f in page.Resources.Font.values()
                 if f.get("/Subtype") == "/Type0" and "+Noto" in str(f.get("/BaseFont"))]
        assert fonts
        for font in fonts:
            descendant = font.DescendantFonts[0]
            assert "/ToUnicode" in font and "/FontFile2" in descendant.FontDescriptor
            from fontTools.ttLib import TTFont as FontFile

            embedded = FontFile(io.BytesIO(descendant.FontDescriptor.FontFile2.read_bytes()))
            glyf = embedded["glyf"]
            # a subset: .notdef and the glyphs drawn, every one with an outline (no .notdef boxes drawn)
            assert len(embedded.getGlyphOrder()) < 100
            assert all(glyf[name].numberOfContours for name in embedded.getGlyphOrder()[1:]
                       if not re.search(rb"<%04X> <0020>" % embedded.getGlyphID(name), font.ToUnicode.read_bytes()))


def test_bilingual_puts_each_original_page_before_its_translation(source, tmp_path):
    out = tmp_path / "report.fra_Latn.bilingual.pdf"
    translate_document(source, out, upper_losing_tags, options={"bilingual": True})
    texts = page_texts(out)
    assert len(texts) == 4
    assert "Introduction to the project" in texts[0] and "T:INTRODUCTION TO THE PROJECT" in texts[1]
    assert "The left column" in texts[2] and "T:THE LEFT COLUMN" in texts[3]


def test_a_blank_scan_is_named_as_such(tmp_path):
    path = tmp_path / "scan.pdf"
    c = canvas.Canvas(str(path), pagesize=A4)
    image = io.BytesIO()
    Image.new("L", (50, 70), 230).save(image, "PNG")
    image.seek(0)
    from reportlab.lib.utils import ImageReader

    c.drawImage(ImageReader(image), 0, 0, W, H)
    c.showPage()
    c.save()
    with pytest.raises(DocumentError, match=r"^no text to translate \(OCR found no text in the scanned pages\)$"):
        translate_document(path, tmp_path / "out.pdf", upper_keeping_tags)


def test_invisible_text_that_is_not_over_a_scan_stays_as_it_is(tmp_path):
    path = tmp_path / "hidden.pdf"
    c = canvas.Canvas(str(path), pagesize=A4)
    c.setFont("Helvetica", 11)
    c.drawString(72, H - 100, "A visible sentence to translate.")
    text = c.beginText(72, H - 200)
    text.setTextRenderMode(3)
    text.setFont("Helvetica", 11)
    text.textLine("A hidden sentence for search engines.")
    c.drawText(text)
    c.showPage()
    c.save()
    from pdfminer.high_level import extract_text

    out = translate_document(path, tmp_path / "out.pdf", upper_keeping_tags)
    content = b"".join(pikepdf.Page(page).obj.Contents.read_bytes() for page in pikepdf.open(out).pages)
    assert b"3 Tr" in content and b"re f" not in content  # kept, invisible, nothing covered
    assert "A hidden sentence" in extract_text(str(out)) and "A VISIBLE SENTENCE" in extract_text(str(out))


def test_no_font_for_the_script_is_one_line_naming_it(source, tmp_path, monkeypatch):
    empty = tmp_path / "fonts.conf"
    empty.write_text('<?xml version="1.0"?><!DOCTYPE fontconfig SYSTEM "fonts.dtd"><fontconfig></fontconfig>')
    monkeypatch.setenv("FONTCONFIG_FILE", str(empty))
    with pytest.raises(DocumentError, match=r"^no font for the Latin script \(U\+0054\) is installed: install a Noto font"):
        translate_document(source, tmp_path / "out.pdf", upper_keeping_tags)
    assert not (tmp_path / "out.pdf").exists()


def test_a_character_no_font_has_is_drawn_as_a_box_and_said_once(source, tmp_path):
    """U+05EF (HEBREW YOD TRIANGLE) is in no Noto or DejaVu font: the document is written all the
    same, the sentence around it typeset, and one note names it."""
    from pdfminer.high_level import extract_text

    notes = []
    out = translate_document(source, tmp_path / "out.pdf", lambda texts: [t + " \u05ef" for t in upper_keeping_tags(texts)],
                             note=notes.append)
    assert "T:" in extract_text(str(out))
    assert len(notes) == 1 and notes[0].startswith("no installed font has U+05EF (Hebrew): drawn as boxes")


def test_hostile_pdfs_are_refused_by_name(source, tmp_path, monkeypatch):
    monkeypatch.setattr(pdf_format, "MAX_PAGES", 1)
    with pytest.raises(DocumentError, match=r"^too many pages \(2; the limit is 1\)$"):
        translate_document(source, tmp_path / "out.pdf", upper_keeping_tags)
    monkeypatch.undo()
    monkeypatch.setattr(pdf_format, "MAX_STREAM_BYTES", 2**20)  # the real limit works alike, slower to build
    bomb = tmp_path / "bomb.pdf"
    with pikepdf.open(source) as pdf:
        stream = pikepdf.Stream(pdf, b"")
        stream.write(zlib.compress(b" " * (2**20 + 1)), filter=pikepdf.Name.FlateDecode)
        pdf.pages[0].Contents = pikepdf.Array([pdf.pages[0].Contents, pdf.make_indirect(stream)])
        pdf.save(bomb)
    assert bomb.stat().st_size < 2**20 // 10
    with pytest.raises(DocumentError, match=r"^a stream of the PDF inflates to over 1 MiB: a decompression bomb$"):
        translate_document(bomb, tmp_path / "out.pdf", upper_keeping_tags)
    deep = tmp_path / "deep.pdf"
    deep.write_bytes(nested(pdf_bytes([["Deep nesting ahead."]]), 100_000))
    with pytest.raises(DocumentError, match=r"^corrupt or unreadable PDF \(unable to find /Root dictionary\)$"):
        translate_document(deep, tmp_path / "out.pdf", upper_keeping_tags)
    assert not (tmp_path / "out.pdf").exists()


def nested(data: bytes, depth: int) -> bytes:
    """The PDF with an array nested `depth` deep in its catalog, every offset right."""
    objects = re.findall(rb"\d+ 0 obj\n(.*?)\nendobj\n", data, re.S)
    objects[0] = objects[0].replace(b">>", b"/Deep " + b"[" * depth + b"]" * depth + b" >>")
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1) + b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def one_paragraph(path):
    c = canvas.Canvas(str(path), pagesize=A4)
    draw_lines(c, 72, H - 100, PARAGRAPH, size=12, leading=15)
    c.showPage()
    c.save()


def to_unicode(path):
    """{text: how many glyphs stand for it} over the ToUnicode maps of the fonts drawn in."""
    counts = {}
    with pikepdf.open(path) as pdf:
        for font in pdf.pages[0].Resources.Font.values():
            if "/ToUnicode" in font:
                for hex_text in re.findall(rb"<[0-9A-F]{4}> <([0-9A-F]+)>", font.ToUnicode.read_bytes()):
                    text = bytes.fromhex(hex_text.decode()).decode("utf-16-be")
                    counts[text] = counts.get(text, 0) + 1
    return counts


@pytest.mark.parametrize("translation, check", [
    ("بببب مرحبا بالعالم.", lambda glyphs: glyphs["ب"] >= 3),  # joining forms: initial, medial, final
    ("नमस्ते दुनिया, यह एक वाक्य है।", lambda glyphs: any(len(t) > 1 for t in glyphs)),  # conjuncts: one glyph, several characters
    # a vowel mark stays in its base letter's cluster
    ("สวัสดีชาวโลก นี่คือประโยค", lambda glyphs: any(len(t) > 1 and unicodedata.category(t[-1]) == "Mn" for t in glyphs)),
    ("שלום עולם, זה משפט.", lambda glyphs: "ש" in glyphs),
], ids=["Arabic", "Devanagari", "Thai", "Hebrew"])
def test_every_script_is_shaped_and_embedded(tmp_path, translation, check):
    source = tmp_path / "one.pdf"
    one_paragraph(source)
    out = tmp_path / "one.x.pdf"
    translate_document(source, out, lambda texts: [translation] * len(texts))
    glyphs = to_unicode(out)
    assert check(glyphs), glyphs
    drawn = "".join(glyphs)
    assert set(translation.replace(" ", "")) <= set(drawn)  # every character has a glyph and is extractable
    ours = [c for _, c in chars(out)]
    assert ours and all("+Noto" in c.fontname for c in ours)
    if translation[0] in "בשמ" or "\u0600" <= translation[0] <= "\u06ff":  # right to left: set flush right
        assert abs(max(c.x1 for c in ours) - max(c.x1 for _, c in chars(source))) < 2


def test_a_sentence_running_into_the_next_column_and_page_is_translated_whole(tmp_path):
    path = tmp_path / "flow.pdf"
    c = canvas.Canvas(str(path), pagesize=A4)
    columns = [(72, ["A sentence starts in the left", "column and then it goes"]),
               (320, ["on into the right column and", "ends here. Another one starts"])]
    for x, lines in columns:
        draw_lines(c, x, H - 80, lines)
    c.setFont("Helvetica", 8)
    c.drawString(W / 2, 30, "1")
    c.showPage()
    c.setFont("Helvetica", 8)
    c.drawString(72, H - 40, "Running header")
    c.setFont("Helvetica", 11)
    c.drawString(72, H - 80, "at the end of the page and finishes on the next.")
    c.showPage()
    c.save()
    translate = Recording(upper_keeping_tags)

    out = tmp_path / "flow.fra_Latn.pdf"
    translate_document(path, out, translate)
    assert "A sentence starts in the left column and then it goes on into the right column and ends here." in translate.sent
    assert "Another one starts at the end of the page and finishes on the next." in translate.sent
    first, second = page_texts(out)
    # each block gets its share of the translation, in its own place
    assert "T:A SENTENCE STARTS" in first and "FINISHES ON THE NEXT." in second and "T:RUNNING HEADER" in second
    left = [c for n, c in chars(out) if n == 0 and c.x1 < 300 and c.get_text().strip()]
    right = [c for n, c in chars(out) if n == 0 and c.x0 > 300 and c.get_text().strip()]
    assert left and right


def test_one_operator_drawing_a_kept_and_a_translated_block_is_cut_between_them(tmp_path):
    path = tmp_path / "header.pdf"
    path.write_bytes(pdf_bytes([["The body text of the page."]]))
    with pikepdf.open(path, allow_overwriting_input=True) as pdf:
        header = b"BT /F1 9 Tf 72 760 Td [(Chapter two: the tools) -30000 (17)] TJ ET"
        pdf.pages[0].Contents = pikepdf.Array([pdf.pages[0].Contents, pdf.make_indirect(pikepdf.Stream(pdf, header))])
        pdf.save(path)
    out = tmp_path / "header.x.pdf"
    translate_document(path, out, upper_keeping_tags)
    before = {c.get_text(): c for _, c in chars(path) if c.get_text() in "17"}
    after = [c for _, c in chars(out) if c.get_text() in "17" and "Helvetica" in c.fontname]
    assert [c.get_text() for c in after] == ["1", "7"]  # the page number stays, drawn by the original operator
    assert all(abs(c.x0 - before[c.get_text()].x0) < 0.01 and abs(c.y0 - before[c.get_text()].y0) < 0.01 for c in after)
    text = page_texts(out)[0]
    assert "T:CHAPTER TWO: THE TOOLS" in text and "Chapter" not in text


def test_fonts_are_found_in_the_font_folders_without_fontconfig(source, tmp_path, monkeypatch):
    """As on Windows and macOS: the folders' fonts named from their own name tables, Noto Sans first."""
    from dragoman.app.documents import pdf_fonts

    monkeypatch.setattr(pdf_fonts.shutil, "which", lambda name: None)
    noto = Path(NOTO).parent
    monkeypatch.setitem(pdf_fonts.FONT_FOLDERS, "linux", [noto, noto.parent.parent / "opentype"])
    out = tmp_path / "out.pdf"
    translate_document(source, out, upper_keeping_tags)
    assert "T:这是一个中文句子。" in page_texts(out)[0]
    with pikepdf.open(out) as pdf:
        names = {str(f.BaseFont).split("+")[1] for f in pdf.pages[0].Resources.Font.values() if "+Noto" in str(f.get("/BaseFont"))}
    assert {"NotoSans-Regular", "NotoSans-Bold", "NotoSerifCJKSC-Regular"} <= names  # STSong is a serif (Song) face


def test_text_in_forms_is_translated_and_on_rotated_pages_left_as_it_is(tmp_path):
    """A form XObject's text is translated as the page's own (app.documents.pdf_forms, tested
    there); not yet the text of a page shown rotated, which stays exactly as it was."""
    path = tmp_path / "forms.pdf"
    c = canvas.Canvas(str(path), pagesize=A4)
    c.beginForm("stamp")
    c.setFont("Helvetica", 12)
    c.drawString(72, 400, "Text inside a form")
    c.endForm()
    c.doForm("stamp")
    c.setFont("Helvetica", 12)
    c.drawString(72, 700, "Text on the page itself")
    c.showPage()
    c.setFont("Helvetica", 12)
    c.drawString(72, 700, "Text on a rotated page")
    c.showPage()
    c.save()
    with pikepdf.open(path, allow_overwriting_input=True) as pdf:
        pdf.pages[1].Rotate = 90
        pdf.save(path)
    out = tmp_path / "forms.x.pdf"
    translate_document(path, out, upper_keeping_tags)
    first, second = page_texts(out)
    assert "T:TEXT ON THE PAGE ITSELF" in " ".join(first.split()) and "T:TEXT INSIDE A FORM" in first
    assert "Textonarotatedpage" in "".join(second.split()) and "T:" not in second  # (read sideways)
    with pikepdf.open(path) as a, pikepdf.open(out) as b:
        assert a.pages[1].Contents.read_bytes() == b.pages[1].Contents.read_bytes()


@pytest.mark.parametrize("turn", ["0 1 -1 0", "-0.000000044 1 -1 -0.000000044", "0.7071 0.7071 -0.7071 0.7071"])
def test_text_turned_on_an_upright_page_is_left_as_it_is(tmp_path, turn):
    """Words turned a quarter (as Word writes a table's vertical header, with rounding noise in the
    matrix that pdfminer takes for upright) or at 45 degrees beside an ordinary line: the line is
    translated, the turned words stay exactly as they were drawn."""
    pdf = pikepdf.new()
    helvetica = pdf.make_indirect(pikepdf.Dictionary(Type=pikepdf.Name.Font, Subtype=pikepdf.Name.Type1,
                                                     BaseFont=pikepdf.Name.Helvetica, Encoding=pikepdf.Name.WinAnsiEncoding))
    turned = f"BT /F1 11 Tf {turn} 100 500 Tm (Vertical header words) Tj ET".encode()
    content = b"BT /F1 11 Tf 1 0 0 1 200 700 Tm (An ordinary line of the page.) Tj ET " + turned
    pdf.pages.append(pikepdf.Page(pikepdf.Dictionary(
        Type=pikepdf.Name.Page, MediaBox=[0, 0, 612, 792], Contents=pdf.make_stream(content),
        Resources=pikepdf.Dictionary(Font=pikepdf.Dictionary(F1=helvetica)))))
    path, out = tmp_path / "turned.pdf", tmp_path / "turned.x.pdf"
    pdf.save(path)
    translate_document(path, out, upper_keeping_tags)
    [text] = page_texts(out)
    assert "T:AN ORDINARY LINE OF THE PAGE." in " ".join(text.split())
    assert text.count("T:") == 1 and "VERTICAL" not in text
    with pikepdf.open(out) as translated:
        assert b" ".join(turned.split()) in b" ".join(translated.pages[0].Contents.read_bytes().split())


def test_a_word_too_wide_for_its_box_is_set_smaller_not_broken(tmp_path):
    """A one-word label beside another, with free space below: the longer translation could be
    cut into two lines there, but a word breaks only where its script allows: the size goes down."""
    path = tmp_path / "choice.pdf"
    c = canvas.Canvas(str(path), pagesize=A4)
    c.setFont("Helvetica", 10)
    c.drawString(100, H - 100, "Yes")
    c.drawString(160, H - 100, "No")
    c.drawString(100, H - 300, "Sign here.")
    c.showPage()
    c.save()
    out = tmp_path / "choice.deu_Latn.pdf"
    words = {"Yes": "Selbstverständlich", "No": "Nein", "Sign here.": "Hier unterschreiben."}
    translate_document(path, out, lambda texts: [words[t] for t in texts])
    drawn = [c for _, c in chars(out) if "Noto" in c.fontname]
    word = [c for c in drawn if c.x0 < 155 and c.y0 > H - 250]
    assert "".join(c.get_text() for c in word) == "Selbstverständlich"
    assert len({round(c.y0, 1) for c in word}) == 1 and word[0].size < 10  # one line, smaller
    assert max(c.x1 for c in word) < 160  # and clear of the next label
    assert "".join(c.get_text() for c in drawn if c.x0 >= 155 and c.y0 > H - 250) == "Nein"


def test_a_sentence_runs_on_past_the_footnotes_at_the_foot_of_its_column(tmp_path):
    path = tmp_path / "notes.pdf"
    c = canvas.Canvas(str(path), pagesize=A4)
    for x, lines in ((72, ["The first column ends in the middle", "of a sentence that"]), (320, ["goes on in the second column."])):
        draw_lines(c, x, H - 80, lines)
    c.setFont("Helvetica", 7)
    for n, y in enumerate((140, 125, 110, 95, 80), 1):  # footnotes at the foot of the first column, read before the second
        c.drawString(72, y, f"{n} A note at the foot of the column.")
    c.showPage()
    c.save()
    translate = Recording(upper_keeping_tags)
    translate_document(path, tmp_path / "notes.x.pdf", translate)
    assert "The first column ends in the middle of a sentence that goes on in the second column." in translate.sent


def lzw_encoded(data: bytes) -> bytes:
    """`data` as LZWDecode with PDF's early change: 9- to 12-bit codes, a clear code when the table is full."""
    table, word, codes, width, bits = {bytes([i]): i for i in range(256)}, b"", [(256, 9)], 9, []
    for byte in data:
        candidate = word + bytes([byte])
        if candidate in table:
            word = candidate
            continue
        codes.append((table[word], width))
        table[candidate] = len(table) + 2  # 256 clear, 257 end
        if len(table) + 2 >= 4094:
            codes.append((256, width))
            table, width = {bytes([i]): i for i in range(256)}, 9
        elif len(table) + 2 >= 1 << width:  # the decoder, an entry behind, widens at 511, 1023, 2047
            width += 1
        word = bytes([byte])
    codes += [(table[word], width), (257, width)]
    for code, size in codes:
        bits.append(format(code, f"0{size}b"))
    joined = "".join(bits)
    joined += "0" * (-len(joined) % 8)
    return int(joined, 2).to_bytes(len(joined) // 8, "big")


@pytest.mark.parametrize("kind", ["flate-twice", "hex-then-flate", "lzw", "run-length", "image-as-content", "font-program"])
def test_every_filter_chain_and_stream_kind_is_bounded(source, tmp_path, monkeypatch, kind):
    monkeypatch.setattr(pdf_format, "MAX_STREAM_BYTES", 2**20)  # the real limit works alike, slower to build
    big = b" " * (2**20 + 1)
    bomb = tmp_path / "bomb.pdf"
    with pikepdf.open(source) as pdf:
        stream = pikepdf.Stream(pdf, b"")
        if kind == "flate-twice":
            stream.write(zlib.compress(zlib.compress(big)), filter=pikepdf.Array([pikepdf.Name.FlateDecode] * 2))
        elif kind == "hex-then-flate":
            stream.write(zlib.compress(big).hex().encode() + b">",
                         filter=pikepdf.Array([pikepdf.Name.ASCIIHexDecode, pikepdf.Name.FlateDecode]))
        elif kind == "lzw":
            stream.write(lzw_encoded(big), filter=pikepdf.Name.LZWDecode)
        elif kind == "run-length":
            stream.write(b"\x81 " * (len(big) // 128 + 1) + b"\x80", filter=pikepdf.Name.RunLengthDecode)
        else:  # a stream that says it is an image, used as a page's content or as a font's program
            stream.write(zlib.compress(big), filter=pikepdf.Name.FlateDecode)
            stream.Subtype = pikepdf.Name.Image
        stream = pdf.make_indirect(stream)
        if kind == "font-program":
            descriptor = pikepdf.Dictionary(Type=pikepdf.Name.FontDescriptor, FontName=pikepdf.Name.X, FontFile2=stream)
            pdf.pages[0].Resources.Font.F9 = pikepdf.Dictionary(
                Type=pikepdf.Name.Font, Subtype=pikepdf.Name.TrueType, BaseFont=pikepdf.Name.X,
                FontDescriptor=pdf.make_indirect(descriptor))
        else:
            pdf.pages[0].Contents = pikepdf.Array([pdf.pages[0].Contents, stream])
        pdf.save(bomb)
    assert bomb.stat().st_size < 2**20 // 5
    with pytest.raises(DocumentError, match=r"inflates to over 1 MiB: a decompression bomb$"):
        translate_document(bomb, tmp_path / "out.pdf", upper_keeping_tags)
    assert not (tmp_path / "out.pdf").exists()


def test_a_page_of_more_content_than_its_bound_is_refused(source, tmp_path, monkeypatch):
    monkeypatch.setattr(pdf_format, "MAX_PAGE_CONTENT_BYTES", 2**20)  # each stream under the stream limit
    heavy = tmp_path / "heavy.pdf"
    with pikepdf.open(source) as pdf:
        streams = []
        for _ in range(3):
            stream = pikepdf.Stream(pdf, b"")
            stream.write(zlib.compress(b"0 0 m 1 1 l S\n" * 30_000), filter=pikepdf.Name.FlateDecode)
            streams.append(pdf.make_indirect(stream))
        pdf.pages[0].Contents = pikepdf.Array([pdf.pages[0].Contents, *streams])
        pdf.save(heavy)
    with pytest.raises(DocumentError, match=r"^a page's content decodes to over 1 MiB of text and drawing operators"):
        translate_document(heavy, tmp_path / "out.pdf", upper_keeping_tags)


def paragraph_pdf(path, alignment):
    """One paragraph of six sentences in a 300-point frame, set with reportlab's `alignment`."""
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.platypus import Frame, Paragraph

    text = " ".join(f"The {n} sentence of this paragraph says a few words about the river and its old bridge."
                    for n in ("first", "second", "third", "fourth", "fifth", "sixth"))
    c = canvas.Canvas(str(path), pagesize=A4)
    style = ParagraphStyle("body", fontName="Helvetica", fontSize=10, leading=13, alignment=alignment)
    Frame(72, H - 400, 300, 300).addFromList([Paragraph(text, style)], c)
    c.showPage()
    c.save()


def drawn_rows(path, ours: bool):
    """The lines of the first page, top first: our glyphs (a Noto face), or the source's, spaces included."""
    rows: dict[float, list] = {}
    for _, c in chars(path):
        if ("Noto" in c.fontname) == ours:
            rows.setdefault(round(c.y0), []).append(c)
    return [rows[y] for y in sorted(rows, reverse=True) if any(c.get_text().strip() for c in rows[y])]


@pytest.mark.parametrize("engine", ["stand-in", "real"])
def test_a_justified_paragraph_comes_back_justified_and_a_ragged_one_ragged(tmp_path, engine, request):
    from reportlab.lib.enums import TA_JUSTIFY, TA_LEFT

    from dragoman.app.session.jobs import DocumentJob
    from dragoman.app.session.session import TranslationSession

    for alignment in (TA_JUSTIFY, TA_LEFT):
        source, out = tmp_path / f"p{alignment}.pdf", tmp_path / f"p{alignment}.out.pdf"
        paragraph_pdf(source, alignment)
        if engine == "real":  # the path users take, with the engine they run on a random checkpoint
            pipeline = TranslationSession(request.getfixturevalue("tag_translator"))
            pipeline.translate_document(DocumentJob(source, out, "eng_Latn", "fra_Latn"))
        else:
            translate_document(source, out, upper_keeping_tags)
        edge = max(c.x1 for row in drawn_rows(source, ours=False) for c in row)  # the paragraph's right edge
        rows = drawn_rows(out, ours=True)
        assert len(rows) >= 3, [("".join(c.get_text() for c in row)) for row in rows]
        inked = [[c for c in row if c.get_text().strip()] for row in rows]
        lefts = [min(c.x0 for c in row) for row in inked]
        ends = [edge - max(c.x1 for c in row) for row in inked]
        # a line of one word (a random model's may be wider than the box) has no space to widen
        spaced = [end for end, row in zip(ends[:-1], rows) if any(not c.get_text().strip() for c in row)]
        assert max(lefts) - min(lefts) < 1, lefts
        assert len(spaced) >= 2, ends
        if alignment == TA_JUSTIFY:  # every line but the last ends at the box's edge
            assert all(abs(end - spaced[0]) < 1 for end in spaced) and spaced[0] < 1, spaced
        else:  # lines end where their words do
            assert max(spaced) - min(spaced) > 3, spaced


def test_a_book_read_in_ranges_gives_its_first_sentences_before_its_last_pages_are_read(tmp_path, monkeypatch):
    path = tmp_path / "book.pdf"
    c = canvas.Canvas(str(path), pagesize=A4)
    for page in range(6):
        c.setFont("Helvetica", 11)
        if page:
            c.drawString(72, H - 80, f"and it ends on page {page + 1}.")
        draw_lines(c, 72, H - 120, [f"Page {page + 1} has a paragraph of its own.", "It is short."])
        c.drawString(72, H - 200, f"A sentence of page {page + 1} starts here")
        c.setFont("Helvetica", 8)
        c.drawString(W / 2, 30, str(page + 1))
        c.showPage()
    c.save()
    whole = [segment.text for segment in pdf_format.extract(path).segments]  # read in this process, at once

    read = []  # the first page of each range, as it is handed on
    ranges = pdf_format.read_page_ranges

    def recorded(data, page_count):
        for pages in ranges(data, page_count):
            read.append(pages[0].index)
            yield pages

    monkeypatch.setattr(pdf_format, "read_page_ranges", recorded)
    monkeypatch.setattr(pdf_blocks, "PAGES_PER_READER", 1)
    monkeypatch.setattr(pdf_blocks, "RANGE_PAGES", 1)
    monkeypatch.setattr(pdf_blocks, "usable_cores", lambda: 2)
    document = pdf_format.extract(path)
    try:
        stream = iter(document.segment_stream())
        first = next(stream).text
        ranges_before_the_first = len(read)
        streamed = [first, *(segment.text for segment in stream)]
    finally:
        document.close()
    assert read == list(range(6))
    assert ranges_before_the_first < 6
    assert streamed == whole
    # a sentence running onto the next page, read by another process, is one segment all the same
    assert "A sentence of page 3 starts here and it ends on page 4." in streamed


def paragraphs_pdf(path, pages: int, per_page: int):
    """`pages` pages of `per_page` one-line paragraphs, each a sentence of its own."""
    c = canvas.Canvas(str(path), pagesize=A4)
    for page in range(pages):
        c.setFont("Helvetica", 11)
        for n in range(per_page):
            c.drawString(72, H - 80 - 40 * n, f"Paragraph {n + 1} of page {page + 1} stands alone.")
        c.showPage()
    c.save()


def test_a_pdf_closed_before_its_last_pages_are_read_stops_its_readers(tmp_path, monkeypatch):
    path = tmp_path / "book.pdf"
    paragraphs_pdf(path, 8, 12)
    pools = []

    class Readers(pdf_blocks.ProcessPoolExecutor):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            pools.append(self)

    monkeypatch.setattr(pdf_blocks, "ProcessPoolExecutor", Readers)
    monkeypatch.setattr(pdf_blocks, "PAGES_PER_READER", 1)
    monkeypatch.setattr(pdf_blocks, "RANGE_PAGES", 1)
    monkeypatch.setattr(pdf_blocks, "usable_cores", lambda: 2)
    document = pdf_format.extract(path)
    first = next(iter(document.segment_stream()))
    assert first.text == "Paragraph 1 of page 1 stands alone."
    document.close()  # stopped: the rest is never read
    assert len(pools) == 1
    with pytest.raises(RuntimeError):  # the readers were shut down
        pools[0].submit(int)


def test_a_short_pdf_read_in_this_process_gives_its_first_sentences_before_its_last_pages_are_read(tmp_path,
                                                                                                  monkeypatch):
    path = tmp_path / "short.pdf"
    paragraphs_pdf(path, 20, 4)
    read = []  # the pages of each range, as it is handed on
    ranges = pdf_format.read_page_ranges

    def recorded(data, page_count):
        for pages in ranges(data, page_count):
            read.append([page.index for page in pages])
            yield pages

    monkeypatch.setattr(pdf_format, "read_page_ranges", recorded)
    monkeypatch.setattr(pdf_blocks, "usable_cores", lambda: 1)  # no reader processes
    document = pdf_format.extract(path)
    try:
        stream = iter(document.segment_stream())
        assert next(stream).text == "Paragraph 1 of page 1 stands alone."
        assert read == [[0, 1, 2, 3]]  # the first range, and no more, read before the first sentence
        assert len(list(stream)) == 79
    finally:
        document.close()
    assert read == [list(range(0, 4)), list(range(4, 12)), list(range(12, 20))]


def two_pages(path):
    c = canvas.Canvas(str(path), pagesize=A4)
    for text in ("The first page has a sentence.", "The second page has another."):
        c.setFont("Helvetica", 12)
        c.drawString(72, 700, text)
        c.showPage()
    c.save()


def test_a_broken_xmp_metadata_stream_is_kept_and_the_document_translated(tmp_path):
    """pikepdf rewrites the PDF version in a document's XMP metadata as it saves, and fails on a
    stream it cannot decode (fuzzed files in PDFBox's tests): the metadata is the source's, kept as it is."""
    path, out = tmp_path / "meta.pdf", tmp_path / "meta.x.pdf"
    two_pages(path)
    with pikepdf.open(path, allow_overwriting_input=True) as pdf:
        broken = pdf.make_stream(b"<?xpacket begin='\xef\xbb\xbf'?> \xb1\xb1 not base 85 ~>")
        broken.Filter, broken.Type, broken.Subtype = pikepdf.Name.ASCII85Decode, pikepdf.Name.Metadata, pikepdf.Name.XML
        pdf.Root.Metadata = broken
        pdf.save(path, fix_metadata_version=False)
    translate_document(path, out, upper_keeping_tags)
    assert [" ".join(t.split()) for t in page_texts(out)] == ["T:THE FIRST PAGE HAS A SENTENCE.", "T:THE SECOND PAGE HAS ANOTHER."]
    with pikepdf.open(path) as a, pikepdf.open(out) as b:
        assert a.Root.Metadata.read_raw_bytes() == b.Root.Metadata.read_raw_bytes()


def test_a_page_pikepdf_cannot_parse_is_kept_as_it_is_and_the_others_translated(tmp_path, monkeypatch):
    """A page with an inline JBIG2 image needs jbig2dec for pikepdf to parse its content, and a
    machine may not have it (pdf.js's bomb_giant.pdf): that page's text stays as it was drawn. The
    missing program is the one thing stood in for here."""
    from dragoman.app.documents import pdf_write

    path, out = tmp_path / "two.pdf", tmp_path / "two.x.pdf"
    two_pages(path)
    parse = pdf_write.show_strings

    def without_jbig2dec(pdf_page):
        if b"second" in pikepdf.Page(pdf_page).obj.Contents.read_bytes():
            raise pikepdf.DependencyError("jbig2dec - not installed or not found")
        return parse(pdf_page)

    monkeypatch.setattr(pdf_write, "show_strings", without_jbig2dec)
    translate_document(path, out, upper_keeping_tags)
    first, second = (" ".join(t.split()) for t in page_texts(out))
    assert first == "T:THE FIRST PAGE HAS A SENTENCE." and second == "The second page has another."
