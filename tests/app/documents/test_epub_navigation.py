"""An EPUB's navigation keeps its structure whatever the translation does: the NCX's navPoints
(ids, playOrder, content src, nesting) and the EPUB 3 nav document's lists and links stay as they
were, only their labels translated; with the stand-ins (tags kept, tags lost, one word, no spaces)
and with the engine."""

import zipfile

import pytest
from lxml import etree

from dragoman.app.documents import translate_document

from document_fakes import no_spaces, one_word, upper_keeping_tags, upper_losing_tags

NCX = """<?xml version="1.0" encoding="UTF-8"?>
<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1">
  <head><meta name="dtb:uid" content="urn:uuid:1234"/><meta name="dtb:depth" content="2"/></head>
  <docTitle><text>The Book of Rivers</text></docTitle>
  <navMap>
    <navPoint id="np-1" playOrder="1"><navLabel><text>Chapter one: the spring</text></navLabel>
      <content src="ch1.xhtml"/>
      <navPoint id="np-2" playOrder="2"><navLabel><text>Where the water starts</text></navLabel>
        <content src="ch1.xhtml#start"/></navPoint>
      <navPoint id="np-3" playOrder="3"><navLabel><text>A long way down the hill, and then further</text></navLabel>
        <content src="ch1.xhtml#down"/></navPoint>
    </navPoint>
    <navPoint id="np-4" playOrder="4"><navLabel><text>Chapter 2. The sea, and what it holds. The end of it all.</text></navLabel><content src="ch2.xhtml"/></navPoint>
    <navPoint id="np-5" playOrder="5"><navLabel><text>Notes</text></navLabel><content src="ch2.xhtml#notes"/></navPoint>
  </navMap>
</ncx>
"""

NAV = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE html>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops"><head><title>Contents</title></head>
<body>
  <nav epub:type="toc" id="toc"><h1>Contents</h1>
    <ol>
      <li><a href="ch1.xhtml">Chapter one: <em>the</em> spring</a>
        <ol><li><a href="ch1.xhtml#start">Where the water starts</a></li>
            <li><a href="ch1.xhtml#down">A long way down the hill, and then further</a></li></ol></li>
      <li><a href="ch2.xhtml">Chapter 2. The sea, <b>and</b> what it holds. The end of it all.</a></li>
      <li><span>Appendix, without a link</span></li>
      <li>1. <a href="ch2.xhtml#notes">The notes at the end</a> and more</li>
      <li><a href="ch1.xhtml"><span class="num">3</span> <span>Third part of the book</span></a></li>
    </ol>
  </nav>
  <nav epub:type="landmarks" hidden=""><ol><li><a epub:type="bodymatter" href="ch1.xhtml">Start of the story</a></li></ol></nav>
</body></html>
"""

CHAPTER = ('<?xml version="1.0" encoding="utf-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml"><head><title>{0}</title></head>'
           '<body><h1 id="start">{0}</h1><p id="down">The river runs to the sea.</p><p id="notes">A note.</p></body></html>')


def make_book(path):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        z.writestr("META-INF/container.xml", '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>')
        z.writestr("OEBPS/content.opf", '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>The Book of Rivers</dc:title></metadata><manifest><item id="nav" href="nav.xhtml" properties="nav" media-type="application/xhtml+xml"/><item id="c1" href="ch1.xhtml" media-type="application/xhtml+xml"/><item id="c2" href="ch2.xhtml" media-type="application/xhtml+xml"/><item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/></manifest><spine toc="ncx"><itemref idref="c1"/><itemref idref="c2"/></spine></package>')
        z.writestr("OEBPS/nav.xhtml", NAV)
        z.writestr("OEBPS/toc.ncx", NCX)
        z.writestr("OEBPS/ch1.xhtml", CHAPTER.format("Chapter one"))
        z.writestr("OEBPS/ch2.xhtml", CHAPTER.format("Chapter two"))


def structure(data: bytes) -> list:
    """The tree without its text: every element's name and attributes, in order, with its depth."""
    root = etree.fromstring(data)
    out = []
    for el in root.iter():
        if isinstance(el.tag, str):
            depth = len(list(el.iterancestors()))
            out.append((depth, etree.QName(el).localname, sorted(el.attrib.items())))
    return out


def entries(data: bytes) -> list:
    """The nav document's outline: every list, item and label (a link or span of an item, with
    its attributes) at its depth; the formatting inside a label left out, the model may move it."""
    root = etree.fromstring(data)
    out = []
    for el in root.iter():
        parent = el.getparent()
        if not isinstance(el.tag, str) or (parent is not None and etree.QName(parent).localname in ("a", "span")):
            continue
        if etree.QName(el).localname in ("em", "b"):
            continue
        out.append((len(list(el.iterancestors())), etree.QName(el).localname, sorted(el.attrib.items())))
    return out


def labels(data: bytes) -> list[str]:
    root = etree.fromstring(data)
    return [" ".join("".join(el.itertext()).split()) for el in root.iter("{*}text", "{*}a", "{*}span")]


def tags_twice(texts):
    """A model that writes every placeholder tag twice, and one it was not given."""
    return ["T:" + t + " <x1>more</x1> <x2>words</x2> <x9>x</x9>" for t in texts]


def tag_unclosed(texts):
    return ["<x1>T:" + t for t in texts]


@pytest.mark.parametrize("translate", [upper_keeping_tags, upper_losing_tags, one_word, no_spaces, tags_twice, tag_unclosed,
                                       lambda texts: [""] * len(texts), "engine"],
                         ids=["tags-kept", "tags-lost", "one-word", "no-spaces", "tags-twice", "tag-unclosed", "empty",
                              "engine"])
def test_the_ncx_and_the_nav_document_keep_their_structure_and_translate_their_labels(tmp_path, translate, request):
    if translate == "engine":
        translate = request.getfixturevalue("engine_batch")
    make_book(tmp_path / "book.epub")
    out = translate_document(tmp_path / "book.epub", tmp_path / "book.fr.epub", translate)
    with zipfile.ZipFile(out) as z:
        ncx, nav = z.read("OEBPS/toc.ncx"), z.read("OEBPS/nav.xhtml")
    assert structure(ncx) == structure(NCX.encode())
    assert entries(nav) == entries(NAV.encode())
    assert len(labels(ncx)) == len(labels(NCX.encode())) and all(labels(ncx))
    if translate is upper_keeping_tags:
        assert labels(ncx)[:2] == ["T:THE BOOK OF RIVERS", "T:CHAPTER ONE: THE SPRING"]
        assert "T:CHAPTER ONE: <em>THE</em> SPRING" in nav.decode()
        assert '<li>1. <a href="ch2.xhtml#notes">T:THE NOTES AT THE END</a> T:AND MORE</li>' in nav.decode()
