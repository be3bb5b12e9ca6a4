"""SubRip (.srt) and WebVTT (.vtt) subtitles, parsed by hand (both formats are a few lines of rules).

Cue numbers, identifiers, timings and cue settings, and WebVTT's header, NOTE, STYLE and REGION
blocks are kept verbatim. A cue's text lines are one segment (joined with spaces) and its
translation is wrapped back onto as many lines as it had. Inline tags (`<i>`, `<b>`, `<u>`,
`<font color>`, WebVTT `<c.class>`, `<v Speaker>`, `<lang>`, `<ruby>`) are formatting carried
onto the translation; WebVTT timestamp tags are atoms.
"""

from __future__ import annotations

import re
from pathlib import Path

from app.documents.safety import DocumentError
from app.documents.segments import Run, shared_depth
from app.documents.text import SlotDocument, read_text, split_lines

EXTENSIONS = (".srt", ".vtt")
_TIMING = re.compile(r"\d{1,2}:\d{2}(?::\d{2})?[,.]\d{1,3}\s*-->\s*\d{1,2}:\d{2}(?::\d{2})?[,.]\d{1,3}")
_TAG = re.compile(r"<(/?)([a-zA-Z]+)?([^>]*)>|<(\d{1,2}:\d{2}(?::\d{2})?\.\d{3})>")


def parse_tags(text: str) -> list[Run]:
    """Cue text as runs whose style is the tuple of open tags."""
    runs, stack, pos = [], [], 0
    for m in _TAG.finditer(text):
        if m.start() > pos:
            runs.append(Run(text[pos : m.start()], tuple(stack)))
        pos = m.end()
        if m.group(4):  # a timestamp
            runs.append(Run("", tuple(stack), atom=m.group(0)))
        elif m.group(1):  # closing
            name = m.group(2) or ""
            for i in range(len(stack) - 1, -1, -1):
                if stack[i][0] == name:
                    del stack[i:]
                    break
        else:
            stack.append((m.group(2) or "", m.group(0)))
    if pos < len(text):
        runs.append(Run(text[pos:], tuple(stack)))
    return runs


def render_tags(runs: list[Run]) -> str:
    out, open_tags = [], []
    for run in runs:
        chain = list(run.style or ())
        depth = shared_depth(chain, open_tags)
        for name, _ in reversed(open_tags[depth:]):
            out.append(f"</{name}>")
        for _, opening in chain[depth:]:
            out.append(opening)
        open_tags = chain
        out.append(run.atom if run.atom is not None else run.text)
    out.extend(f"</{name}>" for name, _ in reversed(open_tags))
    return "".join(out)


def rewrap(text: str, lines: int) -> list[str]:
    """Cut `text` at spaces into `lines` lines of about equal length (outside tags)."""
    out = []
    for remaining in range(lines, 1, -1):
        spaces = [m.start() for m in re.finditer(r" ", text) if "<" not in text[: m.start()].rsplit(">", 1)[-1]]
        if not spaces:
            break
        target = len(text) / remaining
        cut = min(spaces, key=lambda s: abs(s - target))
        out.append(text[:cut])
        text = text[cut + 1 :]
    return out + [text]


class SubtitleDocument(SlotDocument):
    def __init__(self, codec: str, bom: bytes, newline: str):
        super().__init__(codec, bom)
        self.newline = newline
        self.line_counts: dict[int, int] = {}

    def render(self, index: int, runs: list[Run]) -> str:
        return self.newline.join(rewrap(render_tags(runs), self.line_counts[index]))


def extract(path: Path) -> SubtitleDocument:
    text, codec, bom = read_text(path)
    lines, newline, ends = split_lines(text)
    vtt = path.suffix.lower() == ".vtt"
    if vtt and not (lines and lines[0].lstrip("\ufeff").startswith("WEBVTT")):
        raise DocumentError("not a WebVTT file (it does not start with WEBVTT)")
    doc = SubtitleDocument(codec, bom, newline)
    cues = 0
    i = 0
    while i < len(lines):
        j = i
        while j < len(lines) and lines[j].strip():
            j += 1
        block = lines[i:j]
        timing = next((k for k, line in enumerate(block) if "-->" in line), None)
        if timing is not None and _TIMING.search(block[timing]) and not (vtt and block[0].startswith(("NOTE", "STYLE", "REGION"))):
            cues += 1
            doc.add_text("".join(line + newline for line in block[: timing + 1]))
            cue = block[timing + 1 :]
            if cue:
                doc.line_counts[len(doc.segments)] = len(cue)
                doc.add_segment(parse_tags(" ".join(line.strip() for line in cue)))
                doc.add_text(newline)
        else:
            doc.add_text("".join(line + newline for line in block))
        while j < len(lines) and not lines[j].strip():
            doc.add_text(lines[j] + newline)
            j += 1
        i = j
    if not cues:
        raise DocumentError(f"not a {'WebVTT' if vtt else 'SubRip'} file (no cue timings found)")
    if not ends and doc.pieces and doc.pieces[-1] == newline:
        doc.pieces.pop()
    return doc
