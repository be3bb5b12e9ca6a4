"""HTML (.html, .htm): the page's text, its title, and the alt/title/placeholder texts.

Parsed with lxml's HTML parser (libxml2: no entity expansion, no network) and written back with
lxml's HTML serializer in the encoding the page was read in. The page's own doctype and XML
declaration are written as they were (a page without a doctype gains none, although libxml2 adds
one to every tree), and the charset declarations (`<meta charset>`, `<meta http-equiv=
"Content-Type">`, the XML declaration's encoding) are kept, naming the encoding written. Pages
nested deeper than libxml2 builds (255 levels) are refused.

Block elements are paragraphs; `a`, `b`, `em`, `span`… are inline formatting carried onto the
translation (links keep their `href`); `br` ends a segment; images, inline `code`/`kbd`/`samp`/
`var`, SVG and MathML are atoms. Scripts, styles, `pre` blocks, and anything marked
`translate="no"` or `class="notranslate"` are left alone. The `XhtmlFlow` below also serves EPUB
chapters.
"""

from __future__ import annotations

import codecs
import re
from pathlib import Path

import lxml.html
from lxml import etree

from dragoman.app.documents.safety import DocumentError, decode_text, parse_xml, read_bytes
from dragoman.app.documents.segments import Document, Run, Segment
from dragoman.app.documents.xmlflow import BLOCK, INLINE, XmlFlow

EXTENSIONS = (".html", ".htm", ".xhtml")
MAX_DEPTH = 255  # libxml2's bound on nesting (XML_PARSE_HUGE lifts it; it stays off)


class XhtmlFlow(XmlFlow):
    mixed = True
    default = BLOCK
    inlines = frozenset(
        "a abbr acronym b bdi bdo big cite data del dfn em font i ins label mark q rb rt ruby s small span "
        "strike strong sub sup time tt u".split()
    )
    atoms = frozenset("img input wbr select object iframe video audio canvas embed picture source track".split())
    breaks = frozenset({"br", "hr"})
    skips = frozenset(
        "script style pre code kbd samp var svg math textarea template noscript meta link base head-script".split()
    )
    attributes = frozenset({"alt", "title", "placeholder", "aria-label"})

    def skip_element(self, el) -> bool:
        if el.get("translate") == "no":
            return True
        return "notranslate" in (el.get("class") or "").split()


_XML_DECLARATION = re.compile(r"^\ufeff?\s*(<\?xml[^>]*\?>)\s*")
_SPACE = re.compile(r"\s*")
_CHARSET = re.compile(r"(charset\s*=\s*[\"']?)([\w.:-]+)", re.IGNORECASE)
_ENCODING = re.compile(r"(encoding\s*=\s*[\"'])([\w.:-]+)", re.IGNORECASE)
# the encoding names to declare for what safety.decode_text reads
_DECLARED = {"utf-8": "utf-8", "utf-8-sig": "utf-8", "utf-16": "utf-16", "utf-32": "utf-32"}


def _doctype_of(text: str) -> str | None:
    """The page's own doctype as written, if only whitespace and comments come before it."""
    position = 0
    while True:
        position = _SPACE.match(text, position).end()
        if text.startswith("<!--", position):
            end = text.find("-->", position + 4)
            if end < 0:
                return None
            position = end + 3
        elif text[position : position + 9].upper() == "<!DOCTYPE":
            end = text.find(">", position)
            return text[position : end + 1] if end >= 0 else None
        else:
            return None


def _same_encoding(name: str, other: str) -> bool:
    try:
        return codecs.lookup(name).name == codecs.lookup(other).name
    except LookupError:
        return False


def _declaring(match: re.Match, encoding: str) -> str:
    """A charset=/encoding= declaration naming `encoding`, as it was if it already did."""
    return match.group(0) if _same_encoding(match.group(2), encoding) else match.group(1) + encoding


class HtmlDocument(Document):
    def __init__(self, path: Path):
        text, self.encoding = decode_text(read_bytes(path))
        declaration = _XML_DECLARATION.match(text)
        self.declaration = declaration.group(1) if declaration else None
        if declaration:
            text = text[declaration.end() :]  # lxml refuses an encoding declaration in a str
        self.doctype = _doctype_of(text.lstrip("\ufeff"))
        if not text.strip():
            raise DocumentError("the file is empty")
        parser = lxml.html.HTMLParser()
        try:
            self.root = lxml.html.document_fromstring(text, parser=parser)
        except (etree.ParserError, ValueError) as e:
            raise DocumentError(f"not readable HTML ({e})") from None
        if any(error.type_name == "ERR_RESOURCE_LIMIT" for error in parser.error_log):
            # libxml2 stops building the tree there: what lies deeper would silently vanish
            raise DocumentError(f"elements nested more than {MAX_DEPTH} deep, which is refused")
        self.flow = XhtmlFlow()
        self.chunks = self.flow.chunks(self.root)
        self.segments = [Segment(c.runs) for c in self.chunks]

    def write(self, translations: list[list[Run]], out_path: Path) -> None:
        for chunk, runs in zip(self.chunks, translations, strict=True):
            self.flow.write_chunk(chunk, runs)
        declared = _DECLARED.get(self.encoding, self.encoding)
        for meta in self.root.iter("meta"):
            if meta.get("charset") is not None and not _same_encoding(meta.get("charset").strip(), declared):
                meta.set("charset", declared)
            if (meta.get("http-equiv") or "").lower() == "content-type" and meta.get("content"):
                meta.set("content", _CHARSET.sub(lambda m: _declaring(m, declared), meta.get("content")))
        # the tree, not the root element: lxml drops <meta http-equiv> when it writes an element
        html = etree.tostring(self.root.getroottree(), encoding="unicode", method="html")
        html = re.sub(r"^<!DOCTYPE[^>]*>\n?", "", html)  # libxml2's, present whether the page had one or not
        prolog = [self.doctype] if self.doctype else []
        if self.declaration:
            prolog.insert(0, _ENCODING.sub(lambda m: _declaring(m, declared), self.declaration))
        out_path.write_bytes("\n".join(prolog + [html]).encode(self.encoding))


def extract(path: Path) -> HtmlDocument:
    return HtmlDocument(path)


class InlineXmlFlow(XmlFlow):
    """Markup of unknown vocabulary (an API's XML tag handling): every element is inline formatting
    carried onto the translation, except those that hold no text, kept whole."""

    mixed = True
    default = INLINE


class MarkupFragment(Document):
    """A piece of HTML or XML as an API request holds it (`<p>Hello <b>world</b></p>`, or plain words
    around tags), translated in place: `text(translations)` is the piece again with each segment's
    translation. HTML is parsed as HTML pages are; XML with the documents' hardened parser (no
    entities, no DTD, no network), its elements inline formatting."""

    WRAPPER = "dragoman-fragment"

    def __init__(self, text: str, xml: bool = False):
        if xml:
            self.root = parse_xml(f"<{self.WRAPPER}>{text}</{self.WRAPPER}>".encode(), "the text").getroot()
            self.flow: XmlFlow = InlineXmlFlow()
            self.flow.blocks = frozenset({self.WRAPPER})
        else:
            try:
                self.root = lxml.html.fragment_fromstring(text, create_parent=self.WRAPPER)
            except (etree.ParserError, ValueError) as e:
                raise DocumentError(f"the text is not readable HTML ({e})") from None
            self.flow = XhtmlFlow()
        self.xml = xml
        self.chunks = self.flow.chunks(self.root)
        self.segments = [Segment(c.runs) for c in self.chunks]

    def text(self, translations: list[list[Run]]) -> str:
        for chunk, runs in zip(self.chunks, translations, strict=True):
            self.flow.write_chunk(chunk, runs)
        whole = etree.tostring(self.root, encoding="unicode", method="xml" if self.xml else "html", with_tail=False)
        start, end = len(f"<{self.WRAPPER}>"), -len(f"</{self.WRAPPER}>")
        return "" if whole.endswith("/>") else whole[start:end]  # an empty piece is written <dragoman-fragment/>
