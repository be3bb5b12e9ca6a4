"""Glossaries: terms to translate one way, read from CSV/TSV or TBX files and found in sentences.

Files (at most `MAX_FILE_BYTES`, UTF-8 with or without BOM, or UTF-16/32 with a BOM):

- CSV or TSV: one entry a row, `source,target`, then optionally `source_lang,target_lang`
  (FLORES-200 codes, `eng_Latn`, or ISO 639-1, `en`). The separator is a tab for `.tsv` files and
  otherwise the first of tab, comma and semicolon that the first row holds. An optional header row
  either names the columns (`source`, `target`, optionally `source_lang`, `target_lang`, in any
  order; other columns such as notes are read past) or gives the two languages of the whole file
  (`eng_Latn,fra_Latn`). Entries without languages apply
  to every pair. Quoted cells as spreadsheets write them; blank rows are skipped.
- TBX (TBX-Basic and TBX v3, `martif` or `tbx`): each `termEntry` / `conceptEntry` gives, for every
  two of its languages (`xml:lang`, BCP 47: `en`, `zh-Hant`), its terms in one as sources of its
  first term in the other that is not deprecated, superseded or obsolete (`administrativeStatus`). Parsed with the documents' hardened XML parser: no entities, no DTD,
  no network, libxml2's depth limit. Languages NLLB does not have are skipped.

Bad input is refused in one line naming the file and, where there is one, the line
(`GlossaryError`). Limits: `MAX_ENTRIES` entries (a TBX concept counts once per pair of its
languages), terms of at most `MAX_TERM_CHARS` characters, no line breaks in a term, and in a TBX
file at most `MAX_TBX_MARKUP` tags and attributes (counted on the bytes, whatever the encoding).

Matching (`TermMatcher`): an entry applies when its source term occurs in the sentence, ignoring
case (Unicode case folding) and runs of whitespace, as whole words; in scripts written without
spaces (Han, kana, Thai, Lao, Khmer, Myanmar, Tibetan) at any position. Where matches overlap the
leftmost wins, then the longest. A sentence of n characters costs at most n x `MAX_TERM_CHARS`
steps through a trie of the terms, whatever the terms: no regular expressions run on user text.
"""

from __future__ import annotations

import csv
import io
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from dragoman.app.documents.safety import DocumentError, check_file, decode_text, parse_xml, read_bytes
from dragoman.app.documents.sentences import UNSPACED_CHARACTER
from dragoman.engine import ISO_639_1, LANGUAGE_CODES

MAX_FILE_BYTES = 8 * 1024 * 1024
MAX_ENTRIES = 10_000
MAX_TERM_CHARS = 100
MAX_TBX_MARKUP = 1_000_000  # ~20 a TBX entry of two languages; lxml holds 100-200 bytes for each
COLUMNS = ("source", "target", "source_lang", "target_lang")
TBX_SUFFIXES = (".tbx", ".xml")
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
_TRADITIONAL_CHINESE = {"hant", "tw", "hk", "mo"}


class GlossaryError(ValueError):
    """A glossary file that cannot be used: "{file}: [line N: ]{problem}", one line."""


@dataclass(frozen=True)
class Entry:
    source: str
    target: str
    source_lang: str | None  # FLORES-200 code; None: any language
    target_lang: str | None
    line: int  # where the entry starts in its file

    def applies_to(self, src_lang: str, tgt_lang: str) -> bool:
        return self.source_lang in (None, src_lang) and self.target_lang in (None, tgt_lang)


@dataclass(frozen=True)
class Glossary:
    path: Path
    entries: tuple[Entry, ...]

    def matcher(self, src_lang: str, tgt_lang: str) -> "TermMatcher":
        return TermMatcher(e for e in self.entries if e.applies_to(src_lang, tgt_lang))


def language_code(tag: str) -> str | None:
    """The FLORES-200 code for a FLORES code, an ISO 639-1 code or a BCP 47 tag (`pt-BR`,
    `zh-Hant`, `zh_TW`), or None when NLLB has no such language."""
    tag = tag.strip()
    if tag in LANGUAGE_CODES:
        return tag
    parts = tag.replace("_", "-").lower().split("-")
    if parts[0] == "zh" and _TRADITIONAL_CHINESE & set(parts[1:]):
        return "zho_Hant"
    code = ISO_639_1.get(parts[0])
    if code is None and len(parts[0]) == 3:
        matches = [c for c in LANGUAGE_CODES if c.startswith(parts[0] + "_")]
        code = matches[0] if len(matches) == 1 else None
    return code


def read_glossary(path: str | Path) -> Glossary:
    """The glossary in `path` (TBX for `.tbx` and `.xml`, else CSV/TSV); GlossaryError when it cannot be used."""
    path = Path(path)
    try:
        size = check_file(path)
        if size > MAX_FILE_BYTES:
            raise DocumentError(f"too large ({size / 2**20:.0f} MiB; the limit for a glossary is"
                                f" {MAX_FILE_BYTES // 2**20} MiB)")
        data = read_bytes(path)
        if path.suffix.lower() in TBX_SUFFIXES:
            entries = _read_tbx(data)
        else:
            text, _ = decode_text(data)
            entries = _read_table(text, "\t" if path.suffix.lower() == ".tsv" else None)
    except DocumentError as e:
        raise GlossaryError(f"{path.name}: {e}") from None
    except _LineError as e:
        raise GlossaryError(f"{path.name}: line {e.line}: {e.problem}") from None
    if not entries:
        raise GlossaryError(f"{path.name}: no entries")
    return Glossary(path, tuple(entries))


class _LineError(Exception):
    def __init__(self, line: int, problem: str):
        super().__init__(f"line {line}: {problem}")
        self.line, self.problem = line, problem


def _term(text: str, line: int, what: str) -> str:
    if "\n" in text or "\r" in text:
        raise _LineError(line, f"the {what} term holds a line break")
    term = " ".join(unicodedata.normalize("NFC", text).split())
    if not term:
        raise _LineError(line, f"the {what} term is empty")
    if len(term) > MAX_TERM_CHARS:
        raise _LineError(line, f"the {what} term is longer than {MAX_TERM_CHARS} characters")
    return term


def _names_language(cell: str) -> bool:
    """Whether a header cell is a FLORES-200 code or a BCP 47 tag of a two-letter language (not a word)."""
    primary = cell.replace("_", "-").split("-")[0]
    return cell in LANGUAGE_CODES or (len(primary) == 2 and primary.isascii() and primary.isalpha()
                                      and language_code(cell) is not None)


def _language(text: str, line: int) -> str | None:
    if not text.strip():
        return None
    code = language_code(text)
    if code is None:
        raise _LineError(line, f"unknown language {text.strip()!r} (a FLORES-200 code such as eng_Latn, or en)")
    return code


def _count(entries: list[Entry], line: int) -> None:
    if len(entries) > MAX_ENTRIES:
        raise _LineError(line, f"more than {MAX_ENTRIES:,} entries, the limit for a glossary")


def _read_table(text: str, delimiter: str | None) -> list[Entry]:
    if text.startswith("\ufeff"):
        text = text[1:]
    if delimiter is None:
        first = text.split("\n", 1)[0]
        delimiter = next((d for d in "\t,;" if d in first), ",")
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    columns: tuple[str, ...] = COLUMNS
    languages: tuple[str | None, str | None] = (None, None)
    entries: list[Entry] = []
    header_seen = False
    line = 1
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as e:
            raise _LineError(reader.line_num, f"not a valid table row ({e})") from None
        start, line = line, reader.line_num + 1
        cells = [c.strip() for c in row]
        if not any(cells):
            continue
        if not header_seen:
            header_seen = True
            names = tuple(c.casefold().replace(" ", "_") for c in cells)
            if {"source", "target"} <= set(names) and all(names.count(c) <= 1 for c in COLUMNS):
                columns = names  # other columns (notes, part of speech) are read past
                continue
            if len(cells) == 2 and all(_names_language(c) for c in cells):
                languages = (language_code(cells[0]), language_code(cells[1]))
                continue
        if len(cells) > len(columns):
            raise _LineError(start, f"{len(cells)} cells, but at most {len(columns)} ({', '.join(columns)})")
        values = dict(zip(columns, cells))
        entries.append(Entry(
            _term(values.get("source", ""), start, "source"),
            _term(values.get("target", ""), start, "target"),
            _language(values.get("source_lang", ""), start) or languages[0],
            _language(values.get("target_lang", ""), start) or languages[1],
            start,
        ))
        _count(entries, start)
    return entries


def _local(element) -> str:
    tag = element.tag
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _read_tbx(data: bytes) -> list[Entry]:
    # `<` and `=` bytes bound the elements and attributes lxml builds, whatever the encoding.
    markup = data.count(b"<") + data.count(b"=")
    if markup > MAX_TBX_MARKUP:
        raise DocumentError(f"over {MAX_TBX_MARKUP:,} XML tags and attributes, the limit for a glossary")
    root = parse_xml(data, "the file").getroot()
    if _local(root) not in ("martif", "tbx"):
        raise DocumentError(f"not a TBX file (its root element is <{_local(root)}>, not <martif> or <tbx>)")
    entries: list[Entry] = []
    for concept in root.iter():
        if _local(concept) not in ("termEntry", "conceptEntry"):
            continue
        terms: dict[str, list[tuple[str, bool]]] = {}  # language -> (term, deprecated)
        for section in concept:
            if _local(section) not in ("langSet", "langSec"):
                continue
            line = section.sourceline or 0
            tag = section.get(XML_LANG) or section.get("lang")
            if not tag:
                raise _LineError(line, f"<{_local(section)}> has no xml:lang")
            code = language_code(tag)
            if code is None:
                continue
            for term in section.iter():
                if _local(term) == "term":
                    text = _term("".join(term.itertext()), term.sourceline or line, "TBX")
                    terms.setdefault(code, []).append((text, _deprecated(term)))
        for source_lang, sources in terms.items():
            for target_lang, targets in terms.items():
                usable = [t for t, deprecated in targets if not deprecated]
                if source_lang == target_lang or not usable:
                    continue
                for source, _ in sources:
                    entries.append(Entry(source, usable[0], source_lang, target_lang, concept.sourceline or 0))
                    _count(entries, concept.sourceline or 0)
    return entries


def _deprecated(term) -> bool:
    """Whether a term's administrative status says not to use it (it still names the concept in a source)."""
    group = term.getparent()  # tig, termGrp (inside ntig) or termSec
    groups = [group] + ([group.getparent()] if _local(group) == "termGrp" else [])
    return any(
        _local(note) == "termNote" and note.get("type") == "administrativeStatus"
        and any(word in (note.text or "").lower() for word in ("deprecated", "superseded", "obsolete"))
        for g in groups for note in g.iter()
    )


@dataclass(frozen=True)
class TermMatch:
    start: int  # offsets in the sentence as given
    end: int
    entry: Entry


def _is_word(c: str) -> bool:
    return c.isalnum() or c == "_" or unicodedata.category(c).startswith("M")


class TermMatcher:
    """The source terms of some entries in a trie of their case-folded characters; the first entry
    for a term wins (a later glossary, or a later line, with the same source term is not used)."""

    def __init__(self, entries: Iterable[Entry]):
        self.root: dict = {}
        self.entries: list[Entry] = []
        for entry in entries:
            node = self.root
            for c in entry.source.casefold():
                node = node.setdefault(c, {})
            if None not in node:
                node[None] = entry
                self.entries.append(entry)

    @classmethod
    def for_pair(cls, glossaries: Iterable[Glossary], src_lang: str, tgt_lang: str) -> "TermMatcher":
        return cls(e for g in glossaries for e in g.entries if e.applies_to(src_lang, tgt_lang))

    def find(self, sentence: str) -> list[TermMatch]:
        """The entries whose source terms occur in `sentence`, in order, none overlapping."""
        if not self.entries:
            return []
        # The sentence folded: case folded, each run of whitespace one space; `origin[i]` is the
        # sentence offset of folded character i (a folded character may come from one that folds to several).
        folded: list[str] = []
        origin: list[int] = []
        for i, c in enumerate(sentence):
            if c.isspace():
                if folded and folded[-1] != " ":
                    folded.append(" ")
                    origin.append(i)
                continue
            for f in c.casefold():
                folded.append(f)
                origin.append(i)
        origin.append(len(sentence))
        matches: list[TermMatch] = []
        position = 0
        while position < len(folded):
            whole = position == 0 or origin[position - 1] != origin[position]  # not inside a character's folding
            found = None
            if whole and self._may_start(sentence, origin[position]):
                found = self._longest_at(sentence, folded, origin, position)
            if found is None:
                position += 1
                continue
            end, entry = found
            matches.append(TermMatch(origin[position], origin[end - 1] + 1, entry))
            position = end
        return matches

    def targets(self, sentence: str) -> list[str]:
        """The target terms of the entries that apply to `sentence`, each once, in order."""
        return list(dict.fromkeys(m.entry.target for m in self.find(sentence)))

    @staticmethod
    def _may_start(sentence: str, i: int) -> bool:
        return i == 0 or not _is_word(sentence[i - 1]) or bool(UNSPACED_CHARACTER.match(sentence[i - 1])) \
            or bool(UNSPACED_CHARACTER.match(sentence[i]))

    @staticmethod
    def _may_end(sentence: str, i: int) -> bool:
        """Whether a term may end before sentence offset i."""
        return i == len(sentence) or not _is_word(sentence[i]) or bool(UNSPACED_CHARACTER.match(sentence[i])) \
            or bool(UNSPACED_CHARACTER.match(sentence[i - 1]))

    def _longest_at(self, sentence: str, folded: list[str], origin: list[int], position: int):
        """(folded end, entry) of the longest term starting at folded `position` and ending at a word end."""
        node, best = self.root, None
        for end in range(position, min(len(folded), position + MAX_TERM_CHARS * 3)):
            child = node.get(folded[end])
            if child is None:
                break
            node = child
            entry = node.get(None)
            # a term ends on a whole character of the sentence, at a word end
            if entry is not None and origin[end + 1] != origin[end] and self._may_end(sentence, origin[end + 1]):
                best = (end + 1, entry)
        return best
