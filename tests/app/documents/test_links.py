"""Formatting, links and anchors in every structured format, whatever the translation looks like:
tags kept, tags lost, a script without spaces, one word for a whole sentence.

Each document holds the same paragraph: a long sentence with a one-character bold footnote marker,
a one-word italic, a one-character link, an empty anchor, then a link around a whole sentence. Each
is made and read back with its format's own library (lxml for HTML and EPUB chapters)."""

import zipfile

import pytest
from lxml import etree

from dragoman.app.documents import translate_document

from document_fakes import no_spaces, one_word, upper_keeping_tags, upper_losing_tags

LONG = "The committee approved the final report after a long and difficult debate"
FAKES = {
    "tags-kept": (upper_keeping_tags, "Latn"),
    "tags-lost": (upper_losing_tags, "Latn"),
    "no-spaces": (no_spaces, "Hans"),
    "one-word": (one_word, "Latn"),
}


@pytest.fixture(params=list(FAKES))
def translation(request):
    return FAKES[request.param]


def translated(tmp_path, name, translation):
    fake, script = translation
    out = tmp_path / ("out-" + name)
    translate_document(tmp_path / name, out, fake, target_script=script)
    return out


# -- HTML and EPUB -------------------------------------------------------------------------------------

PAGE_BODY = (
    f'<h2><a name="top"></a>Introduction to the report</h2>'
    f'<p><a id="start"></a>{LONG}<b>*</b>, with one <i>caveat</i> noted by the chair (see <a href="#n1">1</a>). '
    f'<a href="https://example.com/r">Read the whole report online.</a></p>'
)


def html_facts(root):
    def texts(tag):
        return [("".join(el.itertext())).strip() for el in root.iter(tag)]

    links = [(a.get("href"), "".join(a.itertext()).strip()) for a in root.iter("{*}a") if a.get("href")]
    anchors = [a.get("name") or a.get("id") for a in root.iter("{*}a") if not a.get("href")]
    return texts("{*}b"), texts("{*}i"), links, anchors


def check_html_facts(before, after):
    (bold, italic, links, anchors), (bold2, italic2, links2, anchors2) = before, after
    assert len(bold2) == len(bold) and all(bold2)  # every bold and italic run is there, with text
    assert len(italic2) == len(italic) and all(italic2)
    assert [href for href, _ in links2] == [href for href, _ in links] and all(text for _, text in links2)
    assert anchors2 == anchors == ["top", "start"]


def test_html(tmp_path, translation):
    import lxml.html

    (tmp_path / "in.html").write_text(f"<!DOCTYPE html><html><body>{PAGE_BODY}</body></html>", encoding="utf-8")
    before = html_facts(lxml.html.parse(str(tmp_path / "in.html")).getroot())
    out = translated(tmp_path, "in.html", translation)
    check_html_facts(before, html_facts(lxml.html.parse(str(out)).getroot()))


def test_epub_footnote_links(tmp_path, translation):
    """A chapter of 40 lines, each ending in a footnote link, as in a poem with notes."""
    lines = "".join(f'<p>Line {i} of the poem goes on for a few words.<a href="#note-{i}" id="ref-{i}">{i}</a></p>' for i in range(1, 41))
    chapter = f'<?xml version="1.0" encoding="utf-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml"><head><title>Poem</title></head><body>{PAGE_BODY}{lines}</body></html>'
    with zipfile.ZipFile(tmp_path / "in.epub", "w") as z:
        z.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        z.writestr("META-INF/container.xml", '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile full-path="content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>')
        z.writestr("content.opf", '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0"><metadata/><manifest><item id="c" href="poem.xhtml" media-type="application/xhtml+xml"/></manifest><spine><itemref idref="c"/></spine></package>')
        z.writestr("poem.xhtml", chapter)
    out = translated(tmp_path, "in.epub", translation)
    root = etree.fromstring(zipfile.ZipFile(out).read("poem.xhtml"))
    facts = html_facts(root)
    assert [href for href, _ in facts[2]].count("#note-40") == 1
    assert len([href for href, _ in facts[2] if href.startswith("#note-")]) == 40
    check_html_facts(html_facts(etree.fromstring(chapter.encode())), facts)


# -- Word ----------------------------------------------------------------------------------------------

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
HYPERLINK_TYPE = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/hyperlink"


def make_docx(path):
    import docx
    from docx.oxml import parse_xml

    d = docx.Document()
    d.add_paragraph("Introduction to the report", "Heading 2")
    r_id = d.part.relate_to("https://example.com/r", HYPERLINK_TYPE, is_external=True)
    p = d.add_paragraph()

    def run(text, props=""):
        return f'<w:r><w:rPr>{props}</w:rPr><w:t xml:space="preserve">{text}</w:t></w:r>'

    link_style = '<w:rStyle w:val="Hyperlink"/>'

    def field(instruction, shown):
        return (
            '<w:r><w:fldChar w:fldCharType="begin"/></w:r>'
            f'<w:r><w:instrText xml:space="preserve"> {instruction} </w:instrText></w:r>'
            '<w:r><w:fldChar w:fldCharType="separate"/></w:r>'
            + run(shown, link_style) +
            '<w:r><w:fldChar w:fldCharType="end"/></w:r>'
        )

    body = (
        '<w:bookmarkStart w:id="0" w:name="start"/><w:bookmarkEnd w:id="0"/>'
        + run(LONG) + run("*", "<w:b/>") + run(", with one ") + run("caveat", "<w:i/>")
        + run(" noted by the chair (see ")
        + '<w:hyperlink w:anchor="n1">' + run("1", link_style) + "</w:hyperlink>"
        + run("), and ") + field('HYPERLINK "https://example.com/f"', "the field") + run(" too. ")
        + f'<w:hyperlink r:id="{r_id}">' + run("Read the whole report online.", link_style) + "</w:hyperlink>"
    )
    for el in parse_xml(f'<w:p xmlns:w="{W}" xmlns:r="{R}">{body}</w:p>'):
        p._p.append(el)
    d.save(path)
    return r_id


def docx_facts(path):
    import docx

    d = docx.Document(path)
    body = d.element.body
    q = lambda name: f"{{{W}}}{name}"

    def run_texts(predicate):
        return ["".join(t.text or "" for t in r.iter(q("t"))) for r in body.iter(q("r")) if predicate(r)]

    links = []
    for link in body.iter(q("hyperlink")):
        target = link.get(q("anchor")) or d.part.rels[link.get(f"{{{R}}}id")].target_ref
        links.append((target, "".join(t.text or "" for t in link.iter(q("t")))))
    fields = []  # the instruction of each field and the text it shows
    for p in body.iter(q("p")):
        state, instruction, shown = None, "", ""
        for el in p.iter(q("fldChar"), q("instrText"), q("t")):
            kind = el.get(q("fldCharType"))
            if kind == "begin":
                state, instruction, shown = "code", "", ""
            elif kind == "separate":
                state = "result"
            elif kind == "end":
                fields.append((instruction.strip(), shown))
                state = None
            elif el.tag == q("instrText") and state == "code":
                instruction += el.text
            elif el.tag == q("t") and state == "result":
                shown += el.text or ""
    bookmarks = [b.get(q("name")) for b in body.iter(q("bookmarkStart"))]
    bold = run_texts(lambda r: r.find(f"{q('rPr')}/{q('b')}") is not None)
    italic = run_texts(lambda r: r.find(f"{q('rPr')}/{q('i')}") is not None)
    return bold, italic, links, fields, bookmarks


def test_docx(tmp_path, translation):
    make_docx(tmp_path / "in.docx")
    bold, italic, links, fields, bookmarks = docx_facts(tmp_path / "in.docx")
    assert links == [("n1", "1"), ("https://example.com/r", "Read the whole report online.")]
    assert fields == [('HYPERLINK "https://example.com/f"', "the field")]

    bold2, italic2, links2, fields2, bookmarks2 = docx_facts(translated(tmp_path, "in.docx", translation))
    assert len(bold2) == 1 and bold2[0].strip() and len(italic2) == 1 and italic2[0].strip()
    assert [target for target, _ in links2] == ["n1", "https://example.com/r"] and all(text.strip() for _, text in links2)
    assert [instruction for instruction, _ in fields2] == ['HYPERLINK "https://example.com/f"']
    assert all(shown.strip() for _, shown in fields2)  # the field still shows text: the link is clickable
    assert bookmarks2 == bookmarks == ["start"]


# -- PowerPoint ----------------------------------------------------------------------------------------


def pptx_facts(path):
    from pptx import Presentation

    runs = [r for shape in Presentation(path).slides[0].shapes if shape.has_text_frame
            for p in shape.text_frame.paragraphs for r in p.runs]
    return (
        [r.text for r in runs if r.font.bold],
        [r.text for r in runs if r.font.italic],
        [(r.hyperlink.address, r.text) for r in runs if r.hyperlink.address],
    )


def test_pptx(tmp_path, translation):
    from pptx import Presentation
    from pptx.util import Inches

    prs = Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[6])
    p = slide.shapes.add_textbox(Inches(1), Inches(1), Inches(8), Inches(3)).text_frame.paragraphs[0]
    for text, bold, italic, link in [
        (LONG, False, False, None), ("*", True, False, None), (", with one ", False, False, None),
        ("caveat", False, True, None), (" noted by the chair (see ", False, False, None),
        ("1", False, False, "https://example.com/n1"), ("). ", False, False, None),
    ]:
        r = p.add_run()
        r.text, r.font.bold, r.font.italic = text, bold, italic
        if link:
            r.hyperlink.address = link
    prs.save(tmp_path / "in.pptx")

    bold, italic, links = pptx_facts(translated(tmp_path, "in.pptx", translation))
    assert len(bold) == 1 and bold[0].strip() and len(italic) == 1 and italic[0].strip()
    assert [address for address, _ in links] == ["https://example.com/n1"] and links[0][1].strip()


# -- OpenDocument --------------------------------------------------------------------------------------


def test_odt(tmp_path, translation):
    from odf import teletype, text
    from odf.opendocument import OpenDocumentText, load
    from odf.style import Style, TextProperties

    doc = OpenDocumentText()
    styles = {}
    for name, props in (("Bold", {"fontweight": "bold"}), ("Italic", {"fontstyle": "italic"})):
        styles[name] = Style(name=name, family="text")
        styles[name].addElement(TextProperties(**props))
        doc.automaticstyles.addElement(styles[name])
    p = text.P()
    p.addElement(text.Bookmark(name="start"))
    p.addText(LONG)
    p.addElement(text.Span(stylename=styles["Bold"], text="*"))
    p.addText(", with one ")
    p.addElement(text.Span(stylename=styles["Italic"], text="caveat"))
    p.addText(" noted by the chair (see ")
    p.addElement(text.A(href="#n1", text="1"))
    p.addText("). ")
    p.addElement(text.A(href="https://example.com/r", text="Read the whole report online."))
    doc.text.addElement(p)
    doc.save(tmp_path / "in.odt")

    out = load(translated(tmp_path, "in.odt", translation))
    spans = {s.getAttribute("stylename"): teletype.extractText(s) for s in out.getElementsByType(text.Span)}
    assert sorted(spans) == ["Bold", "Italic"] and all(t.strip() for t in spans.values())
    links = [(a.getAttribute("href"), teletype.extractText(a)) for a in out.getElementsByType(text.A)]
    assert [href for href, _ in links] == ["#n1", "https://example.com/r"] and all(t.strip() for _, t in links)
    assert [b.getAttribute("name") for b in out.getElementsByType(text.Bookmark)] == ["start"]


TARGETS = ["{{ site.url }}/a%20b?x=1&y={id}", "/p/%7Bid%7D/%C3%A9t%C3%A9", "page.html#sec%202", "mailto:a@b.org?subject=Hi%20there"]


def test_html_link_targets_come_back_as_written_and_double_escapes_stay(tmp_path, translation):
    fake, script = translation
    links = "".join(f'<a href="{t.replace("&", "&amp;")}">link {n}</a> ' for n, t in enumerate(TARGETS))
    page = f"<html><body><p>Read these: {links}now.</p><p>Tom &amp;amp; Jerry &amp;lt;3.</p></body></html>"
    (tmp_path / "in.html").write_text(page, encoding="utf-8")
    translate_document(tmp_path / "in.html", tmp_path / "out.html", fake, target_script=script)
    out = (tmp_path / "out.html").read_text(encoding="utf-8")
    root = etree.HTML(out)
    assert [a.get("href") for a in root.iter("a")] == TARGETS  # none added, none changed
    if fake is upper_keeping_tags:
        assert "&amp;AMP;" in out and "&amp;LT;3" in out


def test_markdown_link_targets_and_autolinks_come_back_as_written(tmp_path, translation):
    fake, script = translation
    source = ("Read [the page](/p/%7Bid%7D/%C3%A9t%C3%A9?a=1&b=2) and <https://a.org/%7Bx%7D> now.\n\n"
              "![a picture](img/%7Bname%7D.png) Tom &amp;amp; Jerry.\n")
    (tmp_path / "in.md").write_text(source, encoding="utf-8")
    translate_document(tmp_path / "in.md", tmp_path / "out.md", fake, target_script=script)
    out = (tmp_path / "out.md").read_text(encoding="utf-8")
    for target in ("(/p/%7Bid%7D/%C3%A9t%C3%A9?a=1&b=2)", "<https://a.org/%7Bx%7D>", "(img/%7Bname%7D.png)"):
        assert out.count(target) == 1
    assert out.count("](") == 2  # no link added
    if fake is upper_keeping_tags:
        assert "&amp;AMP;" in out or "&amp;amp;" in out
