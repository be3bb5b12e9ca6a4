"""HTML (.html, .htm): the page's text, its title, and the alt/title/placeholder texts.

Parsed with lxml's HTML parser (libxml2: no entity expansion, no network) and written back with
lxml's HTML serializer, doctype kept. Block elements are paragraphs; `a`, `b`, `em`, `span`…
are inline formatting carried onto the translation (links keep their `href`); `br` ends a
segment; images, inline `code`/`kbd`/`samp`/`var`, SVG and MathML are atoms. Scripts, styles,
`pre` blocks, and anything marked `translate="no"` or `class="notranslate"` are left alone.
The `XhtmlFlow` below also serves EPUB chapters.
"""

from __future__ import annotations

import re
from pathlib import Path

import lxml.html
from lxml import etree

from app.documents.safety import DocumentError, decode_text, read_bytes
from app.documents.segments import Document, Run, Segment
from app.documents.xmlflow import BLOCK, XmlFlow

EXTENSIONS = (".html", ".htm", ".xhtml")


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


class HtmlDocument(Document):
    def __init__(self, path: Path):
        text, _ = decode_text(read_bytes(path))
        text = re.sub(r"^\s*<\?xml[^>]*\?>", "", text)  # lxml refuses an encoding declaration in a str
        if not text.strip():
            raise DocumentError("the file is empty")
        try:
            self.root = lxml.html.document_fromstring(text)
        except (etree.ParserError, ValueError) as e:
            raise DocumentError(f"not readable HTML ({e})") from None
        self.doctype = self.root.getroottree().docinfo.doctype
        self.flow = XhtmlFlow()
        self.chunks = self.flow.chunks(self.root)
        self.segments = [Segment(c.runs) for c in self.chunks]

    def write(self, translations: list[list[Run]], out_path: Path) -> None:
        for chunk, runs in zip(self.chunks, translations, strict=True):
            self.flow.write_chunk(chunk, runs)
        html = lxml.html.tostring(self.root, encoding="unicode", method="html", doctype=self.doctype or None)
        out_path.write_text(html, encoding="utf-8")


def extract(path: Path) -> HtmlDocument:
    return HtmlDocument(path)
