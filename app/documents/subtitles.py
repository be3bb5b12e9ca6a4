"""SubRip (.srt), WebVTT (.vtt) and ASS/SSA (.ass, .ssa) subtitles, parsed by hand (each is a few lines of rules).

Cue numbers, identifiers, timings and cue settings (`align:start position:0%`), and WebVTT's header,
NOTE, STYLE and REGION blocks are kept verbatim. A line with a timing starts a cue even where no
blank line comes before it (captions downloaded from video sites): the line before it is that
cue's identifier only at the start of a block, or when it is a SubRip cue number.

A cue's text lines are one segment, and a sentence that runs on across cues (no sentence end, the
next cue going on within a second, same speaker, at most four cues) is one segment for them all,
each cue's share cut where the model put the cue marks or else by length (app.documents.subtitle_cues,
which also notes cues read too fast or with lines too long; timings are never changed). Each
cue's translation is wrapped back onto as many lines as it had, of about equal length: at spaces,
or between characters in scripts written without spaces (Chinese, Japanese, Thai...), inside a
word only where the translation has fewer words than the cue had lines (never before a combining
mark); a line end in the translation is a space. A cue keeps its line count whatever the model
returns: one whose translation has fewer characters than lines keeps its source lines. Dialogue
cues, every line starting with a dash, are translated line by line. Inline tags (`<i>`, `<b>`,
`<u>`, `<font color>`, WebVTT `<c.class>`, `<v Speaker>`, `<lang>`, `<ruby>`) are formatting
carried onto the translation; WebVTT timestamp tags (karaoke, `<00:19.000>`) are atoms.

In an ASS/SSA script only the text field of the [Events] section's Dialogue lines is translated
(styles, comments, timings and the other fields are kept; a sentence runs on across Dialogue lines
of one style and actor); its `\\N` line breaks are kept in number as a cue's lines are, and
override blocks (`{\\i1}`, `{\\pos(10,20)}`, karaoke `{\\k20}`) hard spaces (`\\h`) and soft
breaks (`\\n`) are atoms.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from typing import Hashable, cast

from dragoman.app.documents.safety import DocumentError
from dragoman.app.documents.segments import Run, shared_depth
from dragoman.app.documents.sentences import UNSPACED_CHARACTER
from dragoman.app.documents.subtitle_cues import Cue, CueDocument, cue_times
from dragoman.app.documents.text import read_text, split_lines

EXTENSIONS = (".srt", ".vtt", ".ass", ".ssa")
_TIMING = re.compile(r"\d{1,2}:\d{2}(?::\d{2})?[,.]\d{1,3}\s*-->\s*\d{1,2}:\d{2}(?::\d{2})?[,.]\d{1,3}")
# A tag holds no `<` and its name takes all its letters: each `<` is scanned at most to the next
# one, so an unclosed `<` (or thousands) costs linear time, not quadratic.
_TAG = re.compile(r"<(\d{1,2}:\d{2}(?::\d{2})?\.\d{3})>|<(/?)([a-zA-Z]*)((?![a-zA-Z])[^<>]*)>")
_CLOSING_TAG = re.compile(r"</[^<>]*>")
_DIALOGUE = re.compile(r"^(\s*[-–—]\s*)")
# ASS override blocks (holding no `{`, so that an unclosed one costs linear time), hard spaces and
# soft breaks: kept where they are
_ASS_CODE = re.compile(r"\{[^{}]*\}|\\[hn]")
_ASS_LINE_BREAK = "\\N"
_LINE_END = re.compile(r"[\r\n\v\f\x85\u2028\u2029]+")
_NO_LINE_START = set("、。，．！？：；）」』】〉》〕…・ー")  # CJK punctuation that never begins a line
_NO_LINE_END = set("（「『【〈《〔")


def parse_tags(text: str) -> list[Run]:
    """Cue text as runs whose style is the tuple of open tags."""
    runs: list[Run] = []
    stack: list[tuple[str, str]] = []  # the open tags: (name, the tag as written)
    pos = 0
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


def _as_written(run: Run) -> str:
    """A run's text, or its atom: in subtitles a tag, timestamp or override code as written."""
    assert run.atom is None or isinstance(run.atom, str)  # (cue boundaries are gone once shared out)
    return run.atom if run.atom is not None else run.text


def render_tags(runs: list[Run]) -> str:
    out: list[str] = []
    open_tags: list[tuple[str, str]] = []
    for run in runs:
        chain = list(cast(tuple, run.style) or ())  # this format's styles are chains of tags
        depth = shared_depth(chain, open_tags)
        for name, _ in reversed(open_tags[depth:]):
            out.append(f"</{name}>")
        for _, opening in chain[depth:]:
            out.append(opening)
        open_tags = chain
        out.append(_as_written(run))
    out.extend(f"</{name}>" for name, _ in reversed(open_tags))
    return "".join(out)


def _breaks(text: str, tag: re.Pattern, anywhere: bool = False) -> list[tuple[int, int, int]]:
    """Where `text` (cue text with tags) may break: (cut start, cut end, visible characters before);
    with `anywhere`, between any two visible characters but before a combining mark."""
    visible: list[int] = []  # the index of each character outside tags
    pos = 0
    for m in list(tag.finditer(text)) + [None]:
        end = m.start() if m else len(text)
        visible.extend(range(pos, end))
        pos = m.end() if m else pos
    spaces = [(i, i + 1, k) for k, i in enumerate(visible) if text[i] == " "]
    if not UNSPACED_CHARACTER.search(text) and not anywhere:
        return spaces
    between = []
    for k in range(1, len(visible)):
        before, after = text[visible[k - 1]], text[visible[k]]
        if " " in (before, after) or unicodedata.category(after).startswith("M"):
            continue
        if anywhere or (
            (UNSPACED_CHARACTER.match(before) or UNSPACED_CHARACTER.match(after))
            and after not in _NO_LINE_START and before not in _NO_LINE_END
        ):
            cut = visible[k - 1] + 1
            while (closing := _CLOSING_TAG.match(text, cut)) is not None:  # closing tags end the line, opening ones start the next
                cut = closing.end()
            between.append((cut, cut, k))
    return sorted(spaces + between)


def rewrap(text: str, lines: int, tag: re.Pattern = _TAG) -> list[str]:
    """`text` cut into `lines` lines of about equal visible length (see the module docstring);
    `tag`: what is not visible (WebVTT and SubRip tags, or ASS override blocks). Fewer lines only
    where it has fewer visible characters than `lines`."""
    text = " ".join(part.strip(" \t") for part in _LINE_END.split(text.strip()))  # a line end the model wrote would add a line
    breaks = _breaks(text, tag)
    if len(breaks) < lines - 1:  # fewer words than lines: a word is cut
        breaks = _breaks(text, tag, anywhere=True)
    total = len(tag.sub("", text))
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


def kept_line_count(lines: list[str], source: list[str]) -> list[str]:
    """The translated lines, or the source's where the translation has too few characters to fill
    as many lines or one of its lines came out blank: a cue keeps its line count (a blank line
    would end it)."""
    return lines if len(lines) == len(source) and all(line.strip() for line in lines) else source


def join_lines(lines: list[str], tag: re.Pattern = _TAG) -> str:
    """A cue's lines as one text: a space between them, none between two characters of an unspaced script."""
    out, last = "", ""  # the text so far, and its last character outside tags
    for line in (line.strip() for line in lines):
        visible = tag.sub("", line)
        if out and not (UNSPACED_CHARACTER.match(last) and UNSPACED_CHARACTER.match(visible[:1])):
            out += " "
        out += line
        last = visible[-1:] or last
    return out


def _voice(runs: list[Run]) -> str | None:
    """The cue's WebVTT voice tag (`<v Ann>`), if it has one: who speaks it."""
    for run in runs:
        for name, opening in cast("tuple[tuple[str, str], ...]", run.style or ()):  # parse_tags' (name, tag) pairs
            if name == "v":
                return opening
    return None


class SubtitleDocument(CueDocument):
    def __init__(self, codec: str, bom: bytes, newline: str):
        super().__init__(codec, bom, newline, lambda text: _TAG.sub("", text))
        self.newline = newline
        self.cue_lines: dict[int, list[str]] = {}  # a dialogue line's segment -> its source line

    def render(self, index: int, runs: list[Run]) -> str:
        return self.newline.join(kept_line_count(rewrap(render_tags(runs), len(self.cue_lines[index])),
                                                 self.cue_lines[index]))

    def lines_of(self, runs: list[Run], cue: Cue) -> list[str]:
        return kept_line_count(rewrap(render_tags(runs), len(cue.lines)), cue.lines)

    def add_cue(self, lines: list[str], timing: str) -> None:
        """A cue's text lines (at least one) and its timing line; each line is followed by a line end."""
        text = join_lines(lines)
        visible = _TAG.sub("", text)
        start, end = cue_times(timing)
        if all(_DIALOGUE.match(line) for line in lines):
            pieces = self.add_cue_in_pieces(Cue(lines, [], visible, start, end)).pieces
            for line in lines:
                found = _DIALOGUE.match(line)
                dash = found.group(1) if found else ""  # (every line matched above)
                pieces.append(dash)
                self._add_line(line[len(dash) :], pieces)
        elif not any(ch.isalpha() for ch in visible):  # "♪ ♪", "...": as it was
            self.end_run_on()
            self.add_text("".join(line + self.newline for line in lines))
        else:
            runs = parse_tags(text)
            self.add_translated_cue(Cue(lines, runs, visible, start, end, _voice(runs)))
            self.add_text(self.newline)

    def _add_line(self, line: str, pieces: list[str | int]) -> None:
        """A dialogue line (its dash left out) as a segment of its own, unless it has no letters."""
        if any(ch.isalpha() for ch in _TAG.sub("", line)):
            self.cue_lines[len(self.segments)] = [line]
            self.add_segment(parse_tags(line), into=pieces)
            pieces.append(self.newline)
        else:
            pieces.append(line + self.newline)


class AssDocument(CueDocument):
    """An ASS/SSA script: the text field of each Dialogue line is a cue; `\\N` breaks its lines."""

    def __init__(self, codec: str, bom: bytes):
        super().__init__(codec, bom, _ASS_LINE_BREAK, lambda text: _ASS_CODE.sub("", text))

    def lines_of(self, runs: list[Run], cue: Cue) -> list[str]:
        text = "".join(_as_written(run) for run in runs)
        return kept_line_count(rewrap(text, len(cue.lines), _ASS_CODE), cue.lines)

    def add_dialogue(self, text: str, timing: str = "", speaker: Hashable = None) -> None:
        """A Dialogue line's text field, with its Start and End fields (`timing`) and its style and actor."""
        lines = text.split(_ASS_LINE_BREAK)
        joined = join_lines(lines, _ASS_CODE)
        visible = _ASS_CODE.sub("", joined)
        if not any(ch.isalpha() for ch in visible) or any(not line.strip() for line in lines):
            self.end_run_on()
            self.add_text(text)  # no words, or blank lines the translation could not keep
            return
        runs, position = [], 0
        for m in _ASS_CODE.finditer(joined):
            runs += [Run(joined[position : m.start()]), Run("", atom=m.group())]
            position = m.end()
        runs = [run for run in runs + [Run(joined[position:])] if run.text or run.atom is not None]
        self.add_translated_cue(Cue(lines, runs, visible, *cue_times(timing), speaker))


def extract_ass(path: Path) -> AssDocument:
    """An ASS/SSA script; the text is the last field of the [Events] Format (10 fields when it has none)."""
    text, codec, bom = read_text(path)
    lines, newline, ends = split_lines(text)
    doc = AssDocument(codec, bom)
    section, fields, dialogues = "", 10, 0
    names = ["layer", "start", "end", "style", "name", "marginl", "marginr", "marginv", "effect", "text"]
    for number, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            section = stripped.lower()
        elif section == "[events]" and stripped.lower().startswith("format:"):
            names = [name.strip().lower() for name in stripped.split(":", 1)[1].split(",")]
            fields = len(names)
        if section == "[events]" and line.startswith("Dialogue:") and line.count(",") >= fields - 1:
            values = line.partition(":")[2].split(",", fields - 1)
            text = values[-1].lstrip(" ")
            doc.add_text(line[: len(line) - len(text)])  # the fields before the text, and the spaces before it
            field = {name: value.strip() for name, value in zip(names, values)}
            doc.add_dialogue(text, f"{field.get('start', '')} {field.get('end', '')}",
                             (field.get("style"), field.get("name")))
            dialogues += 1
        else:
            doc.add_text(line)
        if number + 1 < len(lines) or ends:
            doc.add_text(newline)
    doc.end_run_on()
    if not dialogues:
        raise DocumentError("not an ASS/SSA script (no Dialogue lines in an [Events] section)")
    return doc


def _cue_starts(block: list[str], vtt: bool) -> list[int]:
    """The lines of a block that start a cue: its identifier if it has one, else its timing line."""
    if vtt and block[0].startswith(("NOTE", "STYLE", "REGION", "WEBVTT")):
        return []
    starts: list[int] = []
    for k, line in enumerate(block):
        if "-->" in line and _TIMING.search(line):
            previous = starts[-1] if starts else -1
            identifier = k == 1 or (k > 1 and block[k - 1].strip().isdigit() and k - 1 > previous + 1)
            starts.append(k - 1 if identifier and k - 1 > previous else k)
    return starts


def extract(path: Path) -> SubtitleDocument | AssDocument:
    if path.suffix.lower() in (".ass", ".ssa"):
        return extract_ass(path)
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
                doc.add_cue(block[timing + 1 : end], block[timing])
        while j < len(lines) and not lines[j].strip():
            doc.add_text(lines[j] + newline)
            j += 1
        i = j
    doc.end_run_on()
    if not cues:
        raise DocumentError(f"not a {'WebVTT' if vtt else 'SubRip'} file (no cue timings found)")
    if not ends and doc.pieces and doc.pieces[-1] == newline:
        doc.pieces.pop()
    return doc
