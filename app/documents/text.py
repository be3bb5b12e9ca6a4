"""Plain text (.txt): paragraphs are blocks of lines between blank lines.

A block whose lines look hard-wrapped (several long lines, each as full as the next line's first
word allows, no list markers) is one paragraph, joined with spaces and wrapped again to its
original width; otherwise each line is translated on its own. What is not prose stays exactly as
written: blank lines, indentation and list markers ("- ", "1. ", "• "), lines without letters
(rulers such as `-----`, `=====`, `***`, numbers), the borders and padding of table rows
(`| cell | cell |`, whose cells are translated one by one), and URLs and e-mail addresses, which
are never sent to the model: the text around them is translated in pieces. The encoding, its BOM
(UTF-8, UTF-16 and UTF-32, either byte order) and the line endings are kept; a legacy encoding
(app.documents.safety) is kept where it can hold the translation, else the output is UTF-8, and
the document's `notes` say either.
"""

from __future__ import annotations

import codecs
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

from dragoman.app.documents.safety import assumed_encoding, decode_text, encoding_label, read_bytes
from dragoman.app.documents.segments import Document, Run, Segment

EXTENSIONS = (".txt", ".text")
_PREFIX = re.compile(r"^(\s*(?:[-*+•·–]\s+|\d+[.)]\s+|[a-zA-Z][.)]\s+)?)")
WRAPPED_MIN = 40  # a line this long or longer, filled up to its width, was probably wrapped
# A table row: starts and ends with a column border, at least two of them.
_TABLE_ROW = re.compile(r"^\s*[|│┃║].*[|│┃║]\s*$")
_CELL_BORDER = re.compile(r"(\s*[|│┃║]\s*)")
# URLs (with a scheme or www.) and e-mail addresses; punctuation that ends a sentence is not theirs.
_ADDRESS = re.compile(
    r"(?:\b[a-zA-Z][a-zA-Z0-9+.-]*://|\bwww\.)[^\s<>\"|\[\]]+|\bmailto:[^\s<>\"|\[\]]+|[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
)
_ADDRESS_MARKS = ("://", "www.", "mailto:", "@")  # one of which each of _ADDRESS's forms holds
_ADDRESS_TAIL = ".,;:!?'\")]}"
# Text right after an address may start with punctuation ending the address's clause, text right
# before one may end with the bracket or quote opening around it: neither is translated.
_AFTER_ADDRESS = frozenset(".,;:!?")
_BEFORE_ADDRESS = frozenset("([{<\"'“‘«")
# BOM -> the codec that writes the text after it (the BOM itself is written as it was).
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"), (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def read_text(path: Path) -> tuple[str, str, bytes]:
    """(text, codec, BOM) of a text file: its translation is written with the same codec and BOM."""
    data = read_bytes(path)
    text, encoding = decode_text(data)
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return text, codec, bom
    return text, encoding, b""


def addresses(text: str) -> list[tuple[int, int]]:
    """(start, end) of each URL and e-mail address in `text`, without the punctuation after it."""
    if not any(mark in text for mark in _ADDRESS_MARKS):  # most lines: the search costs more than this
        return []
    spans = []
    for m in _ADDRESS.finditer(text):
        end = m.end()
        while end > m.start() and text[end - 1] in _ADDRESS_TAIL:
            if text[end - 1] == ")" and text.count("(", m.start(), end) >= text.count(")", m.start(), end):
                break  # a URL's own parenthesis, as in Wikipedia's
            end -= 1
        spans.append((m.start(), end))
    return spans


def prose_parts(text: str) -> list[tuple[str, bool]]:
    """`text` as (piece, translate?) pairs: URLs, e-mail addresses, surrounding whitespace and
    pieces without letters are kept, the rest is translated."""
    parts: list[tuple[str, bool]] = []
    position = 0
    for start, end in addresses(text) + [(len(text), len(text))]:
        a, b = position, start
        while a < b and (text[a].isspace() or (position and text[a] in _AFTER_ADDRESS)):
            a += 1
        while b > a and (text[b - 1].isspace() or (start < len(text) and text[b - 1] in _BEFORE_ADDRESS)):
            b -= 1
        if any(ch.isalpha() for ch in text[a:b]):
            parts += [(text[position:a], False), (text[a:b], True), (text[b:start], False)]
        else:
            parts.append((text[position:start], False))
        parts.append((text[start:end], False))
        position = end
    return [(piece, translate) for piece, translate in parts if piece]


def line_parts(line: str) -> list[tuple[str, bool]]:
    """A line of text as (piece, translate?) pairs; the pieces joined are the line."""
    if not any(ch.isalpha() for ch in line):  # rulers, numbers, table borders, blank lines
        return [(line, False)] if line else []
    if _TABLE_ROW.match(line):
        return [part for i, cell in enumerate(_CELL_BORDER.split(line))
                for part in ([(cell, False)] if i % 2 else prose_parts(cell))]
    prefix = _prefix(line)
    return ([(prefix, False)] if prefix else []) + prose_parts(line[len(prefix) :])


@dataclass
class Wrapped:
    """Pieces rendered together, then wrapped to `width` with each line indented and ended by
    `newline` (a hard-wrapped paragraph)."""

    width: int
    indent: str
    newline: str
    pieces: list[str | int]


class OwnPiece:
    """A piece of a subclass's own kind, which that subclass's `text` renders."""


class SlotDocument(Document):
    """Text that is verbatim pieces and segment slots: `pieces` holds strings, segment indexes and
    `Wrapped` groups of them (and a subclass's `OwnPiece`s); `render(i, runs)` turns segment i's
    runs into text."""

    def __init__(self, codec: str = "utf-8", bom: bytes = b""):
        self.segments: list[Segment] = []
        self.pieces: list[str | int | Wrapped | OwnPiece] = []
        self.codec = codec
        self.bom = bom
        self.notes = tuple(filter(None, [assumed_encoding(codec)]))

    def add_text(self, text: str) -> None:
        self.pieces.append(text)

    def add_segment(self, runs: list[Run], into: list | None = None) -> None:
        (self.pieces if into is None else into).append(len(self.segments))
        self.segments.append(Segment(runs))

    def add_parts(self, parts: list[tuple[str, bool]], into: list | None = None) -> None:
        """The pieces of `line_parts` or `prose_parts`, appended to `pieces` (or to `into`)."""
        for piece, translate in parts:
            if translate:
                self.add_segment([Run(piece)], into)
            else:
                (self.pieces if into is None else into).append(piece)

    def render(self, index: int, runs: list[Run]) -> str:
        return "".join(r.text for r in runs)

    def _join(self, pieces: list, translations: list[list[Run]]) -> str:
        out = []
        for piece in pieces:
            if isinstance(piece, Wrapped):
                joined = self._join(piece.pieces, translations)
                lines = textwrap.wrap(joined, piece.width, initial_indent=piece.indent, subsequent_indent=piece.indent,
                                      break_long_words=False, break_on_hyphens=False)
                if len(lines) > 1 and not any(ch.isalpha() for ch in lines[-1]):  # "06]]." alone: not a line of its own
                    lines[-2:] = [lines[-2] + " " + lines[-1].lstrip()]
                out.append(piece.newline.join(lines))
            elif isinstance(piece, int):
                out.append(self.render(piece, translations[piece]))
            else:
                out.append(piece)
        return "".join(out)

    def text(self, translations: list[list[Run]]) -> str:
        return self._join(self.pieces, translations)

    def write(self, translations: list[list[Run]], out_path: Path) -> None:
        text = self.text(translations)
        try:
            data = self.bom + text.encode(self.codec)
        except UnicodeEncodeError:  # a legacy encoding without the target's letters
            data = text.encode("utf-8")
            self.notes += (f"written as UTF-8: {encoding_label(self.codec)} cannot hold the translation",)
        out_path.write_bytes(data)


def _prefix(line: str) -> str:
    """The line's list-item or indent prefix ("" for none: the pattern matches every line)."""
    found = _PREFIX.match(line)
    return found.group(1) if found else ""


def _is_wrapped(block: list[str]) -> bool:
    """Lines cut by a text editor's wrapping: all but the last long and filled up to the width
    (the next line's first word would not have fit), none a list item, a table row or a ruler."""
    if len(block) < 2 or any(_prefix(line).strip() or _TABLE_ROW.match(line) for line in block):
        return False
    if not all(any(ch.isalpha() for ch in line) for line in block):
        return False
    width = max(len(line) for line in block)
    for line, following in zip(block, block[1:]):
        next_word = following.split()[0] if following.split() else ""
        if len(line) < WRAPPED_MIN or len(line.rstrip()) + 1 + len(next_word) <= width:
            return False
    return True


def add_lines(doc: SlotDocument, lines: list[str], newline: str) -> None:
    """Blocks of lines as segments (see the module docstring); `lines` have no line ends."""
    i = 0
    while i < len(lines):
        if not lines[i].strip():
            doc.add_text(lines[i] + newline)
            i += 1
            continue
        j = i
        while j < len(lines) and lines[j].strip():
            j += 1
        block = lines[i:j]
        if _is_wrapped(block):
            indent = block[0][: len(block[0]) - len(block[0].lstrip())]
            paragraph = Wrapped(max(len(line) for line in block), indent, newline, [])
            doc.add_parts(prose_parts(" ".join(line.strip() for line in block)), into=paragraph.pieces)
            doc.pieces.append(paragraph)
            doc.add_text(newline)
        else:
            for line in block:
                doc.add_parts(line_parts(line))
                doc.add_text(newline)
        i = j


def split_lines(text: str) -> tuple[list[str], str, bool]:
    """(lines without ends, the line end used, whether the text ended with one)."""
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = text.split(newline)
    ends = lines[-1] == ""
    return (lines[:-1] if ends else lines), newline, ends


def extract(path: Path) -> SlotDocument:
    text, codec, bom = read_text(path)
    doc = SlotDocument(codec, bom)
    lines, newline, ends = split_lines(text)
    add_lines(doc, lines, newline)
    if not ends and doc.pieces and doc.pieces[-1] == newline:
        doc.pieces.pop()
    return doc
