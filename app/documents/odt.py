"""OpenDocument text (.odt): body, headings, lists, tables, frames and text boxes, footnotes and
endnotes, comments (annotations), headers and footers (in styles.xml's master pages).

By hand (`xmlflow`, mixed content) rather than through odfpy, whose element API would need the
same walk written against its own classes; odfpy opens the result in the tests. `text:span` and
`text:a` are inline formatting; `text:line-break` and `text:tab` end a segment; notes, frames,
annotations, fields (page number, date), bookmarks and `text:s` spaces are atoms, and the
paragraphs inside notes, frames and annotations are segments of their own. Tracked deletions are
not translated.
"""

from __future__ import annotations

from pathlib import Path

from dragoman.app.documents.zipxml import ZipXmlDocument, open_package
from dragoman.app.documents.xmlflow import XmlFlow

EXTENSIONS = (".odt", ".ott")


class OdfFlow(XmlFlow):
    mixed = True
    blocks = frozenset({"p", "h"})
    inlines = frozenset({"span", "a", "ruby", "ruby-base", "meta", "hidden-text"})
    breaks = frozenset({"line-break", "tab"})
    skips = frozenset({"tracked-changes", "automatic-styles", "font-face-decls", "scripts", "forms"})


def extract(path: Path) -> ZipXmlDocument:
    archive = open_package(path, "an OpenDocument text", "content.xml")
    flow = OdfFlow()
    parts = [found for found in map(archive.find, ("content.xml", "styles.xml")) if found]  # names fixed by ODF
    try:
        return ZipXmlDocument(archive, [(name, flow) for name in parts])
    except BaseException:
        archive.close()
        raise
