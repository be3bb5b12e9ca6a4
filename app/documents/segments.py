"""Segments with inline formatting, and how a whole sentence's translation gets its formatting back.

A format module cuts a document into `Segment`s: a paragraph, a table cell, a subtitle cue. A
segment is a list of `Run`s: stretches of text with one formatting (`style`, opaque here, compared
with `==`), and atoms (`atom` set: an image, inline code, a note reference, a field), which are
kept as they are and never translated.

The driver (`translate_segments`) splits each segment into sentences, translates every distinct
sentence once, and rebuilds the segment's runs:

- The model gets the whole sentence, never fragments. A sentence with one formatting is sent as
  plain text. Otherwise the text in the sentence's dominant formatting is left bare and every other
  run and every atom inside the sentence becomes a placeholder tag: `Click <x1>here</x1> now
  <x2/>.` NLLB copies such tags most of the time.
- If the translation has exactly the tags it was given, well formed and not nested, each tag's
  words get that run's formatting and each atom goes where its tag is.
- Else, if it holds the source's tags in the source's order (as the engine keeps them: app.session.terms)
  and more, the first in-order occurrence of each is taken (a left-to-right match of the source's
  tag sequence, where a run with words closes only after some words), the other tags are removed,
  and the formatting is rebuilt from those, as long as every tagged run with visible text keeps
  some words.
- If not (tags lost, mangled, out of order, as a random test model does without constraints), the tags are removed
  and the formatting is mapped proportionally: run i of the source, which covered a share of the
  source characters, covers the same share of the translation, with cuts moved to the nearest word
  start (any character in scripts written without spaces, `NO_SPACE_SCRIPTS`, or where the
  translation has fewer words than runs); atoms go to their proportional place. Every run with
  visible text gets at least one word (or character) of the translation, so a footnote marker or a
  one-word link never vanishes; only a translation shorter than its runs leaves the last runs their
  source text. The result is always a valid document with every run and atom present, even when a
  styled word lands a word off.
- A translation with no text (empty, or only tags), or with no letter where the sentence had some
  (a random model's `0 0 0`), is not written: the sentence keeps its source.

Atoms at the very start or end of a sentence never go to the model: they are kept before or after
its translation.
"""

from __future__ import annotations

import itertools
import re
import threading
import unicodedata
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Callable, Generator, Hashable, Iterable, Iterator, Protocol, runtime_checkable

from dragoman.app.documents.sentences import is_translatable, sentence_gap, split_sentences
from dragoman.engine import NO_SPACE_SCRIPTS

_TAG = re.compile(r"<\s*(/?)\s*x\s*(\d+)\s*(/?)\s*>", re.IGNORECASE)  # as a translation may write them
PLACEHOLDER_TAG = re.compile(r"<x\d+/?>|</x\d+>")  # as `_Sentence` writes them
PLACING_SECONDS = 0.02  # how often a streamed document's translations found are built and placed
_SPACES = re.compile(r"\s+")


class Cancelled(Exception):
    """The translation was stopped (translate_batch returned None for a sentence)."""


@dataclass(eq=False)
class Run:
    text: str = ""
    style: Hashable = None  # the format's formatting key; equal keys merge
    atom: object = None  # not None: kept as is, never translated (its text is empty)


@dataclass
class Segment:
    runs: list[Run]

    @property
    def text(self) -> str:
        return "".join(r.text for r in self.runs)


def shared_depth(chain: list, open_styles: list) -> int:
    """How many outer styles a run's style chain shares with the ones open before it: a writer
    closes the others and opens the rest of the chain."""
    depth = 0
    while depth < min(len(chain), len(open_styles)) and chain[depth] == open_styles[depth]:
        depth += 1
    return depth


def merge_runs(runs: list[Run]) -> list[Run]:
    """Adjacent text runs of equal style become one; empty text runs go."""
    out: list[Run] = []
    pieces: list[list[str]] = []  # the texts of each run of `out`, joined once at the end: linear
    for run in runs:
        if run.atom is None and not run.text:
            continue
        if out and run.atom is None and out[-1].atom is None and out[-1].style == run.style:
            pieces[-1].append(run.text)
        else:
            out.append(run if run.atom is not None else Run(run.text, run.style))
            pieces.append([run.text])
    for run, texts in zip(out, pieces):
        if len(texts) > 1:
            run.text = "".join(texts)
    return out


@dataclass
class _Sentence:
    runs: list[Run]  # the sentence's runs; atoms only inside it
    dominant: Hashable
    key: str = ""  # what the model gets: plain text, or text with placeholder tags
    tagged: dict[int, Run] = field(default_factory=dict)  # tag number -> the run (or atom) it stands for

    def __post_init__(self) -> None:
        weights: dict = {}
        for run in self.runs:
            if run.atom is None:
                weights[run.style] = weights.get(run.style, 0) + len(run.text)
        self.dominant = max(weights, key=weights.__getitem__) if weights else None
        parts = []
        for run in self.runs:
            if run.atom is not None:
                self.tagged[len(self.tagged) + 1] = run
                parts.append(f"<x{len(self.tagged)}/>")
            elif run.style == self.dominant:
                parts.append(run.text)
            else:
                self.tagged[len(self.tagged) + 1] = run
                parts.append(f"<x{len(self.tagged)}>{run.text}</x{len(self.tagged)}>")
        self.key = "".join(parts)

    def rebuild(self, translation: str, target_script: str) -> tuple[list[Run], bool]:
        """The translated runs, and whether the formatting had to be placed proportionally."""
        translation = translation.strip()
        runs = self._from_tags(translation)
        if runs is None:
            return self._proportional(re.sub(r"\s{2,}", " ", _TAG.sub("", translation)).strip(), target_script), True
        return runs, False

    def _from_tags(self, translation: str) -> list[Run] | None:
        runs = self._tags_once(translation)
        if runs is None:
            in_order = self._tags_in_order(translation)
            if in_order is not None and in_order != translation:
                runs = self._tags_once(in_order)
        return runs

    def _tags_in_order(self, translation: str) -> str | None:
        """The translation with only the first occurrence of the source's tags in the source's order
        (each tag matched where it first comes after the one before, a closing tag of a run with
        words only after some), the other tags removed; None where the source's tags are not all
        there in order."""
        expected = []  # (closing, number, self-closing), in the source's order
        for number, run in self.tagged.items():
            expected += [(False, number, True)] if run.atom is not None else [(False, number, False), (True, number, False)]
        out, pos, matched, removed, opened = "", 0, 0, False, 0
        for m in _TAG.finditer(translation):
            if matched < len(expected) and (m.group(1) == "/", int(m.group(2)), m.group(3) == "/") == expected[matched]:
                closing, number, _ = expected[matched]
                # a pair that held words closes only after some (as the engine's chain has it)
                if not closing or not self.tagged[number].text.strip() or _TAG.sub("", translation[opened : m.start()]).strip():
                    matched += 1
                    opened = m.end()
                    continue
            out += _after_removed(out, translation[pos : m.start()], removed)
            pos, removed = m.end(), True
        if matched < len(expected):
            return None
        return out + _after_removed(out, translation[pos:], removed)

    def _tags_once(self, translation: str) -> list[Run] | None:
        runs: list[Run] = []
        seen: set[int] = set()
        open_tag = None
        pos = 0
        for m in _TAG.finditer(translation):
            text = translation[pos : m.start()]
            pos = m.end()
            runs.append(Run(text, self.tagged[open_tag].style if open_tag else self.dominant))
            closing, number, self_closing = m.group(1) == "/", int(m.group(2)), m.group(3) == "/"
            run = self.tagged.get(number)
            if run is None:
                return None
            if self_closing:
                if run.atom is None or number in seen or open_tag:
                    return None
                seen.add(number)
                runs.append(run)
            elif closing:
                if open_tag != number or (self.tagged[number].text.strip() and not text.strip()):
                    return None  # mismatched, or the run's words are gone
                open_tag = None
            else:
                if run.atom is not None or number in seen or open_tag:
                    return None
                seen.add(number)
                open_tag = number
        if open_tag or len(seen) != len(self.tagged):
            return None
        runs.append(Run(translation[pos:], self.dominant))
        return runs

    def _proportional(self, translation: str, target_script: str) -> list[Run]:
        texts = [r for r in self.runs if r.atom is None]
        need = [1 if r.text.strip() else 0 for r in texts]  # a run of spaces may get nothing
        spaced = target_script not in NO_SPACE_SCRIPTS
        # The first way with room for every run; in a spaced script word ends come first, even where
        # a run then gets no letter: a cut inside a word splits its formatting.
        ways = ((True, True), (True, False)) if spaced else ()
        for words, letters in (*ways, (False, True), (False, False)):
            cuts = cut_points(translation, words, letters)
            if len(cuts) - 1 >= sum(need):
                break
        weights = [len(_SPACES.sub(" ", r.text)) for r in texts]  # layout whitespace weighs one space
        ends = iter(place_cuts(cuts, weights, need, len(translation)))
        out: list[Run] = []
        start = 0
        for run in self.runs:
            if run.atom is not None:
                out.append(run)
                continue
            end = next(ends)
            piece = translation[start:end]
            if not piece.strip() and run.text.strip():
                piece = run.text  # the translation is shorter than its runs: this one keeps its words
            out.append(Run(piece, run.style))
            start = end
        return out


def _after_removed(kept: str, text: str, removed: bool) -> str:
    """`text` as it follows `kept` where a tag was `removed` between them: no second space."""
    return text.lstrip() if removed and (not kept or kept[-1].isspace()) else text


def cut_points(text: str, words: bool, letters: bool) -> list[int]:
    """Where a run may start: at word starts (else at any character but a combining mark, so a Thai
    vowel stays on its consonant), and with `letters` only where the piece before has a letter, so a
    run that had words gets words, not a lone number or dash. Always 0 and len(text)."""
    if words:
        candidates = (m.end() for m in re.finditer(r"\s+", text))
    else:
        candidates = (i for i, ch in enumerate(text) if not unicodedata.category(ch).startswith("M"))
    points = [0]
    for position in candidates:
        if 0 < position < len(text) and (not letters or is_translatable(text[points[-1] : position])):
            points.append(position)
    if letters and len(points) > 1 and not is_translatable(text[points[-1] :]):
        points.pop()  # the last piece has no letter: it joins the one before
    if text:
        points.append(len(text))
    return points


def place_cuts(points: list[int], weights: list[int], need: list[int], size: int) -> list[int]:
    """The end of each run in the translation: run i ends at the point nearest its share of the
    source, leaving at least one piece for every run in `need` after it when there are enough."""
    total = sum(weights) or 1
    last = len(points) - 1
    later = sum(need)
    ends, index, done = [], 0, 0
    for weight, required in zip(weights, need):
        done += weight
        later -= required
        share = done * size / total
        lo, hi = min(index + required, last), max(index, last - later)
        wanted = bisect_left(points, share)
        nearest = min((i for i in (wanted - 1, wanted) if 0 <= i <= last), key=lambda i: (abs(points[i] - share), i))
        index = max(min(nearest, hi), lo)  # lo wins only when there is not room for every run
        ends.append(points[index])
    if ends:
        ends[-1] = size
    return ends


def _clip(runs_at: list[tuple[int, Run]], offsets: list[int], start: int, end: int, atoms_from: int, atoms_to: int) -> list[Run]:
    """Text of runs within [start, end), and atoms at offsets within [atoms_from, atoms_to].
    Only the runs near the range are looked at (`offsets`: each run's, ascending)."""
    first = max(0, bisect_left(offsets, min(start, atoms_from)) - 1)  # a run that begins before the range
    last = bisect_right(offsets, max(end, atoms_to))
    out = []
    for offset, run in runs_at[first:last]:
        if run.atom is not None:
            if atoms_from <= offset <= atoms_to:
                out.append(run)
        else:
            a, b = max(start, offset), min(end, offset + len(run.text))
            if a < b:
                out.append(Run(run.text[a - offset : b - offset], run.style))
    return out


def _plan(segment: Segment, source_script: str) -> list[list[Run] | _Sentence]:
    """The segment as verbatim gaps (lists of runs) and sentences to translate."""
    runs_at, offset = [], 0
    for run in segment.runs:
        runs_at.append((offset, run))
        offset += len(run.text) if run.atom is None else 0
    offsets = [o for o, _ in runs_at]
    text = segment.text
    if not is_translatable(text):
        return [list(segment.runs)]
    pieces: list = []
    previous_end = 0
    for start, end in split_sentences(text, source_script):
        pieces.append(_clip(runs_at, offsets, previous_end, start, previous_end, start))
        pieces.append(_Sentence(merge_runs(_clip(runs_at, offsets, start, end, start + 1, end - 1)), None))
        previous_end = end
    pieces.append(_clip(runs_at, offsets, previous_end, len(text) + 1, previous_end, len(text) + 1))
    return pieces


@runtime_checkable
class StreamingTranslator(Protocol):
    """A `translate_batch` that also takes a document's distinct texts as they are planned:
    `translate_stream(texts, found)` pulls them from the iterator, whose every step plans the
    segments it needs, so that the first texts decode while the rest of the document is planned;
    it calls `found(text, translation)` as each translation is known (on any thread) and returns a
    translation of each text pulled, in order (None: stopped)."""

    def __call__(self, texts: list[str]) -> list[str | None]: ...

    def translate_stream(self, texts: Iterator[str],
                         found: Callable[[str, str], None] | None = None) -> list[str | None]: ...


def translate_segments(
    segments: Iterable[Segment],
    translate_batch: Callable[[list[str]], list[str | None]] | StreamingTranslator,
    source_script: str,
    target_script: str,
    progress: Callable[[int, int], None] | None = None,
    proportional: Callable[[str], None] | None = None,
    place: Callable[[int, list[Run]], None] | None = None,
) -> list[list[Run]]:
    """The translated runs of each segment. Each distinct sentence is translated once.

    `translate_batch(texts)` returns one translation per text (None: stopped, raises Cancelled),
    called once: on every distinct text, or with a StreamingTranslator (the app's document jobs:
    app/session/document_batch.py) on the texts as the segments are planned; `progress(done,
    total)` counts distinct sentences before and after that call (not when streamed: the total is
    not yet known). `proportional(text)` is called once for each distinct tagged sentence whose
    translation did not have exactly its tags, so that its formatting was placed proportionally.
    Streamed, each segment's runs are built as its translations come, while the rest decodes, and
    `place(i, runs)` gets them in order once every segment is read (`Document.place`), so that
    little is left to do after the last translation.
    """
    rebuilt = Rebuilt(target_script, proportional)
    unique: list[str] = []
    read_whole = threading.Event()

    def distinct_texts() -> Iterator[str]:
        """Each segment planned in turn, and its sentences not met before."""
        met: set[str] = set()
        for segment in segments:
            plan = _plan(segment, source_script)
            rebuilt.plans.append(plan)
            for piece in plan:
                if isinstance(piece, _Sentence) and piece.key not in met and is_translatable(piece.key):
                    met.add(piece.key)
                    unique.append(piece.key)
                    yield piece.key
        read_whole.set()

    def translated(results: list[str | None]) -> dict[str, str]:
        found = [r for r in results if r is not None]  # None: stopped
        if len(results) != len(unique) or len(found) != len(unique):
            raise Cancelled()
        if progress:
            progress(len(found), len(unique))
        return dict(zip(unique, found))

    if isinstance(translate_batch, StreamingTranslator):
        texts = distinct_texts()
        alongside = PlacingAlongside(rebuilt, read_whole, place)
        try:
            translations = translated(translate_batch.translate_stream(texts, alongside.found))
            if next(texts, None) is not None:  # it stopped pulling: stopped
                raise Cancelled()
        finally:
            alongside.close()
    else:
        for _ in distinct_texts():
            pass
        if progress:
            progress(0, len(unique))
        translations = translated(translate_batch(unique))
    rebuilt.translations.update(translations)
    rebuilt.build_ready(every=True)
    return rebuilt.out


class Rebuilt:
    """The segments' translated runs (`out`), built in order from their plans (`plans`, as
    planned) and their sentences' translations (`translations`, as they come)."""

    def __init__(self, target_script: str, proportional: Callable[[str], None] | None):
        self.target_script, self.proportional = target_script, proportional
        self.plans: list[list[list[Run] | _Sentence]] = []
        self.translations: dict[str, str] = {}
        self.out: list[list[Run]] = []
        self.placed_proportionally: set[str] = set()

    def build_ready(self, every: bool = False) -> None:
        """The runs of the next plans whose sentences are all translated (`every`: of all the
        plans; a sentence with no translation keeps its source)."""
        plans, translations = self.plans, self.translations
        while len(self.out) < len(plans):
            plan = plans[len(self.out)]
            if not every and any(isinstance(piece, _Sentence) and piece.key not in translations
                                 and is_translatable(piece.key) for piece in plan):
                return
            self.out.append(self.runs(plan))

    def runs(self, plan: list[list[Run] | _Sentence]) -> list[Run]:
        target_script = self.target_script
        runs: list[Run] = []
        for index, piece in enumerate(plan):
            if isinstance(piece, _Sentence):
                translation = self.translations.get(piece.key, "")
                if is_translatable(_TAG.sub("", translation)):
                    sentence_runs, by_proportion = piece.rebuild(translation, target_script)
                    runs.extend(sentence_runs)
                    if by_proportion and piece.tagged and piece.key not in self.placed_proportionally:
                        self.placed_proportionally.add(piece.key)
                        if self.proportional is not None:
                            self.proportional(piece.key)
                else:  # no letters (a stray number between sentences), or an empty translation: as it was
                    runs.extend(piece.runs)
            elif 0 < index < len(plan) - 1:  # between two sentences: the target script's spacing
                gap = "".join(r.text for r in piece if r.atom is None)
                style = next((r.style for r in piece if r.atom is None), None)
                if style is None:  # no source gap (e.g. Chinese): the previous sentence's formatting
                    style = next((r.style for r in reversed(runs) if r.atom is None), None)
                runs.extend([r for r in piece if r.atom is not None] + [Run(sentence_gap(gap, target_script), style)])
            else:
                runs.extend(piece)
        return merge_runs(runs)


class PlacingAlongside:
    """A streamed document's segments built (`Rebuilt.build_ready`) on a thread of their own as
    their translations are `found`, and given to `place` in order once the document is read whole
    (`read_whole`: its tree is no longer walked). `close` ends it and raises what it raised; the
    caller then builds the rest."""

    def __init__(self, rebuilt: Rebuilt, read_whole: threading.Event, place: Callable[[int, list[Run]], None] | None):
        self.rebuilt, self.read_whole, self.place = rebuilt, read_whole, place
        self.new: dict[str, str] = {}
        self.lock = threading.Lock()
        self.closed = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True, name="dragoman-placing")
        self.thread.start()

    def found(self, text: str, translation: str) -> None:
        with self.lock:
            self.new[text] = translation

    def close(self) -> None:
        self.closed.set()
        self.thread.join()
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        rebuilt, placed = self.rebuilt, 0
        try:
            # Woken at most every PLACING_SECONDS, not for each translation: the engine's thread needs the interpreter.
            while not self.closed.wait(PLACING_SECONDS):
                with self.lock:
                    new, self.new = self.new, {}
                rebuilt.translations.update(new)
                rebuilt.build_ready()
                if self.place is not None and self.read_whole.is_set():
                    for index in range(placed, len(rebuilt.out)):
                        if self.closed.is_set():
                            return
                        self.place(index, rebuilt.out[index])
                    placed = len(rebuilt.out)
        except BaseException as e:
            self.error = e


class Document:
    """What a format module extracted: the segments to translate, and how to write translations back.

    `write` puts `translations[i]` (the runs of segment i) in segment i's place and writes the whole
    document to `out_path` (a temporary file: the caller renames it).
    """

    segments: list[Segment]
    notes: tuple[str, ...] = ()  # what was assumed reading it or changed writing it (an encoding), a line each

    def segment_stream(self) -> Iterable[Segment]:
        """The segments, as the document is read where it reads them on demand (a PDF's pages):
        `write` comes once all are read."""
        return self.segments

    def place(self, index: int, runs: list[Run]) -> None:
        """Segment `index`'s runs, given in order once every segment is read, while the rest of the
        document decodes: a format that can puts them in place now, so that `write`, which still
        gets every segment's runs, has less left to do after the last translation."""

    def write(self, translations: list[list[Run]], out_path) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class ReadAsAsked(Document):
    """A document whose segments are read as they are asked for: `segment_stream` gives each as
    `_read_segments` finds it, so that the first sentences are translated while the rest is read;
    `segments` reads them all. `write` comes once all are read."""

    def __init__(self) -> None:
        self._read: list[Segment] = []
        self._reading = self._stream()

    @property
    def segments(self) -> list[Segment]:  # type: ignore[override]
        for _ in self._reading:
            pass
        return self._read

    def segment_stream(self) -> Iterator[Segment]:
        return itertools.chain(list(self._read), self._reading)

    def _read_segments(self) -> Generator[Segment, None, None]:
        raise NotImplementedError

    def _stream(self) -> Generator[Segment, None, None]:
        reading = self._read_segments()
        try:
            for segment in reading:
                self._read.append(segment)
                yield segment
        finally:
            reading.close()  # closed early (a stop): what the reading holds is let go now
