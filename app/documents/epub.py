"""EPUB (.epub): every XHTML content document of the manifest (chapters, navigation), the NCX
table of contents, and the book's title and description.

Raw zip + XML (the `XhtmlFlow` of html.py on each chapter) rather than ebooklib, which rewrites
the package on save. The package document is found through META-INF/container.xml; the archive is
copied as is (the uncompressed `mimetype` first, as it was) with only the translated parts
replaced, so chapters, spine, images and styles all stay.
"""

from __future__ import annotations

import posixpath
from urllib.parse import unquote
from pathlib import Path

from app.documents.html import XhtmlFlow
from app.documents.safety import DocumentError, parse_xml
from app.documents.xmlflow import XmlFlow, local
from app.documents.zipxml import ZipXmlDocument, open_package

EXTENSIONS = (".epub",)
XHTML_TYPES = {"application/xhtml+xml", "text/html"}
NCX_TYPE = "application/x-dtbncx+xml"


class NcxFlow(XmlFlow):
    """The NCX's labels (`navLabel/text`), and the package's title and description."""

    blocks = frozenset({"text", "docTitle", "title", "description"})
    default = "atom"


def extract(path: Path) -> ZipXmlDocument:
    archive = open_package(path, "EPUB book", "META-INF/container.xml")
    container = parse_xml(archive.read("META-INF/container.xml"), "META-INF/container.xml")
    rootfile = next((el.get("full-path") for el in container.iter() if local(el) == "rootfile"), None)
    if not rootfile or rootfile not in archive.names:
        archive.close()
        raise DocumentError("not a valid EPUB (META-INF/container.xml names no package document in the archive)")
    package = parse_xml(archive.read(rootfile), rootfile)
    base = posixpath.dirname(rootfile)
    parts = []
    for item in package.iter():
        if local(item) != "item":
            continue
        name = posixpath.normpath(posixpath.join(base, unquote(item.get("href") or "")))
        if name not in archive.names:
            continue
        if item.get("media-type") in XHTML_TYPES:
            parts.append((name, XhtmlFlow()))
        elif item.get("media-type") == NCX_TYPE:
            parts.append((name, NcxFlow()))
    parts.append((rootfile, NcxFlow()))
    return ZipXmlDocument(archive, parts)
