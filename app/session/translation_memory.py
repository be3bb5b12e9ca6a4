"""Translation memory: translations a person chose or imported, reused before the engine is asked.

An entry is a source sentence, its translation and their languages. An entry made in a context
(the model, adapter and options it was accepted with: `TranslationCache.context`) is reused only
in that context; an entry imported from a TMX file has no context and is reused for its languages
with any model. Lookups are exact: the same sentence, character for character; an entry of the
context wins over an imported one.

TMX (1.4, the exchange format of translation tools) is read with the app's XML parser, which
refuses entity declarations, within limits on the file, the entries and the length of a segment;
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

from dragoman.app.documents import write_atomically
from dragoman.app.documents.safety import DocumentError, parse_xml, read_bytes
from dragoman.engine import ISO_639_1, LANGUAGE_CODES, open_database

MEMORY_FILE = "memory.sqlite3"
MAX_ENTRIES = 1_000_000  # of one import
MAX_SEGMENT = 10_000  # characters of a segment; NLLB translates sentences
MAX_VARIANTS = 64  # languages of one translation unit
MAX_LISTED = 500  # edits listed at once (app.window.memory_dialog): a search finds the others
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
INLINE_CODES = {"bpt", "ept", "it", "ph", "ut"}  # a tool's formatting codes inside a segment: not text
_BY_ISO = {code: iso for iso, code in ISO_639_1.items()}
_REGION_SCRIPTS = {("zh", "TW"): "Hant", ("zh", "HK"): "Hant", ("zh", "MO"): "Hant"}


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


def flores_code(tag: str) -> str | None:
    """The FLORES-200 code a TMX/BCP 47 language tag stands for, or None."""
    if tag in LANGUAGE_CODES:
        return tag
    parts = re.split(r"[-_]", tag.strip())
    primary = parts[0].lower()
    script = next((p.title() for p in parts[1:] if len(p) == 4 and p.isalpha()), None)
    region = next((p.upper() for p in parts[1:] if len(p) == 2 and p.isalpha()), None)
    script = script or _REGION_SCRIPTS.get((primary, region))
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
    """A segment's text: its own and that of highlighted runs, without the formatting codes."""
    parts = [seg.text or ""]
    for child in seg:
        if etree.QName(child).localname not in INLINE_CODES:
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
        pattern = "%" + query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
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
        to the others, or each to each when it is `*all*`), as entries without a context."""
        path = Path(path)
        try:
            data = read_bytes(path)
        except DocumentError as e:  # "cannot read it", "empty"...: said of the file
            raise DocumentError(f"{path}: {e}") from None
        root = parse_xml(data, path.name).getroot()
        if etree.QName(root).localname != "tmx":
            raise DocumentError(f"{path.name} is not a TMX file (its root element is <{etree.QName(root).localname}>)")
        header = root.find("header")
        source_tag = header.get("srclang", "*all*") if header is not None else "*all*"
        report = ImportReport()
        entries: dict[tuple[str, str], dict[str, str]] = {}
        count = 0
        for number, unit in enumerate(root.iterfind("body/tu"), 1):
            variants = unit.findall("tuv")
            if len(variants) > MAX_VARIANTS:
                raise DocumentError(f"{path.name}: translation unit {number} has {len(variants)} languages "
                                    f"(at most {MAX_VARIANTS})")
            segments: dict[str, str] = {}
            for variant in variants:
                tag = variant.get(XML_LANG) or variant.get("lang") or ""
                code, seg = flores_code(tag), variant.find("seg")
                text = " ".join(segment_text(seg).split()) if seg is not None else ""
                if len(text) > MAX_SEGMENT:
                    raise DocumentError(f"{path.name}: translation unit {number} has a segment of {len(text):,} "
                                        f"characters (at most {MAX_SEGMENT:,})")
                if code is None or not text:
                    report.skipped += 1
                    continue
                segments[code] = text
            sources = [flores_code(source_tag)] if source_tag != "*all*" else list(segments)
            for source in sources:
                if source not in segments:
                    continue
                for target, text in segments.items():
                    if target != source:
                        entries.setdefault((source, target), {})[segments[source]] = text
                        count += 1
            if count > MAX_ENTRIES:
                raise DocumentError(f"{path.name} holds more than {MAX_ENTRIES:,} translations")
        for (source, target), pairs in entries.items():
            self.add(source, target, pairs)
            report.added += len(pairs)
        return report

    def export_tmx(self, path: str | Path, source_lang: str | None = None, target_lang: str | None = None) -> int:
        """Write the entries (of one pair, when given) as TMX 1.4, atomically; how many were written."""
        query = "SELECT source_lang, target_lang, source, target, context FROM entries"
        where = [(c, v) for c, v in (("source_lang", source_lang), ("target_lang", target_lang)) if v]
        if where:
            query += " WHERE " + " AND ".join(f"{c} = ?" for c, _ in where)
        with self._lock:
            rows = self._db.execute(query + " ORDER BY 1, 2, 3", [v for _, v in where]).fetchall()
        from dragoman.app import __version__

        tmx = etree.Element("tmx", version="1.4")
        etree.SubElement(tmx, "header", {
            "creationtool": "Dragoman", "creationtoolversion": __version__, "datatype": "plaintext",
            "segtype": "sentence", "adminlang": "en", "o-tmf": "Dragoman",
            "srclang": language_tag(source_lang) if source_lang else "*all*",
        })
        body = etree.SubElement(tmx, "body")
        for source_code, target_code, source, target, context in rows:
            unit = etree.SubElement(body, "tu")
            if context:
                etree.SubElement(unit, "prop", type="x-dragoman-context").text = context
            for code, text in ((source_code, source), (target_code, target)):
                variant = etree.SubElement(unit, "tuv", {XML_LANG: language_tag(code)})
                etree.SubElement(variant, "seg").text = text
        data = etree.tostring(tmx, xml_declaration=True, encoding="UTF-8", pretty_print=True)
        write_atomically(Path(path), data)
        return len(rows)

    def close(self) -> None:
        with self._lock:
            self._db.close()

