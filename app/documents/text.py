"""Plain text (.txt): paragraphs are blocks of lines between blank lines.

A block whose lines look hard-wrapped (several long lines, no list markers) is one segment, joined
with spaces and wrapped again to its original width; otherwise each line is a segment, its
indentation and list marker ("- ", "1. ", "• ") kept outside the translation. Line endings and
the encoding (UTF-8, UTF-16 with BOM) are kept.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from app.documents.safety import decode_text, read_bytes
from app.documents.segments import Document, Run, Segment

EXTENSIONS = (".txt", ".text")
_PREFIX = re.compile(r"^(\s*(?:[-*+•·–]\s+|\d+[.)]\s+|[a-zA-Z][.)]\s+)?)")
WRAPPED_MIN = 40  # a line this long or longer, ending without a paragraph end, was probably wrapped


class SlotDocument(Document):
    """Text that is verbatim pieces and segment slots: `pieces` holds strings and segment indexes;
    `wrap[i]` (optional) rewraps slot i to a width, `render(i, runs)` turns runs into text."""

    def __init__(self, encoding: str = "utf-8"):
        self.segments: list[Segment] = []
        self.pieces: list[str | int] = []
        self.wrap: dict[int, int] = {}
        self.encoding = encoding

    def add_text(self, text: str) -> None:
        self.pieces.append(text)

    def add_segment(self, runs: list[Run], wrap: int = 0) -> None:
        if wrap:
            self.wrap[len(self.segments)] = wrap
        self.pieces.append(len(self.segments))
        self.segments.append(Segment(runs))

    def render(self, index: int, runs: list[Run]) -> str:
        return "".join(r.text for r in runs)

    def text(self, translations: list[list[Run]]) -> str:
        out = []
        for piece in self.pieces:
            if isinstance(piece, int):
                rendered = self.render(piece, translations[piece])
                if piece in self.wrap:
                    rendered = textwrap.fill(rendered, self.wrap[piece], break_long_words=False, break_on_hyphens=False)
                out.append(rendered)
            else:
                out.append(piece)
        return "".join(out)

    def write(self, translations: list[list[Run]], out_path: Path) -> None:
        out_path.write_bytes(self.text(translations).encode(self.encoding))


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
        wrapped = len(block) > 1 and all(
            len(line) >= WRAPPED_MIN and not _PREFIX.match(line).group(1).strip() for line in block[:-1]
        ) and not _PREFIX.match(block[-1]).group(1).strip()
        if wrapped:
            doc.add_segment([Run(" ".join(line.strip() for line in block))], wrap=max(len(x) for x in block))
            doc.add_text(newline)
        else:
            for line in block:
                prefix = _PREFIX.match(line).group(1)
                doc.add_text(prefix)
                doc.add_segment([Run(line[len(prefix):])])
                doc.add_text(newline)
        i = j


def split_lines(text: str) -> tuple[list[str], str, bool]:
    """(lines without ends, the line end used, whether the text ended with one)."""
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = text.split(newline)
    ends = lines[-1] == ""
    return (lines[:-1] if ends else lines), newline, ends


def extract(path: Path) -> SlotDocument:
    text, encoding = decode_text(read_bytes(path))
    doc = SlotDocument(encoding)
    lines, newline, ends = split_lines(text)
    add_lines(doc, lines, newline)
    if not ends and doc.pieces and doc.pieces[-1] == newline:
        doc.pieces.pop()
    return doc
