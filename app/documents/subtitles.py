"""SubRip (.srt) and WebVTT (.vtt) subtitles, parsed by hand (both formats are a few lines of rules).

Cue numbers, identifiers, timings and cue settings (`align:start position:0%`), and WebVTT's header,
NOTE, STYLE and REGION blocks are kept verbatim. A line with a timing starts a cue even where no
blank line comes before it (captions downloaded from video sites): the line before it is that
cue's identifier only at the start of a block, or when it is a SubRip cue number.

A cue's text lines are one segment and its translation is wrapped back onto as many lines as it
had, of about equal length: at spaces, or between characters in scripts written without spaces
(Chinese, Japanese, Thai...), never inside a word otherwise (so a translation of fewer words than
the cue had lines comes back on fewer lines). Dialogue cues, every line starting with a dash, are
translated line by line. Inline tags (`<i>`, `<b>`, `<u>`, `<font color>`, WebVTT `<c.class>`,
`<v Speaker>`, `<lang>`, `<ruby>`) are formatting carried onto the translation; WebVTT timestamp
tags (karaoke, `<00:19.000>`) are atoms.
"""

from __future__ import annotations

import re
from pathlib import Path

from app.documents.safety import DocumentError
from app.documents.segments import Run, shared_depth
from app.documents.sentences import UNSPACED_CHARACTER
from app.documents.text import SlotDocument, read_text, split_lines

EXTENSIONS = (".srt", ".vtt")
_TIMING = re.compile(r"\d{1,2}:\d{2}(?::\d{2})?[,.]\d{1,3}\s*-->\s*\d{1,2}:\d{2}(?::\d{2})?[,.]\d{1,3}")
_TAG = re.compile(r"<(\d{1,2}:\d{2}(?::\d{2})?\.\d{3})>|<(/?)([a-zA-Z]+)?([^>]*)>")
_DIALOGUE = re.compile(r"^(\s*[-–—]\s*)")
_NO_LINE_START = set("、。，．！？：；）」』】〉》〕…・ー")  # CJK punctuation that never begins a line
_NO_LINE_END = set("（「『【〈《〔")


def parse_tags(text: str) -> list[Run]:
    """Cue text as runs whose style is the tuple of open tags."""
    runs, stack, pos = [], [], 0
    for m in _TAG.finditer(text):
        if m.start() > pos:
            runs.append(Run(text[pos : m.start()], tuple(stack)))
        pos = m.end()
        if m.group(1):  # a timestamp
            runs.append(Run("", tuple(stack), atom=m.group(0)))
        elif m.group(2):  # closing
            name = m.group(3) or ""
            for i in range(len(stack) - 1, -1, -1):
                if stack[i][0] == name:
                    del stack[i:]
                    break
        else:
            stack.append((m.group(3) or "", m.group(0)))
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


def _breaks(text: str) -> list[tuple[int, int, int]]:
    """Where `text` (cue text with tags) may break: (cut start, cut end, visible characters before)."""
    visible: list[int] = []  # the index of each character outside tags
    pos = 0
    for m in list(_TAG.finditer(text)) + [None]:
        end = m.start() if m else len(text)
        visible.extend(range(pos, end))
        pos = m.end() if m else pos
    spaces = [(i, i + 1, k) for k, i in enumerate(visible) if text[i] == " "]
    if not UNSPACED_CHARACTER.search(text):
        return spaces
    between = []
    for k in range(1, len(visible)):
        before, after = text[visible[k - 1]], text[visible[k]]
        if (
            (UNSPACED_CHARACTER.match(before) or UNSPACED_CHARACTER.match(after)) and " " not in (before, after)
            and after not in _NO_LINE_START and before not in _NO_LINE_END
        ):
            cut = visible[k - 1] + 1
            while (closing := re.match(r"</[^>]*>", text[cut:])) is not None:  # closing tags end the line, opening ones start the next
                cut += closing.end()
            between.append((cut, cut, k))
    return sorted(spaces + between)


def rewrap(text: str, lines: int) -> list[str]:
    """`text` cut into `lines` lines of about equal visible length (see the module docstring)."""
    text = text.strip()
    breaks = _breaks(text)
    total = len(_TAG.sub("", text))
    chosen: list[tuple[int, int, int]] = []
    for line in range(1, lines):
        left = lines - line  # cuts still to make, this one included
        usable = [b for b in breaks if (not chosen or b[0] > chosen[-1][1]) and b[2] > (chosen[-1][2] if chosen else 0)]
        usable = usable[: len(usable) - left + 1] if len(usable) >= left else []
        if not usable:
            break
        target = total * line / lines
        chosen.append(min(usable, key=lambda b: abs(b[2] - target)))
    out, pos = [], 0
    for start, end, _ in chosen:
        out.append(text[pos:start].rstrip(" "))
        pos = end
    return out + [text[pos:].lstrip(" ")]


def join_lines(lines: list[str]) -> str:
    """A cue's lines as one text: a space between them, none between two characters of an unspaced script."""
    out = ""
    for line in (line.strip() for line in lines):
        if out and not (UNSPACED_CHARACTER.match(_TAG.sub("", out)[-1:]) and UNSPACED_CHARACTER.match(_TAG.sub("", line)[:1])):
            out += " "
        out += line
    return out


class SubtitleDocument(SlotDocument):
    def __init__(self, codec: str, bom: bytes, newline: str):
        super().__init__(codec, bom)
        self.newline = newline
        self.line_counts: dict[int, int] = {}

    def render(self, index: int, runs: list[Run]) -> str:
        return self.newline.join(rewrap(render_tags(runs), self.line_counts[index]))

    def add_cue(self, lines: list[str]) -> None:
        """A cue's text lines (at least one) and the line end after each."""
        if all(_DIALOGUE.match(line) for line in lines):
            for line in lines:
                dash = _DIALOGUE.match(line).group(1)
                self.add_text(dash)
                self._add_lines([line[len(dash) :]])
        else:
            self._add_lines(lines)

    def _add_lines(self, lines: list[str]) -> None:
        text = join_lines(lines)
        if not any(ch.isalpha() for ch in _TAG.sub("", text)):  # "♪ ♪", "...": as it was
            self.add_text("".join(line + self.newline for line in lines))
            return
        self.line_counts[len(self.segments)] = len(lines)
        self.add_segment(parse_tags(text))
        self.add_text(self.newline)


def _cue_starts(block: list[str], vtt: bool) -> list[int]:
    """The lines of a block that start a cue: its identifier if it has one, else its timing line."""
    if vtt and block[0].startswith(("NOTE", "STYLE", "REGION", "WEBVTT")):
        return []
    starts = []
    for k, line in enumerate(block):
        if "-->" in line and _TIMING.search(line):
            previous = starts[-1] if starts else -1
            identifier = k == 1 or (k > 1 and block[k - 1].strip().isdigit() and k - 1 > previous + 1)
            starts.append(k - 1 if identifier and k - 1 > previous else k)
    return starts


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
        starts = _cue_starts(block, vtt)
        doc.add_text("".join(line + newline for line in block[: starts[0] if starts else len(block)]))
        for n, start in enumerate(starts):
            cues += 1
            timing = next(k for k in range(start, len(block)) if "-->" in block[k])
            end = starts[n + 1] if n + 1 < len(starts) else len(block)
            doc.add_text("".join(line + newline for line in block[start : timing + 1]))
            if timing + 1 < end:
                doc.add_cue(block[timing + 1 : end])
        while j < len(lines) and not lines[j].strip():
            doc.add_text(lines[j] + newline)
            j += 1
        i = j
    if not cues:
        raise DocumentError(f"not a {'WebVTT' if vtt else 'SubRip'} file (no cue timings found)")
    if not ends and doc.pieces and doc.pieces[-1] == newline:
        doc.pieces.pop()
    return doc
