"""HTML (.html, .htm): the page's text, its title, and the alt/title/placeholder texts.

Parsed with lxml's HTML parser (libxml2: no entity expansion, no network) and written back with
lxml's HTML serializer in the encoding the page was read in (a legacy one, declared or detected:
app.documents.safety; UTF-8 where it cannot hold the translation, said in the document's notes). The page's own doctype and XML
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
import contextlib
import re
from pathlib import Path

import lxml.html
from lxml import etree

from dragoman.app.documents.safety import (DocumentError, assumed_encoding, decode_text, encoding_label, parse_xml,
                                           read_bytes)
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
# the encoding names to declare for what safety.decode_text reads (legacy ones: encoding_label)
_DECLARED = {"utf-8": "utf-8", "utf-8-sig": "utf-8", "utf-16": "utf-16", "utf-32": "utf-32"}
_DECLARATION = re.compile(rb"""<meta[^>]*?charset\s*=\s*["']?([\w.:-]+)|<\?xml[^>]*encoding\s*=\s*["']([\w.:-]+)""",
                          re.IGNORECASE)
DECLARATION_BYTES = 4096  # where a page's charset declaration must be (HTML: within the first 1024 bytes)


def _doctype_of(text: str) -> str | None:
    """The page's own doctype as written, if only whitespace and comments come before it."""
    position = 0
    while True:
        space = _SPACE.match(text, position)  # `\s*`: always, maybe empty
        position = space.end() if space else position
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


# Attributes libxml2's HTML writer percent-escapes (`{{ url }}` -> `{{%20url%20}}`): each is written
# as a token, then the token replaced by the value as the page had it.
_URI_ATTRIBUTES = ("href", "src", "action", "name", "cite", "longdesc", "usemap", "data", "formaction")
_URI_TOKEN = re.compile(r'"dragoman-target-(\d+)"')


@contextlib.contextmanager
def _targets_as_written(root):
    """The tree with each link target a token for the time of the block; yields the values, escaped
    for a double-quoted attribute, by token number."""
    replaced: list[tuple] = []
    for el in root.iter(etree.Element):
        for name in _URI_ATTRIBUTES:
            value = el.get(name)
            if value is not None:
                replaced.append((el, name, value))
                el.set(name, f"dragoman-target-{len(replaced) - 1}")
    try:
        yield [value.replace("&", "&amp;").replace('"', "&quot;") for _, _, value in replaced]
    finally:
        for el, name, value in replaced:
            el.set(name, value)


class HtmlDocument(Document):
    def __init__(self, path: Path):
        data = read_bytes(path)
        declared = _DECLARATION.search(data[:DECLARATION_BYTES])
        text, self.encoding = decode_text(data, declared and (declared.group(1) or declared.group(2)).decode("ascii"))
        self.notes = tuple(filter(None, [assumed_encoding(self.encoding)]))
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
        try:
            out_path.write_bytes(self._page(self.encoding).encode(self.encoding))
        except UnicodeEncodeError:  # a legacy encoding without the target's letters
            out_path.write_bytes(self._page("utf-8").encode("utf-8"))
            self.notes += (f"written as UTF-8: {encoding_label(self.encoding)} cannot hold the translation",)

    def _page(self, encoding: str) -> str:
        """The page as text, its charset declarations naming `encoding`."""
        declared = _DECLARED.get(encoding) or encoding_label(encoding)
        for meta in self.root.iter("meta"):
            if meta.get("charset") is not None and not _same_encoding(meta.get("charset").strip(), declared):
                meta.set("charset", declared)
            if (meta.get("http-equiv") or "").lower() == "content-type" and meta.get("content"):
                meta.set("content", _CHARSET.sub(lambda m: _declaring(m, declared), meta.get("content")))
        # the tree, not the root element: lxml drops <meta http-equiv> when it writes an element
        with _targets_as_written(self.root) as targets:
            html = etree.tostring(self.root.getroottree(), encoding="unicode", method="html")
        html = _URI_TOKEN.sub(lambda m: '"' + targets[int(m.group(1))] + '"', html)
        html = re.sub(r"^<!DOCTYPE[^>]*>\n?", "", html)  # libxml2's, present whether the page had one or not
        prolog = [self.doctype] if self.doctype else []
        if self.declaration:
            prolog.insert(0, _ENCODING.sub(lambda m: _declaring(m, declared), self.declaration))
        return "\n".join(prolog + [html])


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
