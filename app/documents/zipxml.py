"""Documents that are zip archives of XML parts (Word, PowerPoint, Excel, OpenDocument, EPUB).

The parts holding text are parsed safely (`safety.parse_xml`), their paragraphs read by an
`XmlFlow`, and on writing the archive is copied member by member, in the same order and with the
same compression, with only the translated parts replaced.
"""

from __future__ import annotations

import re
from pathlib import Path

from app.documents.safety import DocumentError, SafeZip, parse_xml, serialize_xml
from app.documents.segments import Document, Run, Segment
from app.documents.xmlflow import XmlFlow


class ZipXmlDocument(Document):
    def __init__(self, archive: SafeZip, parts: list[tuple[str, XmlFlow]]):
        self.archive = archive
        self.trees = {}
        self.chunks = []
        for name, flow in parts:
            tree = parse_xml(archive.read(name), name)
            self.trees[name] = tree
            self.chunks.extend((flow, chunk) for chunk in flow.chunks(tree.getroot()))
        self.segments = [Segment(chunk.runs) for _, chunk in self.chunks]

    def write(self, translations: list[list[Run]], out_path: Path) -> None:
        for (flow, chunk), runs in zip(self.chunks, translations, strict=True):
            flow.write_chunk(chunk, runs)
        self.archive.write_copy(out_path, {name: serialize_xml(tree) for name, tree in self.trees.items()})

    def close(self) -> None:
        self.archive.close()


def matching_parts(archive: SafeZip, patterns: list[str]) -> list[str]:
    """The archive's members matching any of the patterns, in archive order."""
    compiled = [re.compile(p) for p in patterns]
    return [name for name in archive.names if any(p.fullmatch(name) for p in compiled)]


def open_package(path: Path, kind: str, required: str) -> SafeZip:
    archive = SafeZip(path, kind)
    if required not in archive.names:
        archive.close()
        raise DocumentError(f"not a {kind} (the archive has no {required})")
    return archive


def open_parts(path: Path, kind: str, required: str, patterns: list[str], flow: XmlFlow) -> ZipXmlDocument:
    """A package of `kind` (it must hold `required`) whose members matching `patterns` all read with `flow`."""
    archive = open_package(path, kind, required)
    return ZipXmlDocument(archive, [(name, flow) for name in matching_parts(archive, patterns)])
