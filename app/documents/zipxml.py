"""Documents that are zip archives of XML parts (Word, PowerPoint, Excel, OpenDocument, EPUB).

The parts holding text are found the way the format's own readers find them: in Office files
through the package relationships (`_rels/.rels` names the main part, each part's `_rels/*.rels`
the parts it uses), in EPUB through the container and the package manifest. A target is resolved
against its source part's folder (`..` and absolute targets included); external targets, targets
outside the archive and targets the archive lacks have nothing to translate and are skipped. The
parts are parsed safely (`SafeZip.parse`), their paragraphs read by an `XmlFlow`, and on writing
the archive is copied member by member, in the same order and with the same compression, with
only the translated parts replaced.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Generator
from urllib.parse import unquote

from lxml import etree

from dragoman.app.documents.safety import DocumentError, SafeZip, serialize_xml
from dragoman.app.documents.segments import ReadAsAsked, Run, Segment
from dragoman.app.documents.xmlflow import Chunk, XmlFlow, local

URI_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


class ZipXmlDocument(ReadAsAsked):
    """The parts' paragraphs as segments, each part parsed at once (its limits checked) and its
    paragraphs found as they are asked for (ReadAsAsked)."""

    def __init__(self, archive: SafeZip, parts: list[tuple[str, XmlFlow]], parsed: dict[str, etree._ElementTree] | None = None):
        """`parts` in reading order (a name listed twice is read once); `parsed`: trees already parsed."""
        self.archive = archive
        self.trees: dict[str, etree._ElementTree] = {}
        self.flows: list[tuple[XmlFlow, etree._ElementTree]] = []  # each part read once, in reading order
        for name, flow in parts:
            if name not in self.trees:
                self.trees[name] = parsed[name] if parsed and name in parsed else archive.parse(name)
                self.flows.append((flow, self.trees[name]))
        self.chunks: list[tuple[XmlFlow, Chunk]] = []  # (its part's flow, one of the flow's chunks), as found
        self.placed = 0  # chunks[:placed] hold their translations
        super().__init__()

    def _read_segments(self) -> Generator[Segment, None, None]:
        for flow, tree in self.flows:
            for chunk in flow.chunk_stream(tree.getroot()):
                self.chunks.append((flow, chunk))
                yield Segment(chunk.runs)

    def place(self, index: int, runs: list[Run]) -> None:
        assert index == self.placed, "placed in order"
        flow, chunk = self.chunks[index]
        flow.write_chunk(chunk, runs)
        self.placed += 1

    def write(self, translations: list[list[Run]], out_path: Path) -> None:
        if len(translations) != len(self.chunks):
            raise ValueError(f"{len(translations)} translations for {len(self.chunks)} segments")
        for index in range(self.placed, len(self.chunks)):
            self.place(index, translations[index])
        self.archive.write_copy(out_path, {name: serialize_xml(tree) for name, tree in self.trees.items()})

    def close(self) -> None:
        self.archive.close()


def part_name(folder: str, target: str) -> str | None:
    """The part a relationship or manifest target names, relative to `folder`; None for an external
    target (a URI with a scheme) or one that leaves the archive."""
    target = unquote(target.split("#", 1)[0]).replace("\\", "/")
    if not target or URI_SCHEME.match(target):
        return None
    path = posixpath.normpath(target.lstrip("/") if target.startswith("/") else posixpath.join(folder, target))
    if path == ".." or path.startswith("../") or path == ".":
        return None
    return path


def relationships(archive: SafeZip, source: str) -> list[tuple[str, str, str]]:
    """(id, type, member) of each relationship of part `source` ("" for the package) to a member of
    the archive; the type is the last segment of its URI, which the transitional, strict and
    Microsoft namespaces share (`.../officeDocument`, `.../header`)."""
    folder, base = posixpath.split(source)
    rels = archive.find(posixpath.join(folder, "_rels", base + ".rels"))
    if rels is None:
        return []
    found = []
    for rel in archive.parse(rels).iter("{*}Relationship"):
        if (rel.get("TargetMode") or "").lower() == "external":
            continue
        target = part_name(folder, rel.get("Target") or "")
        member = archive.find(target) if target else None
        if member is not None:
            found.append((rel.get("Id") or "", (rel.get("Type") or "").rsplit("/", 1)[-1], member))
    return found


def in_reading_order(rels: list[tuple[str, str, str]], tree: etree._ElementTree | None) -> list[tuple[str, str, str]]:
    """The relationships in the order their ids are first used in the source part's `tree` (slides
    in the presentation's order, sheets in the workbook's), the unused ones after them."""
    if tree is None:
        return rels
    used: dict[str, int] = {}  # relationship id -> its first use
    for el in tree.iter("*"):
        for key, value in el.attrib.items():
            if key.endswith("relationships}id"):  # r:id in the transitional or the strict namespace
                used.setdefault(value, len(used))
    return sorted(rels, key=lambda rel: used.get(rel[0], len(used)))


def open_office(path: Path, kind: str, root: str, flow: XmlFlow, text: frozenset[str],
                through: frozenset[str] = frozenset(), main_is_text: bool = True) -> ZipXmlDocument:
    """An Office package of `kind`: the main part that `_rels/.rels` names (its root element `root`),
    then every part reached from it through relationships of the types in `text` (translated) or
    `through` (only followed), each read with `flow`."""
    archive = SafeZip(path, kind)
    try:
        main = next((member for _, type_, member in relationships(archive, "") if type_ == "officeDocument"), None)
        if main is None:
            raise DocumentError(f"not {kind} (its package relationships name no main document in the archive)")
        tree = archive.parse(main)
        if local(tree.getroot()) != root:
            raise DocumentError(f"not {kind} (its main part {main} is a {local(tree.getroot())!r} document)")
        parts = [main] if main_is_text else []
        seen, queue = {main}, [main]
        for source in queue:  # breadth first; the queue grows while it is walked
            for _, type_, member in in_reading_order(relationships(archive, source), tree if source == main else None):
                if member in seen or type_ not in text | through:
                    continue
                seen.add(member)
                queue.append(member)
                if type_ in text:
                    parts.append(member)
        return ZipXmlDocument(archive, [(name, flow) for name in parts], {main: tree})
    except BaseException:
        archive.close()
        raise


def open_package(path: Path, kind: str, required: str) -> SafeZip:
    archive = SafeZip(path, kind)
    if archive.find(required) is None:
        archive.close()
        raise DocumentError(f"not {kind} (the archive has no {required})")
    return archive
