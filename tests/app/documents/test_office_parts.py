"""Parts of zip documents beyond the body (notes, text boxes, charts, SmartArt, comments), and how
the parts are found: through the package relationships (Office) and the manifest (EPUB).

python-docx and python-pptx cannot create footnotes, endnotes, text boxes, SmartArt or slide
comments, so their XML is written by hand here and added as real package parts through the
libraries' own packaging API (`Part` + `relate_to`: content type and relationship included); the
charts are python-pptx's own. The output is opened again with the library and each part is
read back with lxml. Packages with parts in unusual places are the libraries' own, rewritten.
"""

import zipfile
from pathlib import Path

import pytest
from lxml import etree

from dragoman.app.documents import DocumentError, translate_document

from document_fakes import upper_keeping_tags

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
A = "http://schemas.openxmlformats.org/drawingml/2006/main"
NS = {
    "w": W, "a": A,
    "c": "http://schemas.openxmlformats.org/drawingml/2006/chart",
    "dgm": "http://schemas.openxmlformats.org/drawingml/2006/diagram",
    "p": "http://schemas.openxmlformats.org/presentationml/2006/main",
    "p188": "http://schemas.microsoft.com/office/powerpoint/2018/8/main",
}
WNS = f'xmlns:w="{W}" xmlns:a="{A}"'


def run(tmp_path, name, fake):
    out = tmp_path / ("out" + Path(name).suffix)
    translate_document(tmp_path / name, out, fake)
    return out


def texts(xml, path):
    """The text of each paragraph matched by `path` (w:p or a:p), its runs' w:t / a:t joined."""
    return ["".join(p.itertext()) for p in xml.iterfind(path, NS)]


def add_part(owner, partname, content_type, reltype, xml):
    from docx.opc.packuri import PackURI
    from docx.opc.part import Part

    part = Part(PackURI(partname), content_type, xml.encode("utf-8"), owner.package)
    return owner.relate_to(part, reltype)


NOTES = (
    '<w:{kind}s {ns}>'
    '<w:{kind} w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:{kind}>'
    '<w:{kind} w:type="continuationSeparator" w:id="0"><w:p><w:r><w:continuationSeparator/></w:r></w:p></w:{kind}>'
    '<w:{kind} w:id="1"><w:p><w:pPr><w:pStyle w:val="{Kind}Text"/></w:pPr>'
    '<w:r><w:rPr><w:rStyle w:val="{Kind}Reference"/></w:rPr><w:{kind}Ref/></w:r>'
    '<w:r><w:t xml:space="preserve"> {text} </w:t></w:r><w:r><w:rPr><w:i/></w:rPr><w:t>{italic}</w:t></w:r>'
    '<w:r><w:t>.</w:t></w:r></w:p></w:{kind}></w:{kind}s>'
)


def test_docx_notes_text_boxes_chart_and_smartart(tmp_path, fake):
    import docx
    from docx.opc.constants import CONTENT_TYPE as CT, RELATIONSHIP_TYPE as RT
    from docx.oxml import parse_xml
    from pptx.chart.data import CategoryChartData
    from pptx.chart.xmlwriter import ChartXmlWriter
    from pptx.enum.chart import XL_CHART_TYPE

    d = docx.Document()
    p = d.add_paragraph("The engine is fast")
    ref = p.add_run()
    ref._r.append(parse_xml(f'<w:footnoteReference {WNS} w:id="1"/>'))
    p.add_run(" and small")
    p.add_run()._r.append(parse_xml(f'<w:endnoteReference {WNS} w:id="1"/>'))
    p.add_run(".")
    for kind, text, italic in (("footnote", "See the benchmark in", "chapter two"), ("endnote", "Measured on one GPU in", "March")):
        rel = getattr(RT, kind.upper() + "S")
        add_part(d.part, f"/word/{kind}s.xml", getattr(CT, f"WML_{kind.upper()}S"), rel,
                 NOTES.format(kind=kind, Kind=kind.capitalize(), ns=WNS, text=text, italic=italic))

    # A text box as Word writes it: DrawingML (wps:txbx) with a VML fallback (v:textbox), both holding w:txbxContent.
    box = d.add_paragraph("Before the box ")
    box_content = ('<w:txbxContent><w:p><w:r><w:rPr><w:b/></w:rPr><w:t>Boxed warning</w:t></w:r>'
                   '<w:r><w:t xml:space="preserve"> inside a frame.</w:t></w:r></w:p></w:txbxContent>')
    box.add_run()._r.append(parse_xml(
        f'<mc:AlternateContent {WNS} xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006"'
        ' xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing"'
        ' xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape" xmlns:v="urn:schemas-microsoft-com:vml">'
        '<mc:Choice Requires="wps"><w:drawing><wp:anchor distT="0" distB="0" distL="0" distR="0" simplePos="0" relativeHeight="1"'
        ' behindDoc="0" locked="0" layoutInCell="1" allowOverlap="1"><wp:simplePos x="0" y="0"/>'
        '<wp:positionH relativeFrom="column"><wp:posOffset>0</wp:posOffset></wp:positionH>'
        '<wp:positionV relativeFrom="paragraph"><wp:posOffset>0</wp:posOffset></wp:positionV>'
        '<wp:extent cx="1828800" cy="457200"/><wp:wrapNone/><wp:docPr id="10" name="Text Box 1"/>'
        '<a:graphic><a:graphicData uri="http://schemas.microsoft.com/office/word/2010/wordprocessingShape"><wps:wsp>'
        '<wps:spPr><a:prstGeom prst="rect"/></wps:spPr>'
        f'<wps:txbx>{box_content}</wps:txbx><wps:bodyPr/></wps:wsp></a:graphicData></a:graphic></wp:anchor></w:drawing></mc:Choice>'
        f'<mc:Fallback><w:pict><v:rect style="width:144pt;height:36pt"><v:textbox>{box_content}</v:textbox></v:rect></w:pict></mc:Fallback>'
        '</mc:AlternateContent>'
    ))
    box.add_run("after the box.")

    # A chart (python-pptx's chart XML, with a title) and a SmartArt data part.
    data = CategoryChartData()
    data.categories = ["North", "South"]
    data.add_series("Revenue", (1.5, 2.5))
    chart = etree.fromstring(ChartXmlWriter(XL_CHART_TYPE.COLUMN_CLUSTERED, data).xml.encode())
    chart.find("c:chart", NS).insert(0, etree.fromstring(
        f'<c:title xmlns:c="{NS["c"]}" xmlns:a="{A}"><c:tx><c:rich><a:bodyPr/><a:p><a:r><a:rPr b="1"/><a:t>Revenue by region</a:t></a:r>'
        '</a:p></c:rich></c:tx><c:overlay val="0"/></c:title>'))
    chart_xml = etree.tostring(chart, encoding="unicode")
    add_part(d.part, "/word/charts/chart1.xml", CT.DML_CHART, RT.CHART, chart_xml)
    add_part(d.part, "/word/diagrams/data1.xml", CT.DML_DIAGRAM_DATA, RT.DIAGRAM_DATA,
             f'<dgm:dataModel xmlns:dgm="{NS["dgm"]}" xmlns:a="{A}"><dgm:ptLst>'
             '<dgm:pt modelId="{00000000-0000-0000-0000-000000000001}" type="doc"><dgm:t><a:bodyPr/><a:p><a:endParaRPr/></a:p></dgm:t></dgm:pt>'
             '<dgm:pt modelId="{00000000-0000-0000-0000-000000000002}"><dgm:t><a:bodyPr/><a:p><a:r><a:rPr i="1"/><a:t>Plan the work</a:t></a:r></a:p></dgm:t></dgm:pt>'
             '<dgm:pt modelId="{00000000-0000-0000-0000-000000000003}"><dgm:t><a:bodyPr/><a:p><a:r><a:t>Step 2</a:t></a:r></a:p></dgm:t></dgm:pt>'
             '</dgm:ptLst><dgm:cxnLst/><dgm:bg/><dgm:whole/></dgm:dataModel>')
    d.save(tmp_path / "in.docx")

    out_path = run(tmp_path, "in.docx", fake)
    out = docx.Document(out_path)  # opens in python-docx, every part still related
    assert {r.reltype for r in out.part.rels.values()} >= {RT.FOOTNOTES, RT.ENDNOTES, RT.CHART, RT.DIAGRAM_DATA}
    z = zipfile.ZipFile(out_path)
    assert z.namelist() == zipfile.ZipFile(tmp_path / "in.docx").namelist()
    body = etree.fromstring(z.read("word/document.xml"))

    first = body.find(".//w:body/w:p", NS)
    assert "".join(first.itertext()) == "T:THE ENGINE IS FAST AND SMALL."
    assert len(first.findall(".//w:footnoteReference", NS)) == 1 and len(first.findall(".//w:endnoteReference", NS)) == 1

    for kind, expected in (("footnote", "T:SEE THE BENCHMARK IN CHAPTER TWO."), ("endnote", "T:MEASURED ON ONE GPU IN MARCH.")):
        notes = etree.fromstring(z.read(f"word/{kind}s.xml"))
        assert len(notes.findall(f"w:{kind}", NS)) == 3  # the separators and the note
        assert len(notes.findall(f".//w:{kind}Ref", NS)) == 1 and len(notes.findall(".//w:separator", NS)) == 1
        note = notes.find(f"w:{kind}[@w:id='1']/w:p", NS)
        assert note.find("w:pPr/w:pStyle", NS).get(f"{{{W}}}val") == f"{kind.capitalize()}Text"
        assert "".join(note.itertext()).strip() == expected
        italic = "".join(t for r in note.findall("w:r", NS) if r.find("w:rPr/w:i", NS) is not None for t in r.itertext())
        assert italic.strip() and italic.isupper()

    boxes = body.findall(".//w:txbxContent", NS)
    assert len(boxes) == 2  # DrawingML and its VML fallback
    for content in boxes:
        assert texts(content, "w:p") == ["T:BOXED WARNING INSIDE A FRAME."]
        bold = "".join(t for r in content.findall(".//w:r", NS) if r.find("w:rPr/w:b", NS) is not None for t in r.itertext())
        assert bold.strip() and bold.isupper()
    box_p = body.findall(".//w:body/w:p", NS)[1]
    outside = "".join(t.text for t in box_p.findall("w:r/w:t", NS))
    assert outside == "T:BEFORE THE BOX AFTER THE BOX." and len(box_p.findall(".//mc:AlternateContent", {"mc": "http://schemas.openxmlformats.org/markup-compatibility/2006"})) == 1

    chart = etree.fromstring(z.read("word/charts/chart1.xml"))
    assert texts(chart, ".//c:title//a:p") == ["T:REVENUE BY REGION"] and chart.find(".//c:title//a:rPr", NS).get("b") == "1"
    assert [v.text for v in chart.iterfind(".//c:cat//c:v", NS)] == ["North", "South"]  # data labels are data: kept
    assert [v.text for v in chart.iterfind(".//c:val//c:v", NS)] == ["1.5", "2.5"]
    smart = etree.fromstring(z.read("word/diagrams/data1.xml"))
    assert texts(smart, ".//dgm:t/a:p") == ["", "T:PLAN THE WORK", "T:STEP 2"]
    assert smart.find(".//a:r/a:rPr", NS).get("i") == "1" and len(smart.findall(".//dgm:pt", NS)) == 3


def test_pptx_comments_chart_and_smartart(tmp_path, fake):
    from pptx import Presentation
    from pptx.chart.data import CategoryChartData
    from pptx.enum.chart import XL_CHART_TYPE
    from pptx.opc.package import Part
    from pptx.opc.packuri import PackURI
    from pptx.util import Inches

    prs = Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[5])
    slide.shapes.title.text = "Results"
    data = CategoryChartData()
    data.categories = ["East", "West"]
    data.add_series("Units", (3, 4))
    chart = slide.shapes.add_chart(XL_CHART_TYPE.BAR_CLUSTERED, Inches(1), Inches(2), Inches(6), Inches(4), data).chart
    chart.has_title = True
    chart.chart_title.text_frame.text = "Units sold per region"
    chart.chart_title.text_frame.paragraphs[0].runs[0].font.bold = True
    slide.notes_slide.notes_text_frame.text = "Mention the west."

    def add(partname, content_type, reltype, xml):
        part = Part(PackURI(partname), content_type, prs.part.package, xml.encode("utf-8"))
        slide.part.relate_to(part, reltype)

    add("/ppt/comments/comment1.xml", "application/vnd.openxmlformats-officedocument.presentationml.comments+xml",
        "http://schemas.openxmlformats.org/officeDocument/2006/relationships/comments",
        f'<p:cmLst xmlns:p="{NS["p"]}"><p:cm authorId="0" dt="2024-01-01T10:00:00.000" idx="1"><p:pos x="10" y="10"/>'
        '<p:text>Please check these numbers.</p:text></p:cm></p:cmLst>')
    add("/ppt/comments/modernComment_100_1A2B3C4D.xml", "application/vnd.ms-powerpoint.comments+xml",
        "http://schemas.microsoft.com/office/2018/10/relationships/comments",
        f'<p188:cmLst xmlns:p188="{NS["p188"]}" xmlns:a="{A}"><p188:cm id="{{00000000-0000-0000-0000-000000000001}}"'
        ' authorId="{00000000-0000-0000-0000-000000000002}" created="2024-01-01T10:00:00.000"><p188:txBody><a:bodyPr/>'
        '<a:p><a:r><a:t>Is the west </a:t></a:r><a:r><a:rPr b="1"/><a:t>really</a:t></a:r><a:r><a:t> up?</a:t></a:r></a:p>'
        '</p188:txBody></p188:cm></p188:cmLst>')
    add("/ppt/diagrams/data1.xml", "application/vnd.openxmlformats-officedocument.drawingml.diagramData+xml",
        "http://schemas.openxmlformats.org/officeDocument/2006/relationships/diagramData",
        f'<dgm:dataModel xmlns:dgm="{NS["dgm"]}" xmlns:a="{A}"><dgm:ptLst>'
        '<dgm:pt modelId="1"><dgm:t><a:bodyPr/><a:p><a:r><a:t>Collect feedback</a:t></a:r></a:p></dgm:t></dgm:pt>'
        '</dgm:ptLst><dgm:cxnLst/></dgm:dataModel>')
    prs.save(tmp_path / "in.pptx")

    out_path = run(tmp_path, "in.pptx", fake)
    out = Presentation(out_path)
    s = out.slides[0]
    assert s.shapes.title.text_frame.text == "T:RESULTS"
    assert s.notes_slide.notes_text_frame.text == "T:MENTION THE WEST."
    out_chart = next(sh for sh in s.shapes if sh.has_chart).chart
    assert out_chart.chart_title.text_frame.text == "T:UNITS SOLD PER REGION"
    assert out_chart.chart_title.text_frame.paragraphs[0].runs[0].font.bold
    assert list(out_chart.plots[0].categories) == ["East", "West"] and list(out_chart.plots[0].series[0].values) == [3, 4]

    z = zipfile.ZipFile(out_path)
    assert z.namelist() == zipfile.ZipFile(tmp_path / "in.pptx").namelist()
    legacy = etree.fromstring(z.read("ppt/comments/comment1.xml"))
    assert [t.text for t in legacy.iterfind(".//p:text", NS)] == ["T:PLEASE CHECK THESE NUMBERS."]
    assert legacy.find(".//p:pos", NS).get("x") == "10" and legacy.find("p:cm", NS).get("authorId") == "0"
    modern = etree.fromstring(z.read("ppt/comments/modernComment_100_1A2B3C4D.xml"))
    assert texts(modern, ".//a:p") == ["T:IS THE WEST REALLY UP?"]
    bold = [r.findtext("a:t", namespaces=NS) for r in modern.iterfind(".//a:r", NS) if r.find("a:rPr[@b='1']", NS) is not None]
    assert bold and "".join(bold).strip().isupper()
    smart = etree.fromstring(z.read("ppt/diagrams/data1.xml"))
    assert texts(smart, ".//a:p") == ["T:COLLECT FEEDBACK"]


# Part names come from the package relationships, not from fixed paths.

REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"


def repackage(path, renames=None, edits=None, added=()):
    """The package at `path` rewritten: members renamed, (old, new) byte edits made in some members
    (named as before the renaming), members added."""
    renames, edits = renames or {}, edits or {}
    with zipfile.ZipFile(path) as src:
        members = []
        for info in src.infolist():
            data = src.read(info)
            for old, new in edits.get(info.filename, ()):
                assert old in data, (info.filename, old)
                data = data.replace(old, new)
            members.append((renames.get(info.filename, info.filename), data))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for name, data in members + list(added):
            out.writestr(name, data)


def test_word_parts_are_the_ones_the_relationships_name(tmp_path):
    """The main part in another folder under an absolute target, its header reached through `..`;
    external, escaping and missing targets are skipped and nothing else is read or changed."""
    import docx

    d = docx.Document()
    d.add_paragraph("Body text")
    d.sections[0].header.paragraphs[0].text = "Header text"
    d.save(tmp_path / "in.docx")
    decoys = "".join(
        f'<Relationship Id="rX{i}" Type="{REL}/header" Target="{target}"{mode}/>'
        for i, (target, mode) in enumerate([("http://example.com/h.xml", ' TargetMode="External"'),
                                            ("../../../etc/passwd", ""), ("header9.xml", "")])
    )
    repackage(tmp_path / "in.docx",
              renames={"word/document.xml": "content/main.xml", "word/_rels/document.xml.rels": "content/_rels/main.xml.rels"},
              edits={"_rels/.rels": [(b'Target="word/document.xml"', b'Target="/content/main.xml"')],
                     "[Content_Types].xml": [(b'PartName="/word/document.xml"', b'PartName="/content/main.xml"')],
                     "word/_rels/document.xml.rels": [(b'Target="', b'Target="../word/'),
                                                      (b"</Relationships>", decoys.encode() + b"</Relationships>")]},
              added=[("word/header2.xml", f'<w:hdr xmlns:w="{W}"><w:p><w:r><w:t>Unrelated</w:t></w:r></w:p></w:hdr>')])

    out_path = run(tmp_path, "in.docx", upper_keeping_tags)
    with zipfile.ZipFile(tmp_path / "in.docx") as a, zipfile.ZipFile(out_path) as b:
        assert a.namelist() == b.namelist()
        assert texts(etree.fromstring(b.read("content/main.xml")), ".//w:p") == ["T:BODY TEXT"]
        assert texts(etree.fromstring(b.read("word/header1.xml")), ".//w:p") == ["T:HEADER TEXT"]
        assert b.read("word/header2.xml") == a.read("word/header2.xml")  # in the archive, related from nothing


def test_a_word_documents_paragraphs_are_found_as_they_are_asked_for(tmp_path):
    """A long document's first sentences go to the engine while the rest is read: its stream gives
    the first paragraph having found no other; taken whole it gives every part's paragraphs in
    order, as `segments` does."""
    import docx

    from dragoman.app.documents import docx as docx_format

    d = docx.Document()
    for i in range(50):
        d.add_paragraph(f"Paragraph {i}.")
    d.sections[0].header.paragraphs[0].text = "Header text"
    d.save(tmp_path / "in.docx")

    document = docx_format.extract(tmp_path / "in.docx")
    stream = iter(document.segment_stream())
    assert next(stream).text == "Paragraph 0."
    assert len(document.chunks) == 1
    rest = [segment.text for segment in stream]
    assert rest == [f"Paragraph {i}." for i in range(1, 50)] + ["Header text"]
    assert [segment.text for segment in docx_format.extract(tmp_path / "in.docx").segments] == ["Paragraph 0.", *rest]


def test_a_word_package_without_its_main_part_is_refused(tmp_path):
    import docx

    docx.Document().save(tmp_path / "in.docx")
    repackage(tmp_path / "in.docx", edits={"_rels/.rels": [(b'Target="word/document.xml"', b'Target="word/gone.xml"')]})
    with pytest.raises(DocumentError, match=r"^not a Word document \(its package relationships name no main document in the archive\)$"):
        translate_document(tmp_path / "in.docx", tmp_path / "out.docx", upper_keeping_tags)

    import openpyxl

    openpyxl.Workbook().save(tmp_path / "book.xlsx")
    (tmp_path / "book.xlsx").rename(tmp_path / "book.docx")
    with pytest.raises(DocumentError, match=r"^not a Word document \(its main part xl/workbook.xml is a 'workbook' document\)$"):
        translate_document(tmp_path / "book.docx", tmp_path / "out2.docx", upper_keeping_tags)
    assert not (tmp_path / "out.docx").exists() and not (tmp_path / "out2.docx").exists()


def test_slides_and_notes_are_found_through_the_relationships(tmp_path):
    from pptx import Presentation

    prs = Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[5])
    slide.shapes.title.text = "Slide title"
    slide.notes_slide.notes_text_frame.text = "Speaker note."
    prs.save(tmp_path / "in.pptx")
    repackage(tmp_path / "in.pptx",
              renames={"ppt/slides/slide1.xml": "ppt/pages/first.xml", "ppt/slides/_rels/slide1.xml.rels": "ppt/pages/_rels/first.xml.rels",
                       "ppt/notesSlides/notesSlide1.xml": "ppt/talk/n.xml", "ppt/notesSlides/_rels/notesSlide1.xml.rels": "ppt/talk/_rels/n.xml.rels"},
              edits={"ppt/_rels/presentation.xml.rels": [(b'Target="slides/slide1.xml"', b'Target="pages/first.xml"')],
                     "ppt/slides/_rels/slide1.xml.rels": [(b'Target="../notesSlides/notesSlide1.xml"', b'Target="../talk/n.xml"')],
                     "ppt/notesSlides/_rels/notesSlide1.xml.rels": [(b'Target="../slides/slide1.xml"', b'Target="../pages/first.xml"')],
                     "[Content_Types].xml": [(b'"/ppt/slides/slide1.xml"', b'"/ppt/pages/first.xml"'),
                                             (b'"/ppt/notesSlides/notesSlide1.xml"', b'"/ppt/talk/n.xml"')]})

    out = Presentation(run(tmp_path, "in.pptx", upper_keeping_tags))
    assert out.slides[0].shapes.title.text_frame.text == "T:SLIDE TITLE"
    assert out.slides[0].notes_slide.notes_text_frame.text == "T:SPEAKER NOTE."


def test_sheets_and_shared_strings_are_found_through_the_relationships(tmp_path):
    """Strict-namespace relationship types included: the type's last segment is what counts."""
    import openpyxl

    wb = openpyxl.Workbook()
    wb.active["A1"] = "Cell text"
    wb.create_sheet("Second")["B2"] = "Other sheet"
    wb.save(tmp_path / "in.xlsx")
    transitional, strict = REL.encode() + b"/", b"http://purl.oclc.org/ooxml/officeDocument/relationships/"
    shared = b'<Relationship Type="%ssharedStrings" Target="strings/all.xml" Id="rId9"/></Relationships>' % strict
    repackage(tmp_path / "in.xlsx",
              renames={"xl/worksheets/sheet2.xml": "xl/tabs/data.xml"},
              edits={"_rels/.rels": [(transitional, strict)],
                     "xl/_rels/workbook.xml.rels": [(b'"/xl/worksheets/sheet2.xml"', b'"tabs/data.xml"'), (transitional, strict),
                                                    (b"</Relationships>", shared)],
                     "[Content_Types].xml": [(b'"/xl/worksheets/sheet2.xml"', b'"/xl/tabs/data.xml"')]},
              added=[("xl/strings/all.xml", '<sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
                                            '<si><t>Shared text</t></si></sst>')])

    out_path = run(tmp_path, "in.xlsx", upper_keeping_tags)
    with zipfile.ZipFile(out_path) as z:
        texts = {name: [t.text for t in etree.fromstring(z.read(name)).iter("{*}t")]
                 for name in ("xl/worksheets/sheet1.xml", "xl/tabs/data.xml", "xl/strings/all.xml")}
    assert texts == {"xl/worksheets/sheet1.xml": ["T:CELL TEXT"], "xl/tabs/data.xml": ["T:OTHER SHEET"],
                     "xl/strings/all.xml": ["T:SHARED TEXT"]}


def test_epub_chapters_are_the_ones_the_manifest_names(tmp_path):
    """hrefs resolved against the package document's folder (`..` and %-escapes included); external,
    escaping and missing items skipped; a container naming no package document refused."""
    container = ('<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
                 '<rootfiles><rootfile full-path="{}" media-type="application/oebps-package+xml"/></rootfiles></container>')
    items = [("c1", "../Text/one.xhtml"), ("c2", "two%20words.xhtml"), ("far", "http://example.com/remote.xhtml"),
             ("out", "../../outside.xhtml"), ("gone", "gone.xhtml")]
    manifest = "".join(f'<item id="{i}" href="{href}" media-type="application/xhtml+xml"/>' for i, href in items)
    opf = ('<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0"><metadata '
           'xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Title</dc:title></metadata>'
           f'<manifest>{manifest}</manifest><spine><itemref idref="c1"/><itemref idref="c2"/></spine></package>')
    chapter = '<html xmlns="http://www.w3.org/1999/xhtml"><head><title>t</title></head><body><p>{}</p></body></html>'
    path = tmp_path / "in.epub"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        z.writestr("META-INF/container.xml", container.format("OPS/book.opf"))
        z.writestr("OPS/book.opf", opf)
        z.writestr("Text/one.xhtml", chapter.format("First chapter"))
        z.writestr("OPS/two words.xhtml", chapter.format("Second chapter"))
        z.writestr("outside.xhtml", chapter.format("Not in the manifest"))

    out_path = run(tmp_path, "in.epub", upper_keeping_tags)
    with zipfile.ZipFile(path) as a, zipfile.ZipFile(out_path) as b:
        assert a.namelist() == b.namelist()
        assert texts(etree.fromstring(b.read("Text/one.xhtml")), ".//{*}p") == ["T:FIRST CHAPTER"]
        assert texts(etree.fromstring(b.read("OPS/two words.xhtml")), ".//{*}p") == ["T:SECOND CHAPTER"]
        assert b.read("outside.xhtml") == a.read("outside.xhtml")

    repackage(path, edits={"META-INF/container.xml": [(b'full-path="OPS/book.opf"', b'full-path="../book.opf"')]})
    with pytest.raises(DocumentError, match=r"^not a valid EPUB \(META-INF/container.xml names no package document in the archive\)$"):
        translate_document(path, tmp_path / "out2.epub", upper_keeping_tags)
