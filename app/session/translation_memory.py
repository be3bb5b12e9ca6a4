"""Translation memory: translations a person chose or imported, reused before the engine is asked.

An entry is a source sentence, its translation and their languages. An entry made in a context
(the model, adapter and options it was accepted with: `TranslationCache.context`) is reused only
in that context; an entry imported from a TMX file has no context and is reused for its languages
with any model. Lookups are exact: the same sentence, character for character; an entry of the
context wins over an imported one.

TMX (1.4, the exchange format of translation tools) is read as a stream with the app's XML
parser, which refuses entity declarations (a reference to an undefined entity is refused too;
comments and processing instructions are left out), within limits on the file, the entries, the
elements of a unit and the length of a segment, so memory stays that of one unit and a batch of
entries; it is written as a stream too, one unit at a time;
its language tags (`fr`, `fr-FR`, `zh-Hant`, `sr-Latn`, or FLORES codes) are mapped to NLLB's
FLORES-200 codes, and a variant that has none is skipped and counted.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from lxml import etree

from dragoman.app.documents import writing_atomically
from dragoman.app.documents.safety import DocumentError, iterparse_xml
from dragoman.engine import ISO_639_1, LANGUAGE_CODES, open_database

MEMORY_FILE = "memory.sqlite3"
MAX_ENTRIES = 1_000_000  # of one import
MAX_SEGMENT = 10_000  # characters of a segment; NLLB translates sentences
MAX_VARIANTS = 64  # languages of one translation unit
MAX_UNIT_ELEMENTS = 10_000  # elements of one translation unit (its variants, segments, inline codes, notes)
IMPORT_BATCH = 10_000  # entries stored at once while a file is read
MAX_LISTED = 500  # edits listed at once (app.window.memory_dialog): a search finds the others
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
INLINE_CODES = {"bpt", "ept", "it", "ph", "ut"}  # a tool's formatting codes inside a segment: not text
_BY_ISO = {code: iso for iso, code in ISO_639_1.items()}
_REGION_SCRIPTS = {("zh", "TW"): "Hant", ("zh", "HK"): "Hant", ("zh", "MO"): "Hant"}


def contains_pattern(query: str) -> str:
    """A LIKE pattern (with ESCAPE '\\') matching text that contains `query` as written."""
    return "%" + query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


@dataclass(frozen=True)
class MemoryEntry:
    """One stored translation; `context` is "" for an imported one."""

    source_lang: str
    target_lang: str
    context: str
    source: str
    target: str
    changed: float  # seconds since the epoch


@dataclass
class ImportReport:
    added: int = 0
    skipped: int = 0  # variants in a language NLLB does not have, or empty
    units: int = 0  # translation units read


def flores_code(tag: str) -> str | None:
    """The FLORES-200 code a TMX/BCP 47 language tag stands for, or None."""
    if tag in LANGUAGE_CODES:
        return tag
    parts = re.split(r"[-_]", tag.strip())
    primary = parts[0].lower()
    script = next((p.title() for p in parts[1:] if len(p) == 4 and p.isalpha()), None)
    region = next((p.upper() for p in parts[1:] if len(p) == 2 and p.isalpha()), None)
    if not script and region is not None:
        script = _REGION_SCRIPTS.get((primary, region))
    base = ISO_639_1.get(primary)
    language = base[:3] if base else primary
    if script:  # text in a script NLLB has no variety of is no language of its
        return f"{language}_{script}" if f"{language}_{script}" in LANGUAGE_CODES else None
    if base:
        return base
    varieties = [code for code in LANGUAGE_CODES if code.startswith(language + "_")]
    return varieties[0] if len(varieties) == 1 else None


def language_tag(code: str) -> str:
    """The BCP 47 tag of a FLORES-200 code, as TMX files write them: `fr-Latn`, `zh-Hant`, `ace-Arab`."""
    language, script = code.split("_")
    return f"{_BY_ISO.get(code, language)}-{script}"


def segment_text(seg: etree._Element) -> str:
    """A segment's text: its own and that of highlighted runs, without the formatting codes.
    ValueError where it refers to an entity (the file does not define: declarations are refused)."""
    parts = [seg.text or ""]
    for child in seg:
        if child.tag is etree.Entity:
            raise ValueError(f"refers to the entity {child.text}, which the file does not define")
        if isinstance(child.tag, str) and etree.QName(child).localname not in INLINE_CODES:
            parts.append(segment_text(child))
        parts.append(child.tail or "")
    return "".join(parts)


class TranslationMemory:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._db = open_database(
            self.path, "translation memory", "entries",
            "CREATE TABLE IF NOT EXISTS entries (source_lang TEXT NOT NULL, target_lang TEXT NOT NULL, "
            "context TEXT NOT NULL, source TEXT NOT NULL, target TEXT NOT NULL, changed REAL NOT NULL, "
            "PRIMARY KEY (source_lang, target_lang, context, source))")

    def add(self, source_lang: str, target_lang: str, pairs: dict[str, str], context: str = "") -> None:
        """Store translations (source sentence -> translation); a later one of the same sentence replaces it."""
        now = time.time()
        with self._lock:
            self._db.executemany(
                "INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?, ?)",
                [(source_lang, target_lang, context, s, t, now) for s, t in pairs.items()],
            )
            self._db.commit()

    def find(self, source_lang: str, target_lang: str, context: str, texts: list[str]) -> dict[str, str]:
        """The stored translations of `texts`: the context's own, else an imported one."""
        found: dict[str, str] = {}
        wanted = list(dict.fromkeys(texts))
        with self._lock:
            for i in range(0, len(wanted), 500):
                chunk = wanted[i : i + 500]
                rows = self._db.execute(
                    f"SELECT source, target FROM entries WHERE source_lang = ? AND target_lang = ? AND context IN (?, '') "
                    f"AND source IN ({','.join('?' * len(chunk))}) ORDER BY context = ? ",
                    [source_lang, target_lang, context, *chunk, context],
                )
                for source, target in rows:  # the context's own entry comes last and wins
                    found[source] = target
        return found

    def edits(self, query: str = "", limit: int = MAX_LISTED) -> list[MemoryEntry]:
        """The newest entries a person made in the window (those with a context: not imported) whose
        source or translation contains `query` (any case; "" = all)."""
        pattern = contains_pattern(query)
        with self._lock:
            rows = self._db.execute(
                "SELECT source_lang, target_lang, context, source, target, changed FROM entries WHERE context != '' "
                "AND (source LIKE ?1 ESCAPE '\\' OR target LIKE ?1 ESCAPE '\\') ORDER BY changed DESC LIMIT ?2",
                (pattern, limit),
            ).fetchall()
        return [MemoryEntry(*row) for row in rows]

    def delete(self, entry: MemoryEntry) -> None:
        """Forget `entry`: its sentence is translated by the model again."""
        with self._lock:
            self._db.execute("DELETE FROM entries WHERE source_lang = ? AND target_lang = ? AND context = ? AND source = ?",
                             (entry.source_lang, entry.target_lang, entry.context, entry.source))
            self._db.commit()

    def pairs(self) -> list[tuple[str, str, int]]:
        """(source language, target language, entries) for every pair held."""
        with self._lock:
            return self._db.execute(
                "SELECT source_lang, target_lang, COUNT(*) FROM entries GROUP BY source_lang, target_lang ORDER BY 1, 2"
            ).fetchall()

    def import_tmx(self, path: str | Path) -> ImportReport:
        """Every pair of languages of every translation unit of a TMX file (the header's `srclang`
        to the others, or each to each when it is `*all*`), as entries without a context. The file
        is read as a stream, one unit at a time, and its entries stored in batches of one
        transaction: all of them, or none where the file is refused."""
        path = Path(path)
        report = ImportReport()
        source_tag, depth, count, batch = "*all*", 0, 0, []
        unit_elements = 0  # elements of the unit being read
        with self._lock:
            try:
                for event, element in iterparse_xml(path):
                    if event == "start":
                        depth += 1
                        if depth == 1 and etree.QName(element).localname != "tmx":
                            raise DocumentError(f"{path.name} is not a TMX file (its root element is "
                                                f"<{etree.QName(element).localname}>)")
                        unit_elements += depth >= 3
                        if unit_elements > MAX_UNIT_ELEMENTS:
                            raise DocumentError(f"{path.name}: translation unit {report.units + 1} holds over "
                                                f"{MAX_UNIT_ELEMENTS:,} elements")
                        continue
                    depth -= 1
                    if depth == 1 and element.tag == "header":
                        source_tag = element.get("srclang", "*all*")
                    elif depth == 2 and element.tag == "tu":
                        report.units += 1
                        for source, target, pair in self._unit_pairs(element, source_tag, report, path.name):
                            batch.append((source, target, "", *pair, time.time()))
                            count += 1
                        if count > MAX_ENTRIES:
                            raise DocumentError(f"{path.name} holds more than {MAX_ENTRIES:,} translations")
                        if len(batch) >= IMPORT_BATCH:
                            self._db.executemany("INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?, ?)", batch)
                            batch.clear()
                    if depth <= 2:  # a unit, the header or anything else read: let it go, and what came before it
                        unit_elements = 0
                        element.clear()
                        while element.getprevious() is not None:
                            del element.getparent()[0]
                self._db.executemany("INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?, ?)", batch)
                self._db.commit()
            except BaseException:
                self._db.rollback()
                raise
        report.added = count
        return report

    @staticmethod
    def _unit_pairs(unit: etree._Element, source_tag: str, report: ImportReport, name: str):
        """(source code, target code, (source text, its translation)) of a translation unit."""
        variants = unit.findall("tuv")
        number = report.units
        if len(variants) > MAX_VARIANTS:
            raise DocumentError(f"{name}: translation unit {number} has {len(variants)} languages (at most {MAX_VARIANTS})")
        segments: dict[str, str] = {}
        for variant in variants:
            tag = variant.get(XML_LANG) or variant.get("lang") or ""
            code, seg = flores_code(tag), variant.find("seg")
            try:
                text = " ".join(segment_text(seg).split()) if seg is not None else ""
            except ValueError as e:
                raise DocumentError(f"{name}: translation unit {number} {e}") from None
            if len(text) > MAX_SEGMENT:
                raise DocumentError(f"{name}: translation unit {number} has a segment of {len(text):,} "
                                    f"characters (at most {MAX_SEGMENT:,})")
            if code is None or not text:
                report.skipped += 1
                continue
            segments[code] = text
        sources = [flores_code(source_tag)] if source_tag != "*all*" else list(segments)
        for source in sources:
            if source in segments:
                yield from ((source, target, (segments[source], text)) for target, text in segments.items()
                            if target != source)

    def export_tmx(self, path: str | Path, source_lang: str | None = None, target_lang: str | None = None) -> int:
        """Write the entries (of one pair, when given) as TMX 1.4, atomically and as a stream (one
        unit at a time from the database to the file); how many were written."""
        from dragoman.app import __version__

        query = "SELECT source_lang, target_lang, source, target, context FROM entries"
        where = [(c, v) for c, v in (("source_lang", source_lang), ("target_lang", target_lang)) if v]
        if where:
            query += " WHERE " + " AND ".join(f"{c} = ?" for c, _ in where)
        count = 0
        with self._lock, writing_atomically(Path(path)) as f, etree.xmlfile(f, encoding="UTF-8") as xml:
            xml.write_declaration()
            with xml.element("tmx", version="1.4"):
                xml.write("\n", etree.Element("header", {
                    "creationtool": "Dragoman", "creationtoolversion": __version__, "datatype": "plaintext",
                    "segtype": "sentence", "adminlang": "en", "o-tmf": "Dragoman",
                    "srclang": language_tag(source_lang) if source_lang else "*all*",
                }), "\n")
                with xml.element("body"):
                    xml.write("\n")
                    for source_code, target_code, source, target, context in self._db.execute(
                            query + " ORDER BY 1, 2, 3", [v for _, v in where]):
                        unit = etree.Element("tu")
                        if context:
                            etree.SubElement(unit, "prop", type="x-dragoman-context").text = context
                        for code, text in ((source_code, source), (target_code, target)):
                            variant = etree.SubElement(unit, "tuv", {XML_LANG: language_tag(code)})
                            etree.SubElement(variant, "seg").text = text
                        xml.write(unit, pretty_print=True)
                        count += 1
                xml.write("\n")
        return count

    def close(self) -> None:
        with self._lock:
            self._db.close()

