"""Subtitle cues as the translation sees them: a sentence that runs across cues is translated once,
as one sentence, and each cue gets its share of the translation back; then each cue's reading
speed and line length are checked.

A cue runs on into the next (`continues`) when it does not end a sentence and the next goes on
with it, as Subtitle Edit's auto-translation merges lines (its `MergeAndSplitHelper`):

- the cue's text does not end with sentence-final punctuation (`.!?…` and the other scripts'
  marks, `。！？`, a closing quote or bracket after them, `♪`), and the next does not start with a
  capital letter (scripts without case always go on); or the cue ends with an ellipsis and the
  next starts with one or in lower case ("I was going to..." / "...the market");
- the next cue starts when this one ends or at most `MAX_GAP_SECONDS` later (Subtitle Edit's
  `MaxGapBetweenContinuousLinesMs`, one second); overlapping cues (two on screen at once) never run on;
- both have the same speaker: the same WebVTT voice (`<v Ann>`), the same ASS style and actor.
  Dialogue cues (every line a dash) and cues without letters (`♪ ♪`) never run on;
- at most `MAX_RUN_ON_CUES` cues run on together, so that a file without punctuation (captions
  made by speech recognition) never becomes one sentence.

The cues of a run-on are one segment: their runs joined with a space (none between two characters
of a script written without spaces) and a `CueBoundary` atom before each cue after the first. The
boundaries are atoms like an image or a note reference (app.documents.segments): inside a sentence
each reaches the model as a placeholder tag (`I went to the <x1/> market.`) that the engine must
write back in order (app.session.terms), and the translation is cut where the model put them. Where
that leaves a cue without a letter (where it had one) or digit, or with fewer characters than it has lines, or the
marks came back out of order (a stand-in translator), the translation is shared out by the source
cues' lengths instead, at word starts (between characters in scripts without spaces), as
app.documents.segments places formatting when marks are lost; the document's notes count those
sentences. A share the translation is too short to give keeps its source cue's text.

Each cue's text is then put on as many lines as the source cue had (the format's `lines_of`):
the line count is kept whatever the model returns, so lines are as balanced as the count allows.
Timings are never changed. The document's notes say in one line how many translated cues are read
faster than `MAX_CPS` characters per second or have a line longer than `MAX_LINE_CHARS` characters,
with Chinese and Japanese cues held to `MAX_CPS_CJK` and `MAX_LINE_CHARS_CJK` (the values of
Subtitle Edit's Netflix quality check for adult programmes; characters counted as Subtitle Edit
does: tags and line breaks not counted, a combining mark not counted apart from its letter).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Callable, Hashable

from dragoman.app.documents.segments import Run, Segment, cut_points, place_cuts
from dragoman.app.documents.sentences import UNSPACED_CHARACTER
from dragoman.app.documents.text import OwnPiece, SlotDocument

MAX_GAP_SECONDS = 1.0
MAX_RUN_ON_CUES = 4
MAX_LINE_CHARS = 42
MAX_LINE_CHARS_CJK = 16
MAX_CPS = 17
MAX_CPS_CJK = 9

_CLOSERS = "\"'”’»)]}」』）】〉》"
_OPENERS = "\"'“‘«([{「『（【〈《¿¡"
_SENTENCE_END = re.compile(rf"[.!?…։؟۔।॥።፧။។།。！？．｡♪][{re.escape(_CLOSERS)}]*$")
_ELLIPSIS_END = re.compile(rf"(?:\.\.\.|…)[{re.escape(_CLOSERS)}]*$")
_ELLIPSIS_START = re.compile(rf"^[{re.escape(_OPENERS)}]*(?:\.\.\.|…)")
_TIMESTAMP = re.compile(r"(?:(\d+):)?(\d{1,2}):(\d{2})[,.](\d{1,3})")
_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


@dataclass
class Cue:
    """One cue as read: its source text lines, its text as runs (the segment it is alone), its
    visible text (lines joined, tags left out), when it shows in seconds (None: a timing that
    cannot be read) and who speaks it."""

    lines: list[str]
    runs: list[Run]
    visible: str
    start: float | None
    end: float | None
    speaker: Hashable = None


@dataclass(frozen=True)
class CueBoundary:
    """The atom where cue `cue` of a run-on starts (the first cue has none)."""

    cue: int


def cue_times(timing: str) -> tuple[float | None, float | None]:
    """(start, end) in seconds of a timing line or of two ASS time fields joined (None, None if unreadable)."""
    found = _TIMESTAMP.findall(timing)
    if len(found) < 2:
        return None, None
    start, end = ((int(h or 0) * 3600 + int(m) * 60 + int(s) + int(frac) / 10 ** len(frac)) for h, m, s, frac in found[:2])
    return start, end


def _first_letter(text: str) -> str:
    return next((ch for ch in text if ch.isalpha()), "")


def continues(cue: Cue, following: Cue) -> bool:
    """Whether `cue`'s sentence runs on into `following` (see the module docstring)."""
    if cue.start is None or cue.end is None or following.start is None:
        return False
    if not 0 <= following.start - cue.end <= MAX_GAP_SECONDS or cue.speaker != following.speaker:
        return False
    text, next_text = cue.visible.rstrip(), following.visible.lstrip()
    next_letter = _first_letter(next_text)
    if _ELLIPSIS_END.search(text):
        return bool(_ELLIPSIS_START.match(next_text)) or next_letter.islower()
    if _SENTENCE_END.search(text):
        return False
    return bool(_ELLIPSIS_START.match(next_text)) or not next_letter.isupper()


def joined_runs(cues: list[Cue]) -> list[Run]:
    """The runs of a run-on's cues as one segment, a CueBoundary atom before each cue after the first
    with a space on either side (none where both sides are written without spaces)."""
    runs = list(cues[0].runs)
    for number, (before, cue) in enumerate(zip(cues, cues[1:]), 1):
        unspaced = UNSPACED_CHARACTER.match(before.visible.rstrip()[-1:]) and UNSPACED_CHARACTER.match(cue.visible.lstrip()[:1])
        space = "" if unspaced else " "
        last_style = next((r.style for r in reversed(runs) if r.atom is None), None)
        first_style = next((r.style for r in cue.runs if r.atom is None), None)
        runs += [Run(space, last_style), Run("", atom=CueBoundary(number)), Run(space, first_style), *cue.runs]
    return runs


def _visible(runs: list[Run]) -> str:
    return "".join(r.text for r in runs if r.atom is None)


def _shows(text: str, cue: Cue) -> bool:
    """Whether a share has something to show in place of the cue: a letter where the cue had one
    (a random model's `0 0 0` is no translation, as in app.documents.segments), else a letter or digit."""
    if any(ch.isalpha() for ch in cue.visible):
        return any(ch.isalpha() for ch in text)
    return any(ch.isalnum() for ch in text)


def _enough(part: list[Run], cue: Cue) -> bool:
    """A share a cue can show, with a character for each of its lines."""
    text = _visible(part).strip()
    return _shows(text, cue) and len(text) >= len(cue.lines)


def _cut_at_marks(runs: list[Run], count: int) -> list[list[Run]] | None:
    """The runs cut at the CueBoundary atoms, if each is there once and in order."""
    parts: list[list[Run]] = [[]]
    for run in runs:
        if isinstance(run.atom, CueBoundary):
            if run.atom.cue != len(parts):
                return None
            parts.append([])
        else:
            parts[-1].append(run)
    return parts if len(parts) == count else None


def _cut_by_length(runs: list[Run], cues: list[Cue]) -> list[list[Run]]:
    """The runs (boundaries left out) cut in shares of the source cues' lengths, at word starts, or
    between characters in text written without spaces or with too few words."""
    runs = [r for r in runs if not isinstance(r.atom, CueBoundary)]
    text = _visible(runs)
    need = [len(cue.lines) for cue in cues]
    spaced = not UNSPACED_CHARACTER.search(text)
    for words, letters in ((spaced, True), (False, True), (False, False)):  # the first with enough room
        points = cut_points(text, words, letters)
        if len(points) - 1 >= sum(need):
            break
    ends = place_cuts(points, [len(cue.visible) for cue in cues], need, len(text))
    parts: list[list[Run]] = [[] for _ in cues]
    part, offset = 0, 0
    for run in runs:
        if run.atom is not None:  # an atom at a cut starts the next share
            while part < len(ends) - 1 and offset >= ends[part]:
                part += 1
            parts[part].append(run)
            continue
        position = 0
        while position < len(run.text):
            while part < len(ends) - 1 and offset >= ends[part]:
                part += 1
            take = len(run.text) - position if part == len(ends) - 1 else min(len(run.text) - position, ends[part] - offset)
            parts[part].append(Run(run.text[position : position + take], run.style))
            position += take
            offset += take
    return parts


def cue_shares(runs: list[Run], cues: list[Cue]) -> tuple[list[list[Run]], bool]:
    """Each cue's share of a run-on's translated runs, and whether it was shared out by length
    (the marks missing, out of order, or leaving a cue too little); a share too short to show
    is its cue's source runs."""
    if len(cues) == 1:
        return [runs], False
    parts = _cut_at_marks(runs, len(cues))
    by_length = parts is None or not all(_enough(part, cue) for part, cue in zip(parts, cues))
    if parts is None or by_length:
        parts = _cut_by_length(runs, cues)
    return [_trimmed(part) if _shows(_visible(part), cue) else cue.runs for part, cue in zip(parts, cues)], by_length


def _trimmed(runs: list[Run]) -> list[Run]:
    """The runs without the spaces at the start of the first text and the end of the last (where a
    cue met the next: they would end up inside its tags)."""
    texts = [i for i, run in enumerate(runs) if run.atom is None]
    runs = list(runs)
    if texts:
        runs[texts[0]] = Run(runs[texts[0]].text.lstrip(), runs[texts[0]].style)
        runs[texts[-1]] = Run(runs[texts[-1]].text.rstrip(), runs[texts[-1]].style)
    return runs


class ReadingSpeed:
    """Counts of translated cues read too fast or with lines too long (see the module docstring)."""

    def __init__(self) -> None:
        self.cues = 0
        self.too_fast = 0
        self.too_fast_in_source = 0
        self.too_long = 0

    @staticmethod
    def characters(line: str) -> int:
        return sum(1 for ch in line if not unicodedata.category(ch).startswith(("M", "C")))

    @staticmethod
    def is_cjk(lines: list[str]) -> bool:
        letters = [ch for line in lines for ch in line if ch.isalpha()]
        return sum(1 for ch in letters if _CJK.match(ch)) * 2 > len(letters)

    def too_fast_for(self, lines: list[str], cue: Cue) -> bool:
        if cue.start is None or cue.end is None or cue.end <= cue.start:
            return False
        limit = MAX_CPS_CJK if self.is_cjk(lines) else MAX_CPS
        return sum(self.characters(line.strip()) for line in lines) / (cue.end - cue.start) > limit

    def add(self, lines: list[str], source: list[str], cue: Cue) -> None:
        """A cue's translated and source lines, their tags left out."""
        self.cues += 1
        self.too_fast += self.too_fast_for(lines, cue)
        self.too_fast_in_source += self.too_fast_for(source, cue)
        limit = MAX_LINE_CHARS_CJK if self.is_cjk(lines) else MAX_LINE_CHARS
        self.too_long += any(self.characters(line.strip()) > limit for line in lines)

    def note(self) -> str | None:
        if not self.too_fast and not self.too_long:
            return None
        return (f"{self.too_fast} of {self.cues} cues read faster than {MAX_CPS} characters per second "
                f"({MAX_CPS_CJK} in Chinese and Japanese; {self.too_fast_in_source} in the source) and {self.too_long} "
                f"have a line longer than {MAX_LINE_CHARS} characters ({MAX_LINE_CHARS_CJK}): timings are kept")


@dataclass
class CueSlot(OwnPiece):
    """Where a cue's text goes: share `part` of segment `segment`'s translation (set when its run-on ends)."""

    cue: Cue
    part: int
    segment: int = -1


@dataclass
class CuePieces(OwnPiece):
    """A cue translated in pieces of its own (dialogue lines, each after its dash): text and segment indexes."""

    cue: Cue
    pieces: list[str | int] = field(default_factory=list)


class CueDocument(SlotDocument):
    """A subtitle document whose cues are read in order (`add_translated_cue`, `add_cue_in_pieces`); the
    format gives `lines_of` (a share's runs as the cue's lines, as many as its source had), `visible` (text
    without tags), `render` (a dialogue line's segment) and the `line_break` between a cue's lines."""

    def __init__(self, codec: str, bom: bytes, line_break: str, visible: Callable[[str], str]):
        super().__init__(codec, bom)
        self.line_break = line_break
        self.visible = visible
        self.run_on: list[CueSlot] = []  # the cues read whose sentence has not ended yet
        self.run_ons: dict[int, list[Cue]] = {}  # segment -> its cues

    def lines_of(self, runs: list[Run], cue: Cue) -> list[str]:
        raise NotImplementedError

    def add_translated_cue(self, cue: Cue) -> None:
        """A cue with letters: it runs on from the cues before it or starts a run-on of its own."""
        if self.run_on and (len(self.run_on) >= MAX_RUN_ON_CUES or not continues(self.run_on[-1].cue, cue)):
            self.end_run_on()
        slot = CueSlot(cue, len(self.run_on))
        self.run_on.append(slot)
        self.pieces.append(slot)

    def add_cue_in_pieces(self, cue: Cue) -> CuePieces:
        """A cue translated in pieces of its own (the caller fills them), which no sentence runs into."""
        self.end_run_on()
        slot = CuePieces(cue)
        self.pieces.append(slot)
        return slot

    def end_run_on(self) -> None:
        """The cues read so far end their sentence: they become one segment. Call before any other
        segment is added, and at the end of the document."""
        if not self.run_on:
            return
        for slot in self.run_on:
            slot.segment = len(self.segments)
        cues = [slot.cue for slot in self.run_on]
        self.run_ons[len(self.segments)] = cues
        self.segments.append(Segment(joined_runs(cues)))
        self.run_on = []

    def text(self, translations: list[list[Run]]) -> str:
        shares: dict[int, list[list[Run]]] = {}
        by_length = 0
        speed = ReadingSpeed()
        out = []
        for piece in self.pieces:
            if isinstance(piece, CueSlot):
                if piece.segment not in shares:
                    cues = self.run_ons[piece.segment]
                    shares[piece.segment], cut_by_length = cue_shares(translations[piece.segment], cues)
                    by_length += cut_by_length
                lines = self.lines_of(shares[piece.segment][piece.part], piece.cue)
                speed.add([self.visible(line) for line in lines], [self.visible(line) for line in piece.cue.lines], piece.cue)
                out.append(self.line_break.join(lines))
            elif isinstance(piece, CuePieces):
                text = "".join(p if isinstance(p, str) else self.render(p, translations[p]) for p in piece.pieces)
                lines = text.rstrip("\r\n").split(self.line_break)
                speed.add([self.visible(line) for line in lines], [self.visible(line) for line in piece.cue.lines], piece.cue)
                out.append(text)
            elif isinstance(piece, int):
                out.append(self.render(piece, translations[piece]))
            else:
                assert isinstance(piece, str)  # verbatim text: only plain text's add_lines makes Wrapped pieces
                out.append(piece)
        notes = [speed.note()]
        if by_length:
            run_ons = sum(1 for cues in self.run_ons.values() if len(cues) > 1)
            notes.append(f"{by_length} of {run_ons} sentences over several cues were shared out among their cues "
                         "by length: the model's cue marks were missing or left a cue too little")
        self.notes += tuple(note for note in notes if note is not None and note not in self.notes)
        return "".join(out)
