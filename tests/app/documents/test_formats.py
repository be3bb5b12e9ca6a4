"""Each format, made with its own library, translated by a fake translator, opened again with that library."""

import zipfile
from pathlib import Path

import pytest

from dragoman.app.documents import translate_document

from document_fakes import make_epub, upper_keeping_tags


def run(tmp_path, name, fake, **kw):
    out = tmp_path / ("out" + "".join(Path(name).suffixes))
    translate_document(tmp_path / name, out, fake, **kw)
    return out


def test_docx(tmp_path, fake):
    import docx
    from docx.oxml.ns import qn
    from docx.oxml import OxmlElement

    d = docx.Document()
    p = d.add_paragraph("Please read ")
    bold = p.add_run("the whole manual")
    bold.bold = True
    p.add_run(" before you start. It is short.")
    d.add_heading("Getting started", 1)
    link_p = d.add_paragraph("Visit ")
    part = d.part
    r_id = part.relate_to("https://example.com/x", "http://schemas.openxmlformats.org/officeDocument/2006/relationships/hyperlink", is_external=True)
    link = OxmlElement("w:hyperlink")
    link.set(qn("r:id"), r_id)
    run_el = OxmlElement("w:r")
    t = OxmlElement("w:t")
    t.text = "our website"
    run_el.append(t)
    link.append(run_el)
    link_p._p.append(link)
    link_p.add_run(" today.")
    table = d.add_table(rows=2, cols=2)
    table.cell(0, 0).text = "Name of the item"
    table.cell(0, 1).text = "12,50"
    table.cell(1, 0).text = "Another cell"
    section = d.sections[0]
    section.header.paragraphs[0].text = "Company report"
    section.footer.paragraphs[0].text = "Confidential footer"
    d.add_comment(p.runs[0], text="Check this sentence", author="A")
    br = d.add_paragraph("First line")
    br.runs[0].add_break()
    br.add_run("second line")
    d.save(tmp_path / "in.docx")
    before = zipfile.ZipFile(tmp_path / "in.docx").read("word/document.xml")

    out = docx.Document(run(tmp_path, "in.docx", fake))
    assert zipfile.ZipFile(tmp_path / "in.docx").read("word/document.xml") == before  # input untouched
    texts = [q.text for q in out.paragraphs]
    assert len(out.paragraphs) == len(d.paragraphs)
    assert texts[0].startswith("T:PLEASE READ") and "THE WHOLE MANUAL" in texts[0] and "T:IT IS SHORT." in texts[0]
    bold_text = "".join(r.text for r in out.paragraphs[0].runs if r.bold)
    assert bold_text.strip() and bold_text.isupper()
    assert out.paragraphs[1].text == "T:GETTING STARTED" and out.paragraphs[1].style.name == "Heading 1"
    xml = out.paragraphs[2]._p.xml
    assert "w:hyperlink" in xml and out.paragraphs[2].text.isupper()
    assert out.part.rels[r_id].target_ref == "https://example.com/x"
    cells = [c.text for c in out.tables[0]._cells]
    assert cells[0] == "T:NAME OF THE ITEM" and cells[1] == "12,50" and cells[2] == "T:ANOTHER CELL"
    assert out.sections[0].header.paragraphs[0].text == "T:COMPANY REPORT"
    assert out.sections[0].footer.paragraphs[0].text == "T:CONFIDENTIAL FOOTER"
    assert [c.text for c in out.comments] == ["T:CHECK THIS SENTENCE"]
    last = out.paragraphs[-1]
    assert "w:br" in last._p.xml and last.text == "T:FIRST LINE\nT:SECOND LINE"


def test_pptx(tmp_path, fake):
    from pptx import Presentation
    from pptx.util import Inches

    prs = Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[1])
    slide.shapes.title.text = "Quarterly results"
    body = slide.placeholders[1].text_frame
    body.text = "Sales grew "
    strong = body.paragraphs[0].add_run()
    strong.text = "very strongly"
    strong.font.bold = True
    strong.hyperlink.address = "https://example.com/r"
    body.add_paragraph().text = "2024"
    slide.notes_slide.notes_text_frame.text = "Say thank you to the team."
    second = prs.slides.add_slide(prs.slide_layouts[6])
    box = second.shapes.add_textbox(Inches(1), Inches(1), Inches(4), Inches(1))
    box.text_frame.text = "A text box on slide two"
    table = second.shapes.add_table(2, 2, Inches(1), Inches(3), Inches(4), Inches(2)).table
    table.cell(0, 0).text = "Header cell"
    table.cell(1, 1).text = "3.14"
    prs.save(tmp_path / "in.pptx")

    out = Presentation(run(tmp_path, "in.pptx", fake))
    s1, s2 = out.slides
    assert len(out.slides) == 2
    assert s1.shapes.title.text_frame.text == "T:QUARTERLY RESULTS"
    paragraphs = s1.placeholders[1].text_frame.paragraphs
    assert paragraphs[0].text.startswith("T:SALES") and paragraphs[1].text == "2024"
    linked = [r for r in paragraphs[0].runs if r.hyperlink.address]
    assert linked and all(r.hyperlink.address == "https://example.com/r" and r.font.bold for r in linked)
    assert s1.notes_slide.notes_text_frame.text == "T:SAY THANK YOU TO THE TEAM."
    texts = [sh.text_frame.text for sh in s2.shapes if sh.has_text_frame]
    assert texts == ["T:A TEXT BOX ON SLIDE TWO"]
    cells = [c.text for row in next(sh for sh in s2.shapes if sh.has_table).table.rows for c in row.cells]
    assert cells == ["T:HEADER CELL", "", "", "3.14"]


def test_xlsx(tmp_path, fake):
    import openpyxl
    from openpyxl.comments import Comment

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Budget"
    ws["A1"] = "Total amount"
    ws["B1"] = 42
    ws["C1"] = "=B1*2"
    ws["A2"] = "12-34"
    ws["A3"] = "Total amount"
    ws["A1"].comment = Comment("Checked by finance", "A")
    other = wb.create_sheet("Notes")
    other["B2"] = "Second sheet text"
    wb.save(tmp_path / "in.xlsx")

    out = openpyxl.load_workbook(run(tmp_path, "in.xlsx", fake))
    assert out.sheetnames == ["Budget", "Notes"]
    b = out["Budget"]
    assert b["A1"].value == "T:TOTAL AMOUNT" and b["A3"].value == "T:TOTAL AMOUNT"
    assert b["B1"].value == 42 and b["C1"].value == "=B1*2" and b["A2"].value == "12-34"
    assert b["A1"].comment.text == "T:CHECKED BY FINANCE"
    assert out["Notes"]["B2"].value == "T:SECOND SHEET TEXT"


def test_odt(tmp_path, fake):
    from odf import teletype, text
    from odf.opendocument import OpenDocumentText, load
    from odf.style import Style, TextProperties

    doc = OpenDocumentText()
    bold = Style(name="Bold", family="text")
    bold.addElement(TextProperties(fontweight="bold"))
    doc.automaticstyles.addElement(bold)
    doc.text.addElement(text.H(outlinelevel=1, text="Chapter one"))
    p = text.P(text="This is ")
    p.addElement(text.Span(stylename=bold, text="important"))
    p.addText(" text. ")
    p.addElement(text.A(href="https://example.com/o", text="A link"))
    p.addText(" follows.")
    doc.text.addElement(p)
    doc.text.addElement(text.P(text="123"))
    doc.save(tmp_path / "in.odt")

    out = load(run(tmp_path, "in.odt", fake))
    paragraphs = out.getElementsByType(text.P)
    assert teletype.extractText(out.getElementsByType(text.H)[0]) == "T:CHAPTER ONE"
    body = teletype.extractText(paragraphs[0])
    assert body.startswith("T:THIS IS") and "IMPORTANT" in body and "LINK" in body
    spans = paragraphs[0].getElementsByType(text.Span)
    assert spans and all(teletype.extractText(s).strip().isupper() for s in spans)
    links = paragraphs[0].getElementsByType(text.A)
    assert [a.getAttribute("href") for a in links] == ["https://example.com/o"]
    assert teletype.extractText(paragraphs[1]) == "123"


def test_html(tmp_path, fake):
    import lxml.html

    (tmp_path / "in.html").write_text(
        "<!DOCTYPE html><html><head><title>My page</title><style>p{color:red}</style>"
        "<script>var s = 'Hello';</script></head><body>"
        "<h1>Welcome home</h1><p>Read <a href='https://example.com/h'>the guide</a> and run <code>make all</code> now.</p>"
        "<pre>keep this\n  code</pre><img src='a.png' alt='A red apple'>"
        "<ul><li>First item</li><li>Second item</li></ul><p translate='no'>Brand Name</p></body></html>",
        encoding="utf-8",
    )
    out = run(tmp_path, "in.html", fake)
    html = out.read_text(encoding="utf-8")
    root = lxml.html.fromstring(html)
    assert html.startswith("<!DOCTYPE html>")
    assert root.findtext(".//title") == "T:MY PAGE" and root.findtext(".//h1") == "T:WELCOME HOME"
    p = root.find(".//p")
    assert p.find("a").get("href") == "https://example.com/h" and p.find("a").text.strip().isupper()
    assert p.find("code").text == "make all" and "READ" in p.text_content()
    assert root.findtext(".//pre") == "keep this\n  code" and "var s = 'Hello';" in html and "p{color:red}" in html
    assert root.find(".//img").get("alt") == "T:A RED APPLE"
    assert [li.text for li in root.iter("li")] == ["T:FIRST ITEM", "T:SECOND ITEM"]
    assert "Brand Name" in html


def test_markdown(tmp_path, fake):
    from markdown_it import MarkdownIt

    source = (
        "---\ntitle: Keep me\n---\n# Install guide\n\nRun **the installer** and read [the docs](https://example.com/d \"Docs\").\n"
        "Use `pip install x` first.\n\n```python\nprint('hello')\n```\n\n- First step\n- Second step\n\n"
        "| Name | Value |\n| --- | --- |\n| Speed | 42 |\n"
    )
    (tmp_path / "in.md").write_text(source, encoding="utf-8")
    out = run(tmp_path, "in.md", fake).read_text(encoding="utf-8")
    assert out.startswith("---\ntitle: Keep me\n---\n# T:INSTALL GUIDE\n")
    assert "```python\nprint('hello')\n```" in out and "`pip install x`" in out
    assert "](https://example.com/d \"Docs\")" in out and "**" in out
    assert "- T:FIRST STEP\n- T:SECOND STEP" in out and "| T:SPEED | 42 |" in out and "| T:NAME | T:VALUE |" in out
    md = MarkdownIt("commonmark").enable("table")
    kinds = lambda text: [t.type for t in md.parse(text)]  # noqa: E731
    assert kinds(out) == kinds(source)


def test_subtitles(tmp_path, fake):
    (tmp_path / "in.srt").write_text(
        "1\n00:00:01,000 --> 00:00:02,500\nHello there,\n<i>my friend.</i>\n\n2\n00:00:03,000 --> 00:00:04,000\n♪ 123 ♪\n",
        encoding="utf-8",
    )
    out = run(tmp_path, "in.srt", fake).read_text(encoding="utf-8").split("\n")
    assert out[:2] == ["1", "00:00:01,000 --> 00:00:02,500"] and out[4:7] == ["", "2", "00:00:03,000 --> 00:00:04,000"]
    cue = "\n".join(out[2:4])
    bare = cue.replace("<i>", "").replace("</i>", "")
    assert bare.upper() == bare and "<i>" in cue and "</i>" in cue and "HELLO" in cue
    assert out[7] == "♪ 123 ♪"
    (tmp_path / "in.vtt").write_text(
        "WEBVTT\n\nNOTE keep this note\n\nintro\n00:01.000 --> 00:02.000 align:start\n<v Ann>Good morning everyone.</v>\n",
        encoding="utf-8",
    )
    out = run(tmp_path, "in.vtt", fake).read_text(encoding="utf-8")
    assert out.startswith("WEBVTT\n\nNOTE keep this note\n\nintro\n00:01.000 --> 00:02.000 align:start\n<v Ann>")
    assert "T:GOOD MORNING EVERYONE.</v>" in out


def test_text(tmp_path, fake):
    (tmp_path / "in.txt").write_bytes("Title line\r\n\r\n- first point\r\n- second point\r\n".encode("utf-8"))
    out = run(tmp_path, "in.txt", fake).read_bytes().decode()
    assert out == "T:TITLE LINE\r\n\r\n- T:FIRST POINT\r\n- T:SECOND POINT\r\n"


def test_epub(tmp_path, fake):
    from lxml import etree

    make_epub(tmp_path / "in.epub")
    out = zipfile.ZipFile(run(tmp_path, "in.epub", fake))
    assert out.namelist() == zipfile.ZipFile(tmp_path / "in.epub").namelist()
    assert out.infolist()[0].compress_type == zipfile.ZIP_STORED and out.read("mimetype") == b"application/epub+zip"
    chapter = etree.fromstring(out.read("OEBPS/ch1.xhtml"))
    ns = {"h": "http://www.w3.org/1999/xhtml"}
    assert chapter.findtext(".//h:h1", namespaces=ns) == "T:CHAPTER ONE"
    p = chapter.find(".//h:p", namespaces=ns)
    assert p.find("h:em", namespaces=ns) is not None and "".join(p.itertext()).isupper()
    assert b"T:CHAPTER ONE" in out.read("OEBPS/toc.ncx") and b"T:THE BOOK TITLE" in out.read("OEBPS/content.opf")
    assert out.read("OEBPS/s.css") == b"p { margin: 0 }"


def test_nothing_translated_twice_and_output_kept(tmp_path):
    (tmp_path / "in.txt").write_text("Same line.\n\nSame line.\n", encoding="utf-8")
    calls = []

    def translate(texts):
        calls.append(texts)
        return upper_keeping_tags(texts)

    out = run(tmp_path, "in.txt", translate)
    assert calls == [["Same line."]]
    from dragoman.app.documents import DocumentError

    with pytest.raises(DocumentError, match="already exists"):
        translate_document(tmp_path / "in.txt", out, translate)
    translate_document(tmp_path / "in.txt", out, translate, overwrite=True)


def test_the_format_libraries_load_with_the_first_document_only():
    """Typed text, stdin and the window before a drop import the pipeline but read no document: the
    formats (lxml's, pdfminer's, markdown-it's readers) are imported when a document first needs them."""
    import os
    import subprocess
    import sys

    code = ("import sys\n"
            "import dragoman\n"
            "from dragoman.app.session import session, glossary\n"
            "print('dragoman.app.documents.pdf' in sys.modules, 'markdown_it' in sys.modules)\n"
            "from pathlib import Path\n"
            "from dragoman.app.documents import is_supported\n"
            "print(is_supported(Path('a.pdf')), 'dragoman.app.documents.pdf' in sys.modules)\n")
    root = Path(__file__).resolve().parents[3]  # the checkout
    run = subprocess.run([sys.executable, "-c", code], cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                         capture_output=True, text=True, check=True)
    assert run.stdout.split() == ["False", "False", "True", "True"], run.stdout + run.stderr
