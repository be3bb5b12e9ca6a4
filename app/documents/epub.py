"""EPUB (.epub): every XHTML content document of the manifest (chapters, navigation), the NCX
table of contents, and the book's title and description. The navigation keeps its structure: the
NCX's and the EPUB 3 nav document's labels are translated in place (`NcxFlow`, `NavFlow`).

Raw zip + XML (the `XhtmlFlow` of html.py on each chapter) rather than ebooklib, which rewrites
the package on save. The package document is found through META-INF/container.xml, the chapters
through its manifest (hrefs resolved against its folder, external ones skipped); the archive is
copied as is (the uncompressed `mimetype` first, as it was) with only the translated parts
replaced, so chapters, spine, images and styles all stay.
"""

from __future__ import annotations

import posixpath
from pathlib import Path

from dragoman.app.documents.html import XhtmlFlow
from dragoman.app.documents.safety import DocumentError
from dragoman.app.documents.xmlflow import BLOCK, XmlFlow, local
from dragoman.app.documents.zipxml import ZipXmlDocument, open_package, part_name

EXTENSIONS = (".epub",)
XHTML_TYPES = {"application/xhtml+xml", "text/html"}
NCX_TYPE = "application/x-dtbncx+xml"
CONTAINER = "META-INF/container.xml"  # fixed by the OCF container format


class NcxFlow(XmlFlow):
    """The NCX's labels (`navLabel/text`), and the package's title and description: only their text
    is replaced, so navPoints, their ids, playOrder and content src stay as they are."""

    blocks = frozenset({"text", "docTitle", "title", "description"})
    default = "atom"


class NavFlow(XhtmlFlow):
    """The EPUB 3 navigation document: XHTML whose entries' labels (the link or span of a list item
    inside a <nav>) are each a paragraph of their own, their text replaced in place, so that no
    entry is added, lost or merged into another whatever the model does to the placeholder tags."""

    def base_kind(self, el) -> str:
        parent = el.getparent()
        if (local(el) in ("a", "span") and parent is not None and local(parent) == "li"
                and any(local(a) == "nav" for a in parent.iterancestors())):
            return BLOCK
        return super().base_kind(el)


def extract(path: Path) -> ZipXmlDocument:
    archive = open_package(path, "an EPUB book", CONTAINER)
    try:
        container_name = archive.find(CONTAINER)
        assert container_name is not None  # open_package found it
        container = archive.parse(container_name)
        target = part_name("", next((el.get("full-path") or "" for el in container.iter("{*}rootfile")), ""))
        rootfile = archive.find(target) if target else None
        if rootfile is None:
            raise DocumentError(f"not a valid EPUB ({CONTAINER} names no package document in the archive)")
        package = archive.parse(rootfile)
        folder = posixpath.dirname(rootfile)
        parts: list[tuple[str, XmlFlow]] = []
        for item in package.iter("{*}item"):
            target = part_name(folder, item.get("href") or "")
            name = archive.find(target) if target else None
            if name is None:  # external, outside the archive or missing: nothing here to translate
                continue
            if item.get("media-type") in XHTML_TYPES:
                parts.append((name, NavFlow() if "nav" in (item.get("properties") or "").split() else XhtmlFlow()))
            elif item.get("media-type") == NCX_TYPE:
                parts.append((name, NcxFlow()))
        parts.append((rootfile, NcxFlow()))
        return ZipXmlDocument(archive, parts, {rootfile: package})
    except BaseException:
        archive.close()
        raise
