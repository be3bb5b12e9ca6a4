"""Hostile zip containers and XML, for every zip format: sizes checked on the bytes actually
inflated, budgets for the whole archive and for what is held parsed, entities refused in every
encoding lxml reads, colliding member names refused. Each archive is a real zip written here;
lying headers are made by patching the sizes in the local header and the central directory."""

import json
import struct
import subprocess
import sys
import tracemalloc
import zipfile
from pathlib import Path

import pytest

from dragoman.app.documents import DocumentError, translate_document
from dragoman.app.documents import docx as docx_format, epub, xlsx
from dragoman.app.documents.safety import MAX_PARSED_BYTES, MAX_PARSED_MARKUP, MAX_UNPACKED_BYTES, MiB, PEAK_BYTES, parse_xml

from document_fakes import make_epub, upper_keeping_tags

KINDS = ("docx", "pptx", "xlsx", "odt", "epub")
W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"


def make_document(kind, path):
    """A small valid document of `kind`, written by the format's own library (EPUB by hand)."""
    if kind == "docx":
        import docx

        d = docx.Document()
        d.add_paragraph("Some text")
        d.save(path)
    elif kind == "pptx":
        from pptx import Presentation

        prs = Presentation()
        prs.slides.add_slide(prs.slide_layouts[5]).shapes.title.text = "Some text"
        prs.save(path)
    elif kind == "xlsx":
        import openpyxl

        wb = openpyxl.Workbook()
        wb.active["A1"] = "Some text"
        wb.save(path)
    elif kind == "odt":
        from odf.opendocument import OpenDocumentText
        from odf.text import P

        d = OpenDocumentText()
        d.text.addElement(P(text="Some text"))
        d.save(str(path))
    else:
        make_epub(path)
    return path


def add_members(path, members, compression=zipfile.ZIP_DEFLATED):
    with zipfile.ZipFile(path, "a", compression) as z:
        for name, data in members:
            z.writestr(name, data)


def rewrite(path, replaced, added=()):
    """The zip at `path` again, some members' bytes replaced and members added (deflated)."""
    with zipfile.ZipFile(path) as src:
        members = [(i.filename, replaced.get(i.filename, src.read(i))) for i in src.infolist()]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for name, data in members + list(added):
            out.writestr(name, data)


def declare_sizes(path, sizes):
    """Patch the uncompressed sizes that the local headers and the central directory give for the
    members named in `sizes`."""
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z, open(path, "rb") as f:
        offsets = {name: z.getinfo(name).header_offset for name in sizes}
        offset = zipfile._EndRecData(f)[zipfile._ECD_OFFSET]
    for name, size in sizes.items():
        struct.pack_into("<I", data, offsets[name] + 22, size)
    while data[offset:offset + 4] == b"PK\x01\x02":
        name_len, extra_len, comment_len = struct.unpack_from("<HHH", data, offset + 28)
        name = data[offset + 46:offset + 46 + name_len].decode("utf-8")
        if name in sizes:
            struct.pack_into("<I", data, offset + 24, sizes[name])
        offset += 46 + name_len + extra_len + comment_len
    path.write_bytes(bytes(data))


def refused(path, match, traced=None):
    """The refusal's message; `traced`: a list given the peak of Python's allocations while refusing."""
    data = path.read_bytes()
    out = path.with_name("out" + path.suffix)
    if traced is not None:
        tracemalloc.start()
    try:
        with pytest.raises(DocumentError, match=match) as e:
            translate_document(path, out, upper_keeping_tags)
    finally:
        if traced is not None:
            traced.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
    assert "\n" not in str(e.value)
    assert path.read_bytes() == data and not out.exists()
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no partial output left
    return str(e.value)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("compression", [zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_STORED], ids=["deflate", "bzip2", "stored"])
def test_a_member_lying_about_its_size_is_refused_after_at_most_a_chunk(tmp_path, kind, compression):
    path = make_document(kind, tmp_path / f"in.{kind}")
    add_members(path, [("media/big.bin", b"\0" * (48 * MiB))], compression)
    declare_sizes(path, {"media/big.bin": 1000})
    peak = []
    message = refused(path, "media/big.bin inflates past the 1000 bytes its header declares", peak)
    assert "zip bomb" in message
    assert peak[0] < 8 * MiB  # chunks, not the 48 MiB the member really holds


def test_a_lying_text_part_is_refused(tmp_path):
    path = make_document("docx", tmp_path / "in.docx")
    with zipfile.ZipFile(path) as z:
        honest = z.read("word/document.xml")
    padded = honest.replace(b"<w:body>", b"<w:body>" + b" " * (20 * MiB))
    rewritten = tmp_path / "re.docx"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(rewritten, "w", zipfile.ZIP_BZIP2) as out:
        for info in src.infolist():
            out.writestr(info.filename, padded if info.filename == "word/document.xml" else src.read(info))
    path.unlink()
    declare_sizes(rewritten, {"word/document.xml": len(honest)})
    refused(rewritten, "word/document.xml inflates past")


def related_headers(path, count, size):
    """`count` headers of `size` bytes (blanks after one paragraph), related from Word's main part."""
    header = f'<w:hdr xmlns:w="{W}"><w:p><w:r><w:t>Head</w:t></w:r></w:p>'.encode() + b" " * size + b"</w:hdr>"
    rels = '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">' + "".join(
        f'<Relationship Id="rH{i}" Type="{REL}/header" Target="header{i}.xml"/>' for i in range(count)
    ) + '</Relationships>'
    rewrite(path, {"word/_rels/document.xml.rels": rels.encode()}, [(f"word/header{i}.xml", header) for i in range(count)])


def test_a_thousand_parts_of_one_mib_are_refused_by_the_archive_budget(tmp_path):
    """Each part passes every per-member limit; declared honestly they are refused at once, lying
    they are refused at the first lie."""
    path = make_document("docx", tmp_path / "in.docx")
    related_headers(path, 1000, MiB)
    assert path.stat().st_size < 4 * MiB
    refused(path, f"unpacks to 1001 MiB, over the limit of {MAX_UNPACKED_BYTES // MiB} MiB")
    declare_sizes(path, {f"word/header{i}.xml": 1000 for i in range(1000)})
    refused(path, "word/header0.xml inflates past the 1000 bytes its header declares")


def test_parts_of_one_mib_are_refused_by_the_parsed_budget(tmp_path):
    """A hundred related headers fit the archive budget; held parsed together they are refused."""
    path = make_document("docx", tmp_path / "in.docx")
    related_headers(path, 100, MiB)
    refused(path, f"text parts hold over {MAX_PARSED_BYTES // MiB} MiB of XML")


def test_parts_of_tiny_elements_exhaust_the_markup_budget(tmp_path):
    path = make_document("xlsx", tmp_path / "in.xlsx")
    with zipfile.ZipFile(path) as z:
        sheet = z.read("xl/worksheets/sheet1.xml")
    cells = b"<c/>" * (MAX_PARSED_MARKUP + 1)  # 8 MiB: within the byte budgets
    rewrite(path, {"xl/worksheets/sheet1.xml": sheet.replace(b"<sheetData>", b"<sheetData>" + cells)})
    refused(path, "XML tags and attributes, over the limit")


def test_a_legitimate_highly_compressible_word_file_is_translated(tmp_path):
    import docx

    d = docx.Document()
    for _ in range(12_000):
        d.add_paragraph("The same paragraph, repeated in a long generated report.")
    d.save(tmp_path / "report.docx")
    with zipfile.ZipFile(tmp_path / "report.docx") as z:
        info = z.getinfo("word/document.xml")
    assert info.file_size > 200 * info.compress_size  # what a ratio rule called a zip bomb
    translate_document(tmp_path / "report.docx", tmp_path / "out.docx", upper_keeping_tags)
    out = docx.Document(tmp_path / "out.docx")
    assert len(out.paragraphs) == 12_000
    assert {p.text for p in out.paragraphs} == {"T:THE SAME PARAGRAPH, REPEATED IN A LONG GENERATED REPORT."}


PEAK_PROBE = """
import json, re, sys
from pathlib import Path
from dragoman.app.documents import DocumentError, docx

def high_water():  # the process's own peak RSS (ru_maxrss would include the parent's at fork)
    return int(re.search(r"VmHWM:\\s+(\\d+) kB", Path("/proc/self/status").read_text()).group(1)) * 1024

before = high_water()
try:
    docx.extract(Path(sys.argv[1])).close()
    outcome = "opened"
except DocumentError as e:
    outcome = str(e)
print(json.dumps({"outcome": outcome, "grown": high_water() - before}))
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the peak RSS from /proc")
def test_the_worst_document_within_the_budgets_stays_under_the_peak_bound(tmp_path):
    """The costliest markup found (formatted runs: elements lxml holds and runs the reader keeps) and
    the most text, each just under its budget, in the main part and in related headers; measured in
    a fresh process (lxml allocates outside Python's tracing)."""
    path = make_document("docx", tmp_path / "in.docx")
    with zipfile.ZipFile(path) as z:
        body = z.read("word/document.xml")
    runs = b"<w:r><w:rPr><w:b/></w:rPr><w:t>x</w:t></w:r>" * ((MAX_PARSED_MARKUP - 10_000) // 7)  # 7 '<' each
    body = body.replace(b"<w:body>", b"<w:body><w:p>" + runs + b"</w:p>")
    text = b"<w:p><w:r><w:t>" + b"x" * (8 * MiB) + b"</w:t></w:r></w:p>"
    header = f'<w:hdr xmlns:w="{W}">'.encode() + text + b"</w:hdr>"
    rels_name = "word/_rels/document.xml.rels"
    with zipfile.ZipFile(path) as z:
        rels = z.read(rels_name).replace(b"</Relationships>", b"".join(
            f'<Relationship Id="rH{i}" Type="{REL}/header" Target="header{i}.xml"/>'.encode() for i in range(6)
        ) + b"</Relationships>")
    rewrite(path, {"word/document.xml": body, rels_name: rels}, [(f"word/header{i}.xml", header) for i in range(6)])
    probe = subprocess.run([sys.executable, "-c", PEAK_PROBE, str(path)], capture_output=True, text=True,
                           cwd=Path(__file__).resolve().parents[3], check=True)
    result = json.loads(probe.stdout)
    assert result["outcome"] == "opened"  # within every budget, so the bound is what it costs
    assert result["grown"] < PEAK_BYTES


@pytest.mark.parametrize("kind", KINDS)
def test_a_member_present_twice_is_refused(tmp_path, kind):
    path = make_document(kind, tmp_path / f"in.{kind}")
    with zipfile.ZipFile(path) as z:
        first = z.infolist()[1].filename
    with pytest.warns(UserWarning, match="Duplicate name"):
        add_members(path, [(first, b"<x/>")])
    refused(path, f"archive member {first} is present twice")


@pytest.mark.parametrize("twin", ["WORD/document.xml", "word/./document.xml", "word//document.xml"])
def test_names_that_readers_take_for_one_are_refused(tmp_path, twin):
    path = make_document("docx", tmp_path / "in.docx")
    add_members(path, [(twin, b"<x/>")])
    refused(path, f"archive members word/document.xml and {twin} differ only by case or by './'")


def entity_xml(root, encoding, declared):
    decl = f'<?xml version="1.0" encoding="{declared}"?>' if declared else ""
    return (decl + '<!DOCTYPE r [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]>' + root).encode(encoding)


ENCODINGS = [  # (Python codec, encoding declaration or None)
    ("utf-8", None), ("utf-16", None), ("utf-16", "UTF-16"), ("utf-16-le", "UTF-16"), ("utf-16-be", "UTF-16"),
    ("utf-16-le", "UTF-16LE"), ("utf-32", None), ("utf-32", "UTF-32"), ("utf-32-be", "UTF-32"),
]


@pytest.mark.parametrize("codec,declared", ENCODINGS)
def test_entities_are_refused_in_every_encoding_of_a_word_part(tmp_path, codec, declared):
    path = make_document("docx", tmp_path / "in.docx")
    part = f'<w:document xmlns:w="{W}"><w:body><w:p><w:r><w:t>&b; and text</w:t></w:r></w:p></w:body></w:document>'
    plain = (f'<?xml version="1.0" encoding="{declared}"?>' if declared else "") + part.replace("&b; and ", "")
    rewrite(path, {"word/document.xml": plain.encode(codec)})
    assert [s.text for s in docx_format.extract(path).segments] == ["text"]  # lxml reads this encoding
    rewrite(path, {"word/document.xml": entity_xml(part, codec, declared)})
    refused(path, "word/document.xml declares XML entities")


@pytest.mark.parametrize("codec,declared", [("utf-16", None), ("utf-16-be", "UTF-16"), ("utf-32", "UTF-32")])
@pytest.mark.parametrize("member", ["META-INF/container.xml", "OEBPS/content.opf"])
def test_entities_are_refused_in_the_epub_container_and_package(tmp_path, codec, declared, member):
    path = tmp_path / "in.epub"
    make_epub(path)
    with zipfile.ZipFile(path) as z:
        root = z.read(member).decode().split("?>", 1)[1]
    rewrite(path, {member: entity_xml(root.replace("</", "&b;</", 1), codec, declared)})
    refused(path, f"{member} declares XML entities")


def test_entities_hidden_from_a_byte_search_are_refused_after_parsing():
    """UTF-7 may spell '!' as '+ACE-': no byte pattern finds the declaration, the parsed DTD does."""
    data = b'<?xml version="1.0" encoding="UTF-7"?><+ACE-DOCTYPE r [<+ACE-ENTITY a "x">]><r>&a;</r>'
    with pytest.raises(DocumentError, match="part.xml declares XML entities"):
        parse_xml(data, "part.xml")


def test_a_corrupt_member_is_refused_before_translating(tmp_path):
    path = make_document("pptx", tmp_path / "in.pptx")
    add_members(path, [("ppt/media/image9.png", b"picture bytes" * 1000)])
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        info = z.getinfo("ppt/media/image9.png")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    data[start + 5] ^= 0xFF
    path.write_bytes(bytes(data))
    calls = []
    with pytest.raises(DocumentError, match="ppt/media/image9.png"):
        translate_document(path, tmp_path / "out.pptx", lambda texts: calls.append(texts) or texts)
    assert calls == []


def test_an_archive_whose_end_record_spans_disks_is_refused_in_one_line(tmp_path):
    """A zip64 locator that claims several disks: zipfile's end-record reader raises its own error,
    which must come back as the document's one line, as every other corrupt archive's does."""
    path = make_document("docx", tmp_path / "in.docx")
    data = path.read_bytes()
    end = data.rfind(b"PK\x05\x06")
    locator = struct.pack(zipfile.structEndArchive64Locator, zipfile.stringEndArchive64Locator, 0, 0, 2)
    path.write_bytes(data[:end] + locator + data[end:])
    with pytest.raises(DocumentError, match=r"^corrupt or truncated archive \(.*span multiple disks"):
        docx_format.extract(path)


def test_big_real_documents_fit_the_budgets_with_room(tmp_path):
    """A 300-page report, a 5,000-row sheet and a novel, as their libraries write them, use under
    half of each parsed-part budget."""
    import docx
    import openpyxl

    sentence = "The quarterly figures show that revenue grew in every region while costs fell slightly."
    d = docx.Document()
    for page in range(300):
        d.add_heading(f"Section {page + 1}", 2)
        for _ in range(12):
            p = d.add_paragraph(sentence + " ")
            p.add_run("Costs fell.").bold = True
            p.add_run(" " + sentence)
        if page % 10 == 0:
            table = d.add_table(rows=20, cols=5)
            for cell in (c for row in table.rows for c in row.cells):
                cell.text = "Region total"
    d.save(tmp_path / "report.docx")
    wb = openpyxl.Workbook()
    for row in range(5000):
        wb.active.append([f"Item {row} of the list" if col % 3 == 0 else row * col for col in range(20)])
    wb.save(tmp_path / "sheet.xlsx")
    make_epub(tmp_path / "novel.epub")
    paragraph = "<p>" + " ".join([sentence] * 10) + "</p>"  # 150 words: 1,500 of them make a 200,000-word book
    rewrite(tmp_path / "novel.epub", {"OEBPS/ch1.xhtml": (
        '<html xmlns="http://www.w3.org/1999/xhtml"><head><title>c</title></head><body>' + paragraph * 1500 + "</body></html>"
    ).encode()})

    for name, module in (("report.docx", docx_format), ("sheet.xlsx", xlsx), ("novel.epub", epub)):
        document = module.extract(tmp_path / name)
        archive = document.archive
        document.close()
        assert archive.parsed_bytes < MAX_PARSED_BYTES / 2 and archive.parsed_markup < MAX_PARSED_MARKUP / 2, name


def test_a_local_header_naming_another_file_is_refused(tmp_path):
    """Readers that go by the local headers (streaming unzippers) would see another member."""
    path = make_document("docx", tmp_path / "in.docx")
    add_members(path, [("word/media/a.png", b"picture")])
    data = path.read_bytes()
    with zipfile.ZipFile(path) as z:
        offset = z.getinfo("word/media/a.png").header_offset
    path.write_bytes(data[:offset + 30] + b"word/media/b.png" + data[offset + 30 + 16:])
    refused(path, "corrupt archive member word/media/a.png .its local header names it 'word/media/b.png'.")


def test_too_many_members_unsupported_compression_and_encryption_are_refused(tmp_path):
    path = make_document("xlsx", tmp_path / "in.xlsx")
    add_members(path, [(f"xl/media/m{i}.bin", b"") for i in range(10_000)], zipfile.ZIP_STORED)
    refused(path, r"^too many files in the archive \(the limit is 10000\)$")

    path.unlink()
    make_document("odt", path.with_suffix(".odt"))
    add_members(path.with_suffix(".odt"), [("Pictures/p.bin", b"picture" * 100)], zipfile.ZIP_LZMA)
    refused(path.with_suffix(".odt"), r"^archive member Pictures/p.bin uses compression method 14, which is not supported$")

    path.with_suffix(".odt").unlink()
    epub_path = tmp_path / "in.epub"
    make_epub(epub_path)
    data = bytearray(epub_path.read_bytes())
    with zipfile.ZipFile(epub_path) as z, open(epub_path, "rb") as f:
        info = z.getinfo("OEBPS/ch1.xhtml")
        offset = zipfile._EndRecData(f)[zipfile._ECD_OFFSET]
    data[info.header_offset + 6] |= 1  # the encryption flag, in the local header and the directory
    while data[offset:offset + 4] == b"PK\x01\x02":
        name_len, extra_len, comment_len = struct.unpack_from("<HHH", data, offset + 28)
        if data[offset + 46:offset + 46 + name_len] == b"OEBPS/ch1.xhtml":
            data[offset + 8] |= 1
        offset += 46 + name_len + extra_len + comment_len
    epub_path.write_bytes(bytes(data))
    refused(epub_path, r"^password-protected \(encrypted archive\)$")


def test_a_text_over_the_parsers_limit_is_refused_in_one_line(tmp_path):
    path = make_document("pptx", tmp_path / "in.pptx")
    with zipfile.ZipFile(path) as z:
        slide = z.read("ppt/slides/slide1.xml")
    rewrite(path, {"ppt/slides/slide1.xml": slide.replace(b"Some text", b"x" * (11 * MiB))})
    refused(path, r"^ppt/slides/slide1.xml is not well-formed XML \(Resource limit exceeded: Text node too long, line \d+, column \d+\)$")


def test_nesting_past_the_parsers_depth_is_refused_without_naming_a_libxml2_option():
    """libxml2 says "use XML_PARSE_HUGE option" for deep nesting: an option no user can set."""
    data = b"<a>" * 300 + b"</a>" * 300
    with pytest.raises(DocumentError) as refused:
        parse_xml(data, "deep.xml")
    message = str(refused.value)
    assert message.startswith("deep.xml is not well-formed XML (Excessive depth in document: 256")
    assert "XML_PARSE_HUGE" not in message and "\n" not in message
