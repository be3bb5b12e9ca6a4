"""PDF out in the PDF's own fonts: a translation is set in the font program the original block
embeds where that program has a glyph for each of its characters (a reportlab subset, a complete
font), else in a Noto font; bold and italic are kept either way. The PDFs embed DejaVu Sans from
the system (found with fontconfig) and are read back with pdfminer.six, pikepdf and fontTools."""

import io
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict
from pathlib import Path

import pikepdf
import pytest
from fontTools.pens.recordingPen import DecomposingRecordingPen
from fontTools.ttLib import TTFont as FontFile
from reportlab.lib.pagesizes import A4
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.ttfonts import TTFont
from reportlab.pdfgen import canvas

from dragoman.app.documents import pdf_blocks, pdf_fonts, translate_document

from document_fakes import upper_keeping_tags

W, H = A4


def system_font(pattern: str, file_name: str) -> str:
    """The installed font file fontconfig gives for `pattern`, or the test is skipped."""
    if shutil.which("fc-match") is None:
        pytest.skip("fontconfig is not installed")
    path = subprocess.run(["fc-match", "--format", "%{file}", pattern], capture_output=True, text=True).stdout
    if Path(path).name != file_name:
        pytest.skip(f"{file_name} is not installed")
    return path


@pytest.fixture(scope="module")
def dejavu():
    return system_font("DejaVu Sans:style=Book", "DejaVuSans.ttf"), system_font("DejaVu Sans:style=Bold", "DejaVuSans-Bold.ttf")


def fonts_of(path) -> dict[str, tuple[FontFile, dict[str, int]]]:
    """BaseFont (tag removed) -> (its embedded program, text -> glyph id from its ToUnicode) of the
    Type0 fonts (those the writer adds, and the complete font of complete_font_pdf)."""
    out = {}
    with pikepdf.open(path) as pdf:
        for font in pdf.pages[0].Resources.Font.values():
            if font.get("/Subtype") != "/Type0":
                continue
            program = FontFile(io.BytesIO(font.DescendantFonts[0].FontDescriptor.FontFile2.read_bytes()))
            unicode = {bytes.fromhex(text.decode()).decode("utf-16-be"): int(gid, 16)
                       for gid, text in re.findall(rb"<([0-9A-F]{4})> <([0-9A-F]+)>", font.ToUnicode.read_bytes())}
            out[str(font.BaseFont).split("+")[-1]] = (program, unicode)
    return out


def outline(font: FontFile, name: str):
    """The glyph's contours, composites drawn out (the writer's subsets decompose them)."""
    glyphs = font.getGlyphSet()
    pen = DecomposingRecordingPen(glyphs)
    glyphs[name].draw(pen)
    return pen.value


def drawn_texts(path) -> dict[str, str]:
    """pdfminer's font name (tag removed) -> the text drawn in it, a space between lines."""
    from pdfminer.high_level import extract_pages
    from pdfminer.layout import LTChar, LTTextLine

    out: dict[str, str] = {}

    def walk(item):
        if isinstance(item, LTChar):
            name = item.fontname.split("+", 1)[-1]
            out[name] = out.get(name, "") + item.get_text()
            return
        for child in getattr(item, "_objs", []):
            walk(child)
        if isinstance(item, LTTextLine):
            for name in out:
                out[name] = out[name].rstrip() + " "

    for page in extract_pages(str(path)):
        walk(page)
    return {name: text.strip() for name, text in out.items()}


def assert_same_glyphs(path, base_font: str, system_file: str, text: str):
    """Every character of `text` is drawn in the output's `base_font` with the system file's outline."""
    program, unicode = fonts_of(path)[base_font]
    system = FontFile(system_file)
    for ch in set(text) - {" "}:
        assert outline(program, program.getGlyphOrder()[unicode[ch]]) == outline(system, system.getBestCmap()[ord(ch)]), ch


def reportlab_pdf(path, dejavu):
    """A regular and a bold line, each in a DejaVu subset as reportlab embeds it (printable ASCII
    and the characters the document uses)."""
    pdfmetrics.registerFont(TTFont("DejaVu", dejavu[0]))
    pdfmetrics.registerFont(TTFont("DejaVuBold", dejavu[1]))
    c = canvas.Canvas(str(path), pagesize=A4)
    c.setFont("DejaVu", 12)
    c.drawString(72, H - 100, "The text of the page is set in its own font.")
    c.setFont("DejaVuBold", 16)
    c.drawString(72, H - 200, "A bold heading")
    c.showPage()
    c.save()


def test_a_translation_the_embedded_subset_covers_is_set_in_it(tmp_path, dejavu):
    source, out = tmp_path / "own.pdf", tmp_path / "own.fra_Latn.pdf"
    reportlab_pdf(source, dejavu)
    translate_document(source, out, upper_keeping_tags)
    texts = drawn_texts(out)
    assert texts["DejaVuSans-Regular"] == "T:THE TEXT OF THE PAGE IS SET IN ITS OWN FONT."
    assert texts["DejaVuSans-Bold"] == "T:A BOLD HEADING"
    assert not any(name.startswith("Noto") for name in texts)
    assert_same_glyphs(out, "DejaVuSans-Regular", dejavu[0], texts["DejaVuSans-Regular"])
    assert_same_glyphs(out, "DejaVuSans-Bold", dejavu[1], texts["DejaVuSans-Bold"])


def test_a_translation_the_subset_does_not_cover_is_set_in_noto_keeping_bold(tmp_path, dejavu):
    source, out = tmp_path / "own.pdf", tmp_path / "own.rus_Cyrl.pdf"
    reportlab_pdf(source, dejavu)
    translations = {"The text of the page is set in its own font.": "Текст страницы набран своим шрифтом.",
                    "A bold heading": "Жирный заголовок"}
    translate_document(source, out, lambda texts: [translations[t] for t in texts])
    texts = drawn_texts(out)
    assert texts["NotoSans-Regular"] == "Текст страницы набран своим шрифтом."
    assert texts["NotoSans-Bold"] == "Жирный заголовок"
    assert not any(name.startswith("DejaVu") and text.strip() for name, text in texts.items())


def book_pdf(path, dejavu, pages: int):
    """`reportlab_pdf`'s two lines on each of `pages` pages, both subsets shared by every page."""
    pdfmetrics.registerFont(TTFont("DejaVu", dejavu[0]))
    pdfmetrics.registerFont(TTFont("DejaVuBold", dejavu[1]))
    c = canvas.Canvas(str(path), pagesize=A4)
    for page in range(pages):
        c.setFont("DejaVu", 12)
        c.drawString(72, H - 100, f"The text of page {page + 1} is set in its own font.")
        c.setFont("DejaVuBold", 16)
        c.drawString(72, H - 200, "A bold heading")
        c.showPage()
    c.save()


def test_a_book_read_in_several_processes_gives_the_pages_and_fonts_of_one(tmp_path, dejavu, monkeypatch):
    path = tmp_path / "book.pdf"
    book_pdf(path, dejavu, 7)
    alone = pdf_blocks.read_pages(path.read_bytes())  # no page count: read in this process
    readers = []

    class Readers(ProcessPoolExecutor):
        def __init__(self, workers, **kwargs):
            readers.append(workers)
            super().__init__(workers, **kwargs)

    monkeypatch.setattr(pdf_blocks, "ProcessPoolExecutor", Readers)
    monkeypatch.setattr(pdf_blocks, "PAGES_PER_READER", 2)
    monkeypatch.setattr(pdf_blocks, "RANGE_PAGES", 2)
    monkeypatch.setattr(pdf_blocks, "usable_cores", lambda: 3)
    ranges = list(pdf_blocks.read_page_ranges(path.read_bytes(), 7))
    assert readers == [3]
    assert [[page.index for page in pages] for pages in ranges] == [[0, 1], [2, 3], [4, 5], [6]]  # in order
    spread = [page for pages in ranges for page in pages]
    assert [asdict(page) for page in spread] == [asdict(page) for page in alone]

    def sources(pages) -> set[int]:
        return {id(font) for page in pages for block in page.blocks for font in block.fonts.values()}

    assert len(sources(alone)) == len(sources(spread)) == 2  # each range's copies of a font are one again


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux's CPU affinity")
def test_the_readers_are_counted_on_the_cores_this_process_may_use():
    """In a container or under taskset a process may use fewer cores than the machine has: one
    reader per core of its own, not per core of the machine."""
    child = subprocess.run([sys.executable, "-c", "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
                            "from dragoman.app.documents.pdf_blocks import usable_cores; print(usable_cores())"],
                           capture_output=True, text=True, timeout=120)
    assert child.stdout.strip() == "1", child.stderr


def test_a_book_whose_reading_processes_die_is_read_in_this_one(tmp_path, dejavu, monkeypatch):
    path = tmp_path / "book.pdf"
    book_pdf(path, dejavu, 4)
    alone = pdf_blocks.read_pages(path.read_bytes())

    class Dying(ProcessPoolExecutor):  # as when a reader runs out of memory
        def map(self, *args, **kwargs):
            raise BrokenProcessPool("a process in the pool was terminated abruptly")

    monkeypatch.setattr(pdf_blocks, "ProcessPoolExecutor", Dying)
    monkeypatch.setattr(pdf_blocks, "PAGES_PER_READER", 1)
    monkeypatch.setattr(pdf_blocks, "RANGE_PAGES", 1)
    monkeypatch.setattr(pdf_blocks, "usable_cores", lambda: 2)
    assert [asdict(page) for page in pdf_blocks.read_pages(path.read_bytes(), 4)] == [asdict(page) for page in alone]


def test_a_reader_dying_midway_leaves_the_pages_not_yet_handed_on_to_this_process(tmp_path, dejavu, monkeypatch):
    path = tmp_path / "book.pdf"
    book_pdf(path, dejavu, 5)
    alone = pdf_blocks.read_pages(path.read_bytes())

    class DyingAfterTwo(ProcessPoolExecutor):
        def map(self, *args, **kwargs):
            results = super().map(*args, **kwargs)
            yield next(results)
            yield next(results)
            raise BrokenProcessPool("a process in the pool was terminated abruptly")

    monkeypatch.setattr(pdf_blocks, "ProcessPoolExecutor", DyingAfterTwo)
    monkeypatch.setattr(pdf_blocks, "PAGES_PER_READER", 1)
    monkeypatch.setattr(pdf_blocks, "RANGE_PAGES", 2)
    monkeypatch.setattr(pdf_blocks, "usable_cores", lambda: 2)
    ranges = list(pdf_blocks.read_page_ranges(path.read_bytes(), 5))
    assert [[page.index for page in pages] for pages in ranges] == [[0, 1], [2, 3], [4]]
    assert [asdict(page) for pages in ranges for page in pages] == [asdict(page) for page in alone]


def test_a_script_without_a_main_guard_reads_its_book_in_its_own_process(tmp_path, dejavu):
    """A script that reads a long PDF without `if __name__ == "__main__"`: each reader process runs
    the script again as it starts and dies of it; the pages are then read in the script's process,
    which never waits on a reader that did not start."""
    path = tmp_path / "book.pdf"
    book_pdf(tmp_path / "small.pdf", dejavu, 6)
    with pikepdf.open(tmp_path / "small.pdf") as pdf:  # larger than a pipe's buffer, as real books are
        pdf.Root.Padding = pikepdf.Stream(pdf, os.urandom(1 << 20))
        pdf.save(path)
    script = tmp_path / "unguarded.py"
    script.write_text(
        "from dragoman.app.documents import pdf_blocks\n"
        "pdf_blocks.PAGES_PER_READER = pdf_blocks.RANGE_PAGES = 1\n"
        "pdf_blocks.usable_cores = lambda: 2\n"
        f"data = open({str(path)!r}, 'rb').read()\n"
        "print(len(pdf_blocks.read_pages(data, 6)))\n", encoding="utf-8")
    child = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert child.stdout.splitlines()[-1:] == ["6"], child.stderr[-2000:]


def complete_font_pdf(path, font_file: str, text: str, base_font: str = "DejaVuSans"):
    """One line drawn in `font_file` embedded whole (a Type0 font, Identity-H, codes = glyph ids),
    as producers that do not subset write it."""
    font = FontFile(font_file)
    cmap, scale = font.getBestCmap(), 1000 / font["head"].unitsPerEm
    gids = [font.getGlyphID(cmap[ord(ch)]) for ch in text]
    pdf = pikepdf.new()
    bfchar = "\n".join(f"<{g:04X}> <{ord(ch):04X}>" for g, ch in sorted(set(zip(gids, text))))
    to_unicode = ("/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CMapName /U def "
                  f"1 begincodespacerange <0000> <FFFF> endcodespacerange {len(set(gids))} beginbfchar\n{bfchar}\n"
                  "endbfchar endcmap CMapName currentdict /CMap defineresource pop end end")
    widths = pikepdf.Array([x for g in sorted(set(gids)) for x in (g, [round(font["hmtx"][font.getGlyphName(g)][0] * scale)])])
    descriptor = pikepdf.Dictionary(
        Type=pikepdf.Name.FontDescriptor, FontName=pikepdf.Name("/" + base_font), Flags=32, ItalicAngle=0,
        FontBBox=[-1021, -464, 1794, 1233], Ascent=760, Descent=-240, CapHeight=730, StemV=80,
        FontFile2=pdf.make_stream(Path(font_file).read_bytes()))
    descendant = pikepdf.Dictionary(
        Type=pikepdf.Name.Font, Subtype=pikepdf.Name.CIDFontType2, BaseFont=pikepdf.Name("/" + base_font),
        CIDSystemInfo=pikepdf.Dictionary(Registry=pikepdf.String("Adobe"), Ordering=pikepdf.String("Identity"), Supplement=0),
        FontDescriptor=descriptor, CIDToGIDMap=pikepdf.Name.Identity, W=widths)
    type0 = pikepdf.Dictionary(
        Type=pikepdf.Name.Font, Subtype=pikepdf.Name.Type0, BaseFont=pikepdf.Name("/" + base_font),
        Encoding=pikepdf.Name("/Identity-H"), DescendantFonts=[descendant], ToUnicode=pdf.make_stream(to_unicode.encode()))
    page = pdf.add_blank_page(page_size=(W, H))
    page.Resources = pikepdf.Dictionary(Font=pikepdf.Dictionary(F1=pdf.make_indirect(type0)))
    page.Contents = pdf.make_stream(b"BT /F1 12 Tf 72 700 Td <" + b"".join(b"%04X" % g for g in gids) + b"> Tj ET")
    pdf.save(path)


@pytest.mark.parametrize("translation, face", [
    ("Всё это написано по-русски.", "DejaVuSans-Regular"),  # DejaVu Sans has Cyrillic
    ("这是一个中文句子。", "NotoSansCJKSC-Regular"),  # and no Han characters
], ids=["Cyrillic", "CJK"])
def test_a_complete_embedded_font_is_used_for_every_script_it_covers(tmp_path, dejavu, translation, face):
    source, out = tmp_path / "whole.pdf", tmp_path / "whole.x.pdf"
    complete_font_pdf(source, dejavu[0], "All of this is written in English.")
    translate_document(source, out, lambda texts: [translation] * len(texts))
    assert drawn_texts(out)[face] == translation
    if face.startswith("DejaVu"):
        assert_same_glyphs(out, face, dejavu[0], translation)


def test_text_in_a_serif_face_is_set_in_noto_serif(tmp_path):
    """A standard font embeds no program: Times (serif) gives Noto Serif, Helvetica Noto Sans,
    Times-BoldItalic Noto Serif Bold Italic."""
    if not shutil.which("fc-list") or "Noto Serif" not in subprocess.run(["fc-list", ":", "family"], capture_output=True,
                                                                        text=True).stdout.split("\n"):
        pytest.skip("Noto Serif is not installed")
    source, out = tmp_path / "faces.pdf", tmp_path / "faces.x.pdf"
    c = canvas.Canvas(str(source), pagesize=A4)
    for y, font, text in ((700, "Times-Roman", "A line in Times."), (650, "Helvetica", "A line in Helvetica."),
                          (600, "Times-BoldItalic", "A line in bold italic Times.")):
        c.setFont(font, 12)
        c.drawString(72, y, text)
    c.showPage()
    c.save()
    translate_document(source, out, upper_keeping_tags)
    texts = drawn_texts(out)
    assert texts["NotoSerif-Regular"] == "T:A LINE IN TIMES."
    assert texts["NotoSans-Regular"] == "T:A LINE IN HELVETICA."
    assert texts["NotoSerif-BoldItalic"] == "T:A LINE IN BOLD ITALIC TIMES."


def cff_pdf(path, font_file: str, text: str, extra: str):
    """One line drawn in a Type 1 font whose program is bare CFF (FontFile3 /Type1C), as Acrobat
    Distiller embeds fonts: the glyphs of `text` and `extra`, built from `font_file`'s outlines."""
    from fontTools.fontBuilder import FontBuilder
    from fontTools.pens.t2CharStringPen import T2CharStringPen

    source = FontFile(font_file)
    cmap, glyphs = source.getBestCmap(), source.getGlyphSet()
    names = [".notdef"] + sorted({cmap[ord(ch)] for ch in text + extra})
    charstrings = {}
    for name in names:
        pen = T2CharStringPen(glyphs[name].width, glyphs)
        glyphs[name].draw(pen)
        charstrings[name] = pen.getCharString()
    builder = FontBuilder(source["head"].unitsPerEm, isTTF=False)
    builder.setupGlyphOrder(names)
    builder.setupCharacterMap({})
    builder.setupCFF("DejaVuSans", {"FullName": "DejaVu Sans"}, charstrings, {})
    program = builder.font["CFF "].compile(builder.font)
    scale = 1000 / source["head"].unitsPerEm
    widths = [round(glyphs[cmap[code]].width * scale) if code in cmap else 0 for code in range(32, 127)]
    pdf = pikepdf.new()
    descriptor = pikepdf.Dictionary(
        Type=pikepdf.Name.FontDescriptor, FontName=pikepdf.Name("/ABCDEF+DejaVuSans"), Flags=32, ItalicAngle=0,
        FontBBox=[-1021, -464, 1794, 1233], Ascent=760, Descent=-240, CapHeight=730, StemV=80,
        FontFile3=pdf.make_stream(program, Subtype=pikepdf.Name("/Type1C")))
    font = pikepdf.Dictionary(Type=pikepdf.Name.Font, Subtype=pikepdf.Name.Type1, BaseFont=pikepdf.Name("/ABCDEF+DejaVuSans"),
                              FirstChar=32, LastChar=126, Widths=widths, Encoding=pikepdf.Name.WinAnsiEncoding,
                              FontDescriptor=descriptor)
    page = pdf.add_blank_page(page_size=(W, H))
    page.Resources = pikepdf.Dictionary(Font=pikepdf.Dictionary(F1=pdf.make_indirect(font)))
    page.Contents = pdf.make_stream(b"BT /F1 12 Tf 72 700 Td (" + text.encode("latin-1") + b") Tj ET")
    pdf.save(path)


def test_a_bare_cff_program_is_used_where_it_covers_the_translation(tmp_path, dejavu):
    source = tmp_path / "cff.pdf"
    cff_pdf(source, dejavu[0], "Hello world, here it is.", "HELOWRDITS:")
    out = tmp_path / "cff.x.pdf"
    translate_document(source, out, upper_keeping_tags)
    texts = drawn_texts(out)
    assert texts["DejaVuSans-Regular"] == "T:HELLO WORLD, HERE IT IS."
    program, unicode = fonts_of(out)["DejaVuSans-Regular"]
    system = FontFile(dejavu[0])
    for ch in "HELOWRD":  # the same outlines, curves made quadratic again: the same bounds within a unit or two
        bounds = [program["glyf"][program.getGlyphOrder()[unicode[ch]]], system["glyf"][system.getBestCmap()[ord(ch)]]]
        assert all(abs(a - b) <= 2 for a, b in zip(*[(g.xMin, g.yMin, g.xMax, g.yMax) for g in bounds])), ch
    other = tmp_path / "cff.y.pdf"  # no V in the program: a system font
    translate_document(source, other, lambda texts: ["Very well."] * len(texts))
    assert drawn_texts(other)["NotoSans-Regular"] == "Very well."


def test_a_subsets_empty_glyphs_do_not_count(tmp_path, dejavu):
    """A subset (its name tagged ABCDEF+) may keep every glyph slot and empty the glyphs it left out:
    a translation needing one of those is set in a system font."""
    from fontTools.ttLib.tables._g_l_y_f import Glyph

    font = FontFile(dejavu[0])
    font["glyf"][font.getBestCmap()[ord("W")]] = Glyph()  # no contours
    emptied = tmp_path / "emptied.ttf"
    font.save(emptied)
    source = tmp_path / "subset.pdf"
    complete_font_pdf(source, str(emptied), "Hello there, said the owl.", base_font="ABCDEF+DejaVuSans")
    for translation, face in (("Hallo, sagte die Eule.", "DejaVuSans-Regular"), ("Wer ist da?", "NotoSans-Regular")):
        out = tmp_path / f"subset.{face}.pdf"
        translate_document(source, out, lambda texts: [translation] * len(texts))
        assert drawn_texts(out)[face] == translation


def hostile_font(font_file: str, kind: str) -> bytes:
    """`font_file` made hostile in every glyph a character maps to."""
    from fontTools.ttLib.tables._g_l_y_f import Glyph, GlyphComponent

    font = FontFile(font_file)
    names = sorted(set(font.getBestCmap().values()) - {".notdef"})
    glyf = font["glyf"]
    for name in names:
        if kind == "composite-containing-itself":
            component = GlyphComponent()
            component.glyphName, component.x, component.y, component.flags = name, 0, 0, 0
            glyph = Glyph()
            glyph.numberOfContours, glyph.components = -1, [component]
            glyph.xMin = glyph.yMin = glyph.xMax = glyph.yMax = 0
            glyf[name] = glyph
        elif kind == "more-contours-than-it-has" and glyf[name].numberOfContours > 0:
            data = bytearray(glyf[name].compile(glyf))
            data[0:2] = (glyf[name].numberOfContours + 40).to_bytes(2, "big")
            glyf[name] = Glyph(bytes(data))
        elif kind == "extreme-metrics":
            font["hmtx"][name] = (65535, -32768)
    if kind == "cmap-past-the-last-glyph":
        for table in font["cmap"].tables:
            table.cmap = {code: f"glyph{65000 + i % 500}" for i, code in enumerate(table.cmap)}
    elif kind == "extreme-metrics":
        font["hhea"].ascent, font["hhea"].descent = 32767, -32768
        font["head"].unitsPerEm = 16
    font.recalcBBoxes = False  # fontTools would refuse to write the recursive glyphs otherwise
    out = io.BytesIO()
    font.save(out)
    return out.getvalue()


@pytest.mark.parametrize("kind", ["composite-containing-itself", "more-contours-than-it-has", "cmap-past-the-last-glyph",
                                  "extreme-metrics"])
@pytest.mark.parametrize("engine", [False, True], ids=["stand-in", "engine"])
def test_a_hostile_embedded_font_gives_way_to_a_system_font(tmp_path, dejavu, kind, engine, request):
    source, out = tmp_path / "hostile.pdf", tmp_path / "hostile.x.pdf"
    complete_font_pdf(source, dejavu[0], "All of this is written in English.")
    with pikepdf.open(source, allow_overwriting_input=True) as pdf:
        descriptor = pdf.pages[0].Resources.Font.F1.DescendantFonts[0].FontDescriptor
        descriptor.FontFile2 = pdf.make_stream(hostile_font(dejavu[0], kind))
        pdf.save(source)
    before = source.read_bytes()
    translate = upper_keeping_tags
    if engine:
        translator = request.getfixturevalue("translator")
        options = translator.default_options(num_beams=1, max_length=16)
        translate = lambda texts: translator.translate(texts, "eng_Latn", "fra_Latn", options)  # noqa: E731
    translate_document(source, out, translate)
    texts = drawn_texts(out)
    assert not texts.get("DejaVuSans", "").strip()  # nothing set in the hostile program
    if not engine:
        assert texts["NotoSans-Regular"] == "T:ALL OF THIS IS WRITTEN IN ENGLISH."
    assert source.read_bytes() == before


def installed_cff_font() -> tuple[str, int]:
    """(file, index) of an installed font with CFF outlines, Noto Sans CJK where there is one, or
    the test is skipped."""
    if shutil.which("fc-list") is None:
        pytest.skip("fontconfig is not installed")
    listing = subprocess.run(["fc-list", "--format", "%{file}\t%{index}\n", ":fontformat=CFF"], capture_output=True,
                             text=True).stdout
    fonts = sorted(line.split("\t") for line in listing.splitlines() if line.count("\t") == 1)
    if not fonts:
        pytest.skip("no font with CFF outlines (an OpenType .otf or .ttc) is installed")
    path, index = next((font for font in fonts if "NotoSansCJK-Regular" in font[0]), fonts[0])
    return path, int(index or 0)


def test_an_installed_cff_font_is_drawn_by_harfbuzz_as_fonttools_draws_it(monkeypatch):
    """An installed font's CFF glyphs are drawn by HarfBuzz (a PDF's own program by fontTools,
    which raises on a broken glyph): the TrueType glyphs are those fontTools' drawing gives, the
    curves made quadratic and the contours reversed alike."""
    from fontTools.pens.cu2quPen import Cu2QuPen
    from fontTools.pens.ttGlyphPen import TTGlyphPen

    path, index = installed_cff_font()
    face = pdf_fonts.Face(path, index, "CFF", "Regular")
    assert "glyf" not in face.font
    drawn_by_fonttools = []
    draw_decomposed = face._draw_decomposed

    def drawn_by_fonttools_noted(name, pen):
        drawn_by_fonttools.append(name)
        draw_decomposed(name, pen)

    monkeypatch.setattr(face, "_draw_decomposed", drawn_by_fonttools_noted)
    glyph_set, order = face.font.getGlyphSet(), face.font.getGlyphOrder()
    names = order[::max(1, len(order) // 300)] + [face.cmap[code] for code in (0x41, 0x67, 0x4E2D, 0x3002)
                                                  if code in face.cmap]
    for name in names:
        recording = DecomposingRecordingPen(glyph_set)
        glyph_set[name].draw(recording)
        pen = TTGlyphPen(None)
        recording.replay(Cu2QuPen(pen, max_err=face.upm / 1000, reverse_direction=True))
        expected = pen.glyph()
        glyph, advance = face._outline(name)
        assert (list(glyph.coordinates), glyph.endPtsOfContours, list(glyph.flags)) == (
            list(expected.coordinates), expected.endPtsOfContours, list(expected.flags)), name
        assert advance == face.font["hmtx"][name][0]
        if name in drawn_by_fonttools:
            assert not expected.numberOfContours, f"{name}: drawn by fontTools, not HarfBuzz"
    assert len(drawn_by_fonttools) < len(names) / 2


def square_font(tmp_path, cff: bool, reach: int) -> Path:
    """A font of one glyph, "square", from the origin to `reach` units (an em is a thousand)."""
    from fontTools.fontBuilder import FontBuilder
    from fontTools.pens.t2CharStringPen import T2CharStringPen
    from fontTools.pens.ttGlyphPen import TTGlyphPen

    builder = FontBuilder(1000, isTTF=not cff)
    builder.setupGlyphOrder([".notdef", "square"])
    builder.setupCharacterMap({ord("A"): "square"})
    pen = T2CharStringPen(600, None) if cff else TTGlyphPen(None)
    pen.moveTo((0, 0))
    for point in ((reach, 0), (reach, reach), (0, reach)):
        pen.lineTo(point)
    pen.closePath()
    if cff:
        empty = T2CharStringPen(600, None)
        builder.setupCFF("Square", {}, {".notdef": empty.getCharString(), "square": pen.getCharString()}, {})
    else:
        builder.setupGlyf({".notdef": TTGlyphPen(None).glyph(), "square": pen.glyph()})
    builder.setupHorizontalMetrics({".notdef": (600, 0), "square": (600, 0)})
    builder.setupHorizontalHeader(ascent=800, descent=-200)
    builder.setupPost()
    path = tmp_path / ("square.otf" if cff else "square.ttf")
    builder.save(str(path))
    return path


@pytest.mark.parametrize("kind", ["TrueType", "CFF installed", "CFF embedded"])
def test_a_glyph_reaching_past_the_limit_is_refused(tmp_path, kind):
    """Drawn by fontTools (TrueType, a PDF's CFF program) or HarfBuzz (an installed CFF font)."""
    for reach, refused in ((pdf_fonts.MAX_EMS * 1000, False), (pdf_fonts.MAX_EMS * 1000 + 1, True)):
        path = square_font(tmp_path, kind != "TrueType", reach)
        data = path.read_bytes() if kind == "CFF embedded" else None
        face = pdf_fonts.Face(str(path), 0, "Square", "Regular", data=data)
        if refused:
            with pytest.raises(ValueError, match="reaches past"):
                face._outline("square")
        else:
            glyph, advance = face._outline("square")
            assert (glyph.coordinates.calcIntBounds(), advance) == ((0, 0, reach, reach), 600)
