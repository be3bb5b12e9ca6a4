"""The text of PDF pages as blocks: paragraphs, headings, table cells, headers and footers, in reading order.

pdfminer.six lays the characters of each page out in lines and boxes (columns and reading order
from its box ordering); a line is cut into cells where a table's column line runs through it; a
box is cut into blocks where the font size changes, where a ruled line runs between two lines,
where a line starts indented or the one before it ends short (a paragraph's last line) or where
the line's first word would have fitted at the end of the one before (a line broken on purpose),
and before a footnote's mark. A number set apart from the rest of its line by a wide gap, or alone on
its line (a form's row number, a section number), is a block of its own, kept as it is, and the
line such a number stands just left of starts a block (a form's numbered rows). A block's
lines are joined into one text (a hyphen at a line end joins the word), so a sentence that runs
across lines is translated whole.

Each character remembers which text-showing operator of the page's content stream drew it (the
n-th `Tj`/`TJ`/`'`/`"` of the page) and which glyph of it, so the writer can remove a block's text.
A block is kept as it is (not translated) when it has no letters, is a URL, is code (monospaced),
is set in math fonts, has characters whose text the PDF does not give (no ToUnicode), is not
upright, is drawn as a clipping path (or invisibly, unless over a scan: pdf.py), or shares an
operator it cannot be cut out of with a kept block. List markers and a table of contents' leaders
stay out of the translation. Text inside form XObjects is moved onto the page before it is read
(app.documents.pdf_forms); what is left in a form is not seen here and stays untouched. A translated block remembers the
embedded font program its letters of each style are drawn in (`SourceFont`), for the writer.

What pdfminer is asked to do is bounded (`ReadingBudget`): the operators and operands a page's
content runs (its form XObjects' too, each time it is drawn), the glyphs it shows, how deeply it
saves the graphics state, and the operators and glyphs of the whole document, since pdfminer's
time and memory grow with each (docs/documents.md): a hostile page (one `Tj` of ten million
glyphs, minutes of drawing operators) is refused as soon as it passes a bound.
"""

from __future__ import annotations

import collections
import io
import multiprocessing
import os
import re
import statistics
import threading
import weakref
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Iterator, Mapping

from dragoman.app.documents.safety import DocumentError
from dragoman.app.documents.segments import Run, merge_runs
from dragoman.app.documents.sentences import is_translatable

if TYPE_CHECKING:  # pdfminer is imported when a PDF is read, not when the app starts
    from pdfminer.layout import LTChar, LTComponent
    from pdfminer.pdffont import PDFFont

SHOW_OPERATORS = ("Tj", "TJ", "'", '"')
SIZE_CHANGE = 1.15  # lines whose sizes differ by this factor are in different blocks (a heading and its text)
LINE_ABOVE, LINE_BELOW = 1.0, 0.35  # sizes a line's box reaches above and below its baseline at most
SHORT_LINE = 0.8  # a line shorter than this share of its block's width ends a paragraph
MATH_FONT = re.compile(r"CMMI|CMSY|CMEX|MSBM|MSAM|Math|Symbol|STIX", re.IGNORECASE)
URL = re.compile(r"^\s*(?:https?://|www\.|mailto:)\S+\s*$|^\s*\S+@\S+\.\w+\s*$", re.IGNORECASE)
BOLD_NAME = re.compile(r"bold|black|heavy|semibold|demi|CMBX|CMB\d", re.IGNORECASE)
ITALIC_NAME = re.compile(r"ital|oblique|CMTI|CMSL", re.IGNORECASE)
SERIF_FONT = re.compile(r"times|serif|georgia|garamond|palatino|minion|cambria|antiqua|caslon|baskerville|century|"
                        r"charter|utopia|bookman|bodoni|CMR\d|CMBX|CMTI|LMRoman|Nimbus ?Rom|Tinos", re.IGNORECASE)
MONO_FONT = re.compile(r"courier|mono|CMTT|consol|menlo|typewriter", re.IGNORECASE)
LEADER = re.compile(r"\s*(?:\.\s*){3,}\s*[\dIVXLCivxlc]+\s*$")  # a table of contents' dots and page number, kept
BULLET = re.compile(r"^([•▪◦‣●■□–*-]|\d{1,3}[.)]|[a-z][.)])\s")  # a list item's marker, kept out of the translation
# a row, item or section number: 7, 8a, 2.1, 3), (iv), a.
NUMBER = re.compile(r"\d{1,4}[a-z]?(?:\.\d{1,3})*[.)]?|\(?(?:\d{1,4}|[ivxIVX]{1,5}|[a-zA-Z])[.)]")
TURNED = 0.02  # a glyph's baseline rising more than this per unit across is turned (1.1 degrees), not upright
WORD_GAP = 0.15  # ems between two characters that make them two words
SPACE = 0.3  # ems: a usual word space
NUMBER_GAP = 0.6  # ems after a leading number that set it apart as a cell of its own
FIT_SLACK = 1.0  # ems more than a word and its space that a line must have had left to be broken on purpose
SUPERSCRIPT = 0.8  # a character this much smaller than its line's size, and raised, is a superscript
ROW_NUMBER_GAP = 4.5  # ems at most from a row number to its line's text (a form's check box may be between)
ROW_BASELINE = 0.3  # ems at most between a row number's baseline and its line's
MAX_PAGE_OPERATORS = 1_000_000  # operators and operands a page's content runs: a dense map page runs ~100,000
MAX_PAGE_GLYPHS = 100_000  # glyphs a page shows: a page of 6-point type shows ~15,000
MAX_SAVED_STATES = 256  # graphics states saved (`q`) and not yet restored: real pages nest a few deep
MAX_DOCUMENT_OPERATORS = 20_000_000
MAX_DOCUMENT_GLYPHS = 10_000_000  # 2,000 a page over 5,000 pages
# A process reads this many pages at least, since starting one takes ~0.5 s; at most this many read at once.
PAGES_PER_READER = 16  # a document gets a reader process for each this many pages
RANGE_PAGES = 16  # pages read at a time: each range goes on to the engine as it ends
FIRST_RANGE_PAGES = 4  # the first range's, each next twice as long up to RANGE_PAGES
MAX_READERS = 8
NO_SPACE = re.compile(r"[\u2e80-\u9fff\u3000-\u303f\uf900-\ufaff\uff00-\uffef]")


@dataclass
class Line:
    pieces: list[tuple[str, tuple[bool, bool] | None, int | None]]  # (text, style, show operator) of each character
    x0: float
    y0: float
    x1: float
    y1: float
    size: float
    baseline: float
    chars: list[LTChar] = field(default_factory=list, repr=False)  # pdfminer's characters, while the page is read
    number: bool = False  # a leading number set apart from its line (see _cells): a block of its own
    row: bool = False  # a row number of its own stands just left of it (a form's numbered rows): it starts a block
    edge: float = 0.0  # how far right the line could have run: its box's lines of its size, or the next cell's start


@dataclass
class Block:
    page: int
    lines: list[Line]
    translate: bool = True
    shows: set[int] = field(default_factory=set)  # the text-showing operators that drew it
    glyphs: set[tuple[int, int]] = field(default_factory=set)  # (operator, glyph within it) of its characters
    color: tuple = ()
    align: str = "left"  # or "right", "center", "justify"
    invisible: bool = False  # drawn invisibly (text render mode 3): a scan's OCR layer
    serif: bool = False  # most of its letters are in a serif face
    fonts: dict = field(default_factory=dict)  # (bold, italic) -> SourceFont of most of its letters in that style
    cover: tuple = ()  # RGB 0..1: read by OCR from a scan, its place is filled with this colour before its translation is set

    @property
    def bbox(self) -> tuple[float, float, float, float]:
        return (min(l.x0 for l in self.lines), min(l.y0 for l in self.lines),
                max(l.x1 for l in self.lines), max(l.y1 for l in self.lines))

    @property
    def size(self) -> float:
        return statistics.median(l.size for l in self.lines)

    @property
    def leading(self) -> float:
        """Baseline to baseline, as a multiple of the size (1.2 for one line)."""
        gaps = [a.baseline - b.baseline for a, b in zip(self.lines, self.lines[1:]) if a.baseline > b.baseline]
        return min(max(statistics.median(gaps) / self.size, 1.0), 2.0) if gaps else 1.2

    @cached_property
    def runs(self) -> list[Run]:
        """The block's text as runs (style: (bold, italic)); a list marker as an atom. Read once the
        block is complete."""
        runs: list[Run] = []
        for line in self.lines:
            line_runs: list[Run] = []
            for text, own_style, _ in line.pieces:
                before = line_runs or runs
                # a space takes the style of the text before it
                style = before[-1].style if not text.strip() and before else own_style
                line_runs.append(Run(text, style))
            runs = join_lines(runs, line_runs)
        text = "".join(r.text for r in runs)
        leader = LEADER.search(text)
        if leader and text[: leader.start()].strip():
            runs = cut_runs(runs, 0, leader.start()) + [Run("", None, atom=leader.group())]
        marker = BULLET.match(text)
        if marker and text[marker.end():].strip():
            runs = [Run("", None, atom=marker.group())] + cut_runs(runs, marker.end(), len(text))
        return merge_runs(runs)

    @property
    def text(self) -> str:
        return "".join(r.text for r in self.runs)


def join_lines(runs: list[Run], more: list[Run]) -> list[Run]:
    """Text that continues on a new line (or in the next column): a hyphen at the end joins the
    word, else a space, none between characters of scripts written without spaces."""
    if not runs or not more:
        return runs + more
    previous, text = "".join(r.text for r in runs[-3:]), more[0].text
    if re.search(r"\w-$", previous) and text[:1].islower() and runs[-1].text.endswith("-"):
        return runs[:-1] + [Run(runs[-1].text[:-1], runs[-1].style)] + more
    if NO_SPACE.match(previous[-1:]) or NO_SPACE.match(text[:1]):
        return runs + more
    return runs + [Run(" ", runs[-1].style)] + more


def continues(block: Block, after: Block) -> bool:
    """`after` goes on with the sentence `block` leaves open (in the next column, on the next page):
    no sentence end, the same size, and a lower-case start."""
    end, start = block.text.rstrip()[-1:], after.text.lstrip()[:1]
    return (bool(end) and end not in ".!?:;…。！？」』”\"’)" and start.islower()
            and abs(block.size - after.size) < 0.1 * block.size)


def cut_runs(runs: list[Run], start: int, end: int) -> list[Run]:
    """The runs' text from character `start` to `end`, and the atoms from `start` up to `end`."""
    out, offset = [], 0
    for run in runs:
        if run.atom is not None:
            if start <= offset < end:
                out.append(run)
            continue
        a, b = max(start, offset), min(end, offset + len(run.text))
        if a < b:
            out.append(Run(run.text[a - offset : b - offset], run.style))
        offset += len(run.text)
    return out


@dataclass(eq=False)
class SourceFont:
    """A TrueType, OpenType or bare CFF program a PDF font embeds, and the characters its glyphs
    draw in the PDF (from the font's ToUnicode map or encoding): the writer sets a translation in it
    again where it has a glyph for every character."""

    name: str  # the BaseFont, without a subset's tag
    program: bytes
    glyphs: dict[str, int]  # character -> glyph id (CID fonts; in a bare CFF program the CID, which names the glyph)
    codes: dict[str, int]  # character -> code, found in the program's own symbol or Mac cmap (simple fonts)
    cff: bool = False  # a bare CFF program (FontFile3 /Type1C, /CIDFontType0C), not TrueType or OpenType
    subset: bool = True  # the BaseFont has a subset's tag (ABCDEF+): glyphs left out may be there, empty


@dataclass
class Page:
    index: int
    origin: tuple[float, float]  # the media box's lower left corner: pdfminer's coordinates start there
    blocks: list[Block]
    rules: list[tuple[float, float, float, float]]  # thin lines and rectangles (table borders)
    images: int
    figures: list[tuple[float, float, float, float]]  # images and form XObjects: a grown box stops at them
    # XObjects drawn on the page itself: (resource name, box on the page, matrix), for OCR to find pictures by
    placed: list[tuple[str, tuple[float, float, float, float], tuple[float, ...]]] = field(default_factory=list)
    shows: list[tuple[bytes, ...]] = field(default_factory=list)  # each text-showing operator's strings, in order
    advances: list[float | None] = field(default_factory=list)  # and how far it moves along its line (TJ units)
    glyphs: list[list | None] = field(default_factory=list)  # and its numbers and glyphs (see _elements)


@dataclass(slots=True)
class Drawn:
    """What drew one of pdfminer's characters, which its LTChar does not keep."""

    show: int | None  # the page's n-th text-showing operator (-1: vertical or clipping text; None: a form XObject's)
    glyph: int  # the glyph within that operator
    font: PDFFont  # LTChar keeps only the font's name
    invisible: bool  # text render mode 3 or 7 (an OCR layer)


class DocumentFonts:
    """pdfminer's fonts of one document: the dictionary each was made from (a Type0 font: its
    descendant's), and the program each embeds (`SourceFont`), read once."""

    def __init__(self) -> None:
        # weak: a font pdfminer drops (one made for a name the page's resources lack) is not kept
        self.specs: weakref.WeakKeyDictionary[PDFFont, Mapping[str, object]] = weakref.WeakKeyDictionary()
        self._sources: dict[PDFFont, SourceFont | None] = {}

    def source(self, font: PDFFont) -> SourceFont | None:
        if font not in self._sources:
            self._sources[font] = _source_font(font, self.specs.get(font))
        return self._sources[font]


class ReadingBudget:
    """What pdfminer has run of the page and of the document: a DocumentError, naming the page,
    the moment a bound is passed."""

    def __init__(self):
        self.page = 0
        self.operators = self.glyphs = 0  # on the page
        self.document_operators = self.document_glyphs = 0

    def begin_page(self, index: int) -> None:
        self.page, self.operators, self.glyphs = index, 0, 0

    def operator(self) -> None:
        self.operators += 1
        self.document_operators += 1
        if self.operators > MAX_PAGE_OPERATORS:
            raise DocumentError(f"page {self.page + 1} runs over {MAX_PAGE_OPERATORS:,} drawing and text operators, "
                                "which is refused")
        if self.document_operators > MAX_DOCUMENT_OPERATORS:
            self.check_document()

    def show(self, glyphs: int) -> None:
        self.glyphs += glyphs
        self.document_glyphs += glyphs
        if self.glyphs > MAX_PAGE_GLYPHS:
            raise DocumentError(f"page {self.page + 1} shows over {MAX_PAGE_GLYPHS:,} characters, which is refused")
        if self.document_glyphs > MAX_DOCUMENT_GLYPHS:
            self.check_document()

    def check_document(self) -> None:
        """The whole document's bounds (also over ranges of pages read apart)."""
        if self.document_operators > MAX_DOCUMENT_OPERATORS:
            raise DocumentError(f"its pages run over {MAX_DOCUMENT_OPERATORS:,} drawing and text operators, which is refused")
        if self.document_glyphs > MAX_DOCUMENT_GLYPHS:
            raise DocumentError(f"its pages show over {MAX_DOCUMENT_GLYPHS:,} characters, which is refused")

    def save_state(self, depth: int) -> None:
        if depth >= MAX_SAVED_STATES:
            raise DocumentError(f"page {self.page + 1} saves the graphics state over {MAX_SAVED_STATES} times without "
                                "restoring it, which is refused")


_budgets = threading.local()  # the ReadingBudget of the document this thread reads, if any


def _counted_content_parser():
    """pdfminer's content parser counting every object it gives (an operator or an operand) against
    the reading thread's budget. pdfminer's interpreter makes its parser inside `execute`, so this
    class takes the place of the module's; a thread reading no document of ours is not counted."""
    from pdfminer import pdfinterp

    class CountedContentParser(pdfinterp.PDFContentParser):
        def nextobject(self):
            item = super().nextobject()
            budget = getattr(_budgets, "current", None)
            if budget is not None:
                budget.operator()
            return item

    if pdfinterp.PDFContentParser.__name__ != "CountedContentParser":
        setattr(pdfinterp, "PDFContentParser", CountedContentParser)  # setattr: mypy refuses an assignment to a class


def _shown_glyphs(textstate, seq) -> int:
    """The glyphs a text-showing operator draws, counted on its bytes before pdfminer decodes them
    (a composite font's codes as two bytes, as Identity-H's)."""
    from pdfminer.pdffont import PDFCIDFont

    width = 2 if isinstance(textstate.font, PDFCIDFont) else 1
    return sum(len(s) for s in seq if isinstance(s, bytes)) // width


def _style(char: LTChar, font: PDFFont, known: dict) -> tuple[bool, bool]:
    key = (id(font), char.fontname)
    if key not in known:
        known[key] = _font_style(char, font)
    return known[key]


def _font_style(char: LTChar, font: PDFFont) -> tuple[bool, bool]:
    name = char.fontname or ""
    flags = 0
    descriptor = getattr(font, "descriptor", None) or {}
    try:
        flags = int(descriptor.get("Flags", 0))
    except (TypeError, ValueError):
        pass
    return bool(BOLD_NAME.search(name) or flags & (1 << 18)), bool(ITALIC_NAME.search(name) or flags & (1 << 6))


def usable_cores() -> int:
    """The cores this process may run on: in a container or under `taskset`, fewer than the
    machine has (os.cpu_count counts the machine's)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # macOS and Windows have no affinity call
        return os.cpu_count() or 1


def read_pages(data: bytes, page_count: int = 0) -> list[Page]:
    """Every page's blocks, read from the PDF's bytes (already checked and decrypted): those of
    `read_page_ranges`, all read."""
    return [page for pages in read_page_ranges(data, page_count) for page in pages]


def read_page_ranges(data: bytes, page_count: int = 0) -> Iterator[list[Page]]:
    """Every page's blocks, read from the PDF's bytes (already checked and decrypted), a range of
    pages at a time, in order, each handed on as it is read so that its sentences can be translated
    while later pages are read. A document of `page_count` pages (the page tree's count, where
    known) is read in ranges of up to RANGE_PAGES pages by several processes at once: pdfminer is pure
    Python, so threads would take turns. Each process bounds its range as a document
    (`ReadingBudget`), and the sums are bounded again here as each range comes; a stop between
    ranges leaves the rest unread. A short document, or one on a single core, is read here, handed
    on in ranges alike (`_read_here`)."""
    readers = min(usable_cores(), MAX_READERS, page_count // PAGES_PER_READER)
    if readers < 2:
        yield from _read_here(data)
        return
    budget = ReadingBudget()
    sources = SharedSources()

    def counted(read: tuple[list[Page], int, int]) -> list[Page]:
        pages, operators, glyphs = read
        budget.document_operators += operators
        budget.document_glyphs += glyphs
        budget.check_document()
        sources.share(pages)
        return pages

    starts = [0]
    for size in range_sizes():
        if starts[-1] + size >= page_count:
            break
        starts.append(starts[-1] + size)
    stops: list[int | None] = [*starts[1:], None]  # the last range to the end, whatever the count said
    unread: int | None = 0  # the first page not yet handed on (None: none left)
    # Spawned, not forked: the app's other threads (Qt's, the engine's) hold locks a fork would copy.
    # The PDF's bytes go to each process once, as it starts, in shared memory: sent as an argument,
    # they would be written into a pipe that a process dying as it starts (a script without a main
    # guard) may never read, and that write never ends.
    context = multiprocessing.get_context("spawn")
    try:
        shared = context.RawArray("B", len(data))
    except OSError:  # no room for it in shared memory or the temporary folder
        yield from _read_here(data)
        return
    memoryview(shared).cast("B")[:] = data
    pool = ProcessPoolExecutor(readers, mp_context=context, initializer=_hold_document, initargs=(shared,))
    try:
        # pickled by our own child processes from our own classes: no file's bytes are unpickled
        for read, stop in zip(pool.map(_read_held_range, starts, stops), stops):
            yield counted(read)
            unread = stop
    except BrokenProcessPool:
        # A reader died: out of memory, or started from a script without a main guard, which a
        # spawned process runs again. The rest is read here, as in one process.
        pass
    finally:
        pool.shutdown(wait=False, cancel_futures=True)  # a stop, or a refusal, waits for no range being read
    if unread is not None:
        yield counted(_read_range(data, unread, None))


def range_sizes() -> Iterator[int]:
    """The pages of each range in turn: the first ranges shorter, so that the engine starts sooner."""
    size = min(FIRST_RANGE_PAGES, RANGE_PAGES)
    while True:
        yield size
        size = min(2 * size, RANGE_PAGES)


def _read_here(data: bytes) -> Iterator[list[Page]]:
    """Every page read in this process, handed on in ranges as long as the readers' (scanned pages
    in a range are read by OCR several at once)."""
    pages: list[Page] = []
    sizes = range_sizes()
    size = next(sizes)
    for page in _read_each(data, 0, None, ReadingBudget()):
        pages.append(page)
        if len(pages) == size:
            yield pages
            pages, size = [], next(sizes)
    if pages:
        yield pages


class SharedSources:
    """One `SourceFont` for each font program, as reading in one process gives: ranges read apart
    each made their own, and the writer embeds a face once for each it is given."""

    def __init__(self):
        self.shared: dict[tuple, SourceFont] = {}

    def share(self, pages: list[Page]) -> None:
        """The fonts of one range's blocks replaced by those met before, where the same."""
        by_id: dict[int, SourceFont] = {}  # this range's, alive while it is shared: ids are not reused meanwhile
        for page in pages:
            for block in page.blocks:
                for style, source in block.fonts.items():
                    if id(source) not in by_id:
                        key = (source.name, source.program, source.cff, source.subset, tuple(source.glyphs.items()),
                               tuple(source.codes.items()))
                        by_id[id(source)] = self.shared.setdefault(key, source)
                    block.fonts[style] = by_id[id(source)]


_held_document = b""  # in a reader process: the PDF's bytes, sent once as it starts (`_hold_document`)


def _hold_document(shared) -> None:
    """A reader process's start: the PDF's bytes copied out of the shared array (a RawArray of bytes)."""
    global _held_document
    _held_document = bytes(shared)


def _read_held_range(start: int, stop: int | None) -> tuple[list[Page], int, int]:
    """`_read_range` of the document this reader process holds."""
    return _read_range(_held_document, start, stop)


def _read_range(data: bytes, start: int, stop: int | None) -> tuple[list[Page], int, int]:
    """The blocks of pages start to stop (None: the last), and the operators and glyphs they ran."""
    budget = ReadingBudget()
    pages = list(_read_each(data, start, stop, budget))
    return pages, budget.document_operators, budget.document_glyphs


def _read_each(data: bytes, start: int, stop: int | None, budget: ReadingBudget) -> Iterator[Page]:
    """The blocks of pages start to stop (None: the last), a page at a time, each bounded by `budget`
    (which counts only while a page is read: what the thread does between pages is not the PDF's)."""
    from pdfminer.converter import PDFPageAggregator
    from pdfminer.layout import LAParams, LTFigure
    from pdfminer.pdfdocument import PDFDocument
    from pdfminer.pdfinterp import PDFPageInterpreter, PDFResourceManager
    from pdfminer.pdfpage import PDFPage
    from pdfminer.pdfparser import PDFParser

    _counted_content_parser()

    class Interpreter(PDFPageInterpreter):
        def do_q(self):
            budget.save_state(len(self.gstack))
            super().do_q()

    class Device(PDFPageAggregator):
        """Notes for each character the text-showing operator of the page content that drew it (`drawn`)."""

        def begin_page(self, page, ctm):
            self.drawn: dict[LTComponent, Drawn] = {}  # the page's characters
            self.shows: list[tuple[bytes, ...]] = []
            self.advances: list[float | None] = []
            self.glyphs: list[list | None] = []
            self.current: int | None = None
            self.glyph = 0
            self.invisible = False
            super().begin_page(page, ctm)

        def render_string(self, textstate, seq, ncs, graphicstate):
            budget.show(_shown_glyphs(textstate, seq))
            if isinstance(self.cur_item, LTFigure):  # a form XObject's text: not ours to edit
                self.current, self.invisible = None, False
                return super().render_string(textstate, seq, ncs, graphicstate)
            vertical = textstate.font is not None and textstate.font.is_vertical()
            invisible = textstate.render in (3, 7)  # an OCR layer over a scan
            clipping = textstate.render >= 4  # its glyphs clip what is drawn after them
            # vertical and clipping text kept as it is; invisible text (an OCR layer) translated over a scan only (pdf.py)
            self.current = -1 if vertical or clipping else len(self.shows)
            self.invisible = invisible
            self.glyph = 0
            self.shows.append(tuple(s for s in seq if isinstance(s, bytes)))
            self.glyphs.append(_elements(textstate, seq))
            start = textstate.linematrix[0]
            super().render_string(textstate, seq, ncs, graphicstate)
            # the move along the line, as a TJ number: what replaces the operator when its text goes
            scale = 0.001 * textstate.fontsize * textstate.scaling * 0.01
            self.advances.append(-(textstate.linematrix[0] - start) / scale if scale else None)

        def render_char(self, matrix, font, *args):
            advance = super().render_char(matrix, font, *args)
            self.drawn[self.cur_item._objs[-1]] = Drawn(self.current, self.glyph, font, self.invisible)
            self.glyph += 1
            return advance

    fonts = DocumentFonts()

    class Manager(PDFResourceManager):
        """Notes the dictionary each font was made from (a Type0 font: its descendant's, made first)."""

        def get_font(self, objid, spec):
            font = super().get_font(objid, spec)
            fonts.specs.setdefault(font, spec)
            return font

    manager = Manager(caching=True)
    device = Device(manager, laparams=LAParams(line_margin=0.5, char_margin=2.0, boxes_flow=0.5))
    interpreter = Interpreter(manager, device)
    document = PDFDocument(PDFParser(io.BytesIO(data)))
    for index, page in enumerate(PDFPage.create_pages(document)):
        if index < start:
            continue
        if stop is not None and index >= stop:
            break
        budget.begin_page(index)
        _budgets.current = budget
        try:
            interpreter.process_page(page)
            layout = device.get_result()
            x0, y0, x1, y1 = page.mediabox
            splittable = {i for i, elements in enumerate(device.glyphs) if elements is not None}
            page_layout = _page(index, layout, (x1 - x0, y1 - y0), (x0, y0), page.rotate % 360 == 0, splittable,
                                device.drawn, fonts)
        finally:
            _budgets.current = None
        page_layout.shows, page_layout.advances, page_layout.glyphs = device.shows, device.advances, device.glyphs
        yield page_layout


def _elements(textstate, seq) -> list | None:
    """A text-showing operator's numbers and glyphs, each glyph as (its code's bytes, how far it
    moves the text position in TJ units), so that some of its glyphs can be taken out; None where
    the font's codes cannot be cut (a CMap other than Identity)."""
    from pdfminer.cmapdb import IdentityCMap, IdentityCMapByte
    from pdfminer.pdffont import PDFCIDFont, PDFSimpleFont

    font, size = textstate.font, textstate.fontsize
    if isinstance(font, PDFSimpleFont):
        width = 1
    elif isinstance(font, PDFCIDFont) and isinstance(font.cmap, IdentityCMap):
        width = 1 if isinstance(font.cmap, IdentityCMapByte) else 2
    else:
        return None
    if not size:
        return None
    elements: list = []
    for item in seq:
        if isinstance(item, (int, float)):
            elements.append(item)
        elif isinstance(item, bytes):
            cids = list(font.decode(item))
            if len(item) != width * len(cids):
                return None
            for k, cid in enumerate(cids):
                space = textstate.wordspace if width == 1 and cid == 32 else 0
                move = font.char_width(cid) * 1000 + (textstate.charspace + space) * 1000 / size
                elements.append((item[k * width : (k + 1) * width], move))
    return elements


def _page(index, layout, page_size, origin, upright_page, splittable: set[int], drawn: dict[LTComponent, Drawn],
          fonts: DocumentFonts) -> Page:
    from pdfminer.layout import LTChar, LTCurve, LTFigure, LTImage, LTTextBoxHorizontal, LTTextLineHorizontal

    rules, boxes, images, figures, placed = [], [], 0, [], []
    for item in layout:
        if isinstance(item, LTTextBoxHorizontal):
            boxes.append(item)
        elif isinstance(item, LTCurve) and (item.width < 2 or item.height < 2):
            rules.append(item.bbox)
        elif isinstance(item, (LTFigure, LTImage)):
            images += _count_images(item)
            figures.append(item.bbox)
            if isinstance(item, LTFigure):
                placed.append((item.name, item.bbox, tuple(item.matrix)))
    columns = [r for r in rules if r[3] - r[1] > 2]  # vertical rules: a table's column lines
    blocks: list[Block] = []
    styles: dict = {}
    flows: list[list[Line]] = []  # the boxes' lines, a box that goes on from the one before joined to it
    for box in boxes:
        lines = []
        for line in box:
            if not isinstance(line, LTTextLineHorizontal):
                continue
            cells = [cell for part in _between_rules(line, columns) for cell in _cells(part)]
            for k, (items, number) in enumerate(cells):
                chars = [c for c in items if isinstance(c, LTChar)]
                # where the line could have gone on: the next cell (or, below, its lines' right edge)
                following = cells[k + 1][0] if k + 1 < len(cells) else []
                edge = min((c.x0 for c in following if isinstance(c, LTChar)), default=None)
                pieces: list[tuple[str, tuple[bool, bool] | None, int | None]] = []  # (character, style, show)
                for item in items:
                    if item.get_text() == " " and pieces and pieces[-1][0] == " ":
                        continue  # a space drawn and the one pdfminer adds for its width (justified text): one
                    if isinstance(item, LTChar):
                        mark = drawn[item]
                        pieces.append((item.get_text(), _style(item, mark.font, styles), mark.show if _upright(item) else -1))
                    elif item.get_text() == " ":
                        pieces.append((" ", None, None))
                while pieces and not pieces[-1][0].strip():
                    pieces.pop()
                size = statistics.median(c.size for c in chars)
                baseline = statistics.median(c.y0 - drawn[c].font.get_descent() * c.size for c in chars)
                # a few larger glyphs (big digits, an initial) do not make the line taller than its size
                top, bottom = baseline + LINE_ABOVE * size, baseline - LINE_BELOW * size
                lines.append(Line(pieces, min(c.x0 for c in chars), max(min(c.y0 for c in chars), bottom),
                                  max(c.x1 for c in chars), min(max(c.y1 for c in chars), top), size, baseline,
                                  chars, number, edge=edge or 0.0))
        if any(not read.edge for read in lines):
            # a line that is no cell could have run as far as the box's lines of its size
            for read, edge in zip(lines, _right_edges_by_size(lines)):
                read.edge = read.edge or edge
        if lines and flows and _flows_on(flows[-1][-1], lines[0]):
            flows[-1] += lines  # pdfminer cut a paragraph at an indented or hanging line: _cut decides
        elif lines:
            flows.append(lines)
    _mark_rows(flows, rules)
    for lines in flows:
        blocks.extend(_cut(index, lines, rules))
    if blocks:
        left, right = min(b.bbox[0] for b in blocks), max(b.bbox[2] for b in blocks)
    for block in blocks:
        _decide(block, upright_page, drawn)
        if block.translate:
            block.fonts = _block_fonts(block, styles, drawn, fonts)
        block.align = _alignment(block, left, right, page_size[0])
        for read in block.lines:
            read.chars = []  # pdfminer's objects are not needed any more: a long document's memory
    _keep_shared(blocks, splittable)
    return Page(index, origin, blocks, rules, images, figures, placed=placed)


def _upright(char: LTChar) -> bool:
    """The character is drawn upright on the page (slanted for italics perhaps, not turned). pdfminer's
    own `upright` takes a glyph turned a quarter with rounding noise (0.00000004 for 0 in its
    matrix, as Word writes it) for upright."""
    a, b, c, d, _, _ = char.matrix
    return a > 0 and d > 0 and abs(b) <= TURNED * a and abs(c) <= d


def _block_fonts(block: Block, styles: dict, drawn: dict[LTComponent, Drawn], fonts: DocumentFonts) -> dict:
    """(bold, italic) -> the embedded program most of the block's letters of that style are drawn in."""
    counts: dict[tuple, dict[int, int]] = {}  # style -> id(font) -> letters
    by_id = {}
    for line in block.lines:
        for char in line.chars:
            if char.get_text().isalpha():
                font = drawn[char].font
                by_font = counts.setdefault(_style(char, font, styles), {})
                by_font[id(font)] = by_font.get(id(font), 0) + 1
                by_id[id(font)] = font
    out = {}
    for style, by_font in counts.items():
        source = fonts.source(by_id[max(by_font, key=by_font.__getitem__)])
        if source is not None:
            out[style] = source
    return out


def _source_font(font: PDFFont, spec: Mapping[str, object] | None) -> SourceFont | None:
    """The TrueType, OpenType or CFF program the font embeds, with the characters it draws; None
    for a font with none (the standard 14, Type 1, Type 3) or a CMap other than Identity."""
    from pdfminer.cmapdb import FileUnicodeMap, IdentityCMap
    from pdfminer.pdffont import PDFCIDFont, PDFType1Font, PDFTrueTypeFont
    from pdfminer.pdftypes import PDFStream, resolve1
    from pdfminer.psparser import literal_name

    try:
        descriptor = resolve1(spec.get("FontDescriptor")) if spec else None
        if not isinstance(descriptor, dict):
            return None
        program, cff = resolve1(descriptor.get("FontFile2")), False
        if program is None:
            program = resolve1(descriptor.get("FontFile3"))
            if not isinstance(program, PDFStream):
                return None
            kind = literal_name(program.get("Subtype"))
            if kind not in ("OpenType", "Type1C", "CIDFontType0C"):
                return None
            cff = kind != "OpenType"
        if not isinstance(program, PDFStream):
            return None
        glyphs: dict[str, int] = {}
        codes: dict[str, int] = {}
        if isinstance(font, PDFCIDFont):
            if not isinstance(font.cmap, IdentityCMap) or not isinstance(font.unicode_map, FileUnicodeMap):
                return None
            mapping = None if cff or not spec else resolve1(spec.get("CIDToGIDMap"))  # a CFF program's glyphs go by CID
            table = mapping.get_data() if isinstance(mapping, PDFStream) else None
            for cid, text in sorted(font.unicode_map.cid2unichr.items()):
                gid = int.from_bytes(table[2 * cid : 2 * cid + 2], "big") if table is not None else cid
                if len(text) == 1 and gid:
                    glyphs.setdefault(text, gid)
        elif isinstance(font, PDFTrueTypeFont) or (cff and isinstance(font, PDFType1Font)):
            for code in range(256):
                try:
                    text = font.to_unichr(code)
                except Exception:  # the code draws no known character
                    continue
                if len(text) == 1:
                    codes.setdefault(text, code)
        else:
            return None
        name = re.sub(r"^[A-Z]{6}\+", "", font.fontname or "")
        return SourceFont(name, program.get_data(), glyphs, codes, cff, name != font.fontname)
    except Exception:  # a broken font dictionary or program: the translation is set in a system font
        return None


def _between_rules(line, columns: list) -> list[list]:
    """A line's items cut where a vertical rule runs between two characters: pdfminer puts the cells
    of a table's row in one line where they sit close."""
    from pdfminer.layout import LTChar

    middle = (line.y0 + line.y1) / 2
    crossing = [(x0 + x1) / 2 for x0, y0, x1, y1 in columns if y0 <= middle <= y1 and line.x0 < (x0 + x1) / 2 < line.x1]
    if not crossing:
        return [list(line)]
    parts: list[list] = [[]]
    last = None  # the last character
    for item in line:
        if isinstance(item, LTChar) and item.get_text().strip():
            if last is not None and any(last.x1 - 1 <= x <= item.x0 + 1 for x in crossing):
                parts.append([])
            last = item
        parts[-1].append(item)
    return parts


def _cells(items: list) -> list[tuple[list, bool]]:
    """A line's items (pdfminer's characters and the spaces it adds) cut after a leading number set
    apart from the rest (a form's row number, a section number): a gap of NUMBER_GAP ems and twice
    the line's other gaps. Each part says whether it is that number; a line without characters has none."""
    from pdfminer.layout import LTChar

    visible = [(i, c) for i, c in enumerate(items) if isinstance(c, LTChar) and c.get_text().strip()]
    if not visible:
        return []
    gaps = [(b.x0 - a.x1) / a.size if a.size else 0.0 for (_, a), (_, b) in zip(visible, visible[1:])]
    word_gaps = [g for g in gaps if g > WORD_GAP]
    if NUMBER.fullmatch("".join(c.get_text() for _, c in visible)):
        return [(items, True)]  # a number on a line of its own, as a column of row numbers has them
    if not word_gaps:
        return [(items, False)]
    first = next(k for k, g in enumerate(gaps) if g > WORD_GAP)
    others = word_gaps[1:]
    usual = statistics.median(others) if others else SPACE
    number = "".join(c.get_text() for _, c in visible[: first + 1])
    if not NUMBER.fullmatch(number) or word_gaps[0] < max(NUMBER_GAP, 2 * usual):
        return [(items, False)]
    return [(items[: visible[first][0] + 1], True), (items[visible[first + 1][0] :], False)]


def _count_images(item) -> int:
    from pdfminer.layout import LTImage

    if isinstance(item, LTImage):
        return 1
    return sum(_count_images(child) for child in getattr(item, "_objs", []))


def _same_size(a: Line, b: Line) -> bool:
    """Lines set in one size (a heading and its text are not)."""
    return max(a.size, b.size) <= SIZE_CHANGE * min(a.size, b.size)


def _right_edges_by_size(lines: list[Line]) -> list[float]:
    """For each line, the rightmost x1 of the lines of its size (`_same_size`, itself included), in
    time linear after a sort: a box of a hostile PDF may hold thousands of lines. Sorted by size, the
    lines of one's size are a run around it, and the run moves right as the size grows: a sliding
    window, its largest x1 first in `largest`."""
    order = sorted(range(len(lines)), key=lambda i: lines[i].size)
    edges = [0.0] * len(lines)
    largest: collections.deque[int] = collections.deque()  # positions in `order`, their x1 decreasing
    first = end = 0  # the window: order[first:end]
    for i in order:
        line = lines[i]
        while end < len(order) and (lines[order[end]].size <= line.size or _same_size(line, lines[order[end]])):
            while largest and lines[order[largest[-1]]].x1 <= lines[order[end]].x1:
                largest.pop()
            largest.append(end)
            end += 1
        while not _same_size(lines[order[first]], line):  # smaller than its size
            first += 1
        while largest[0] < first:
            largest.popleft()
        edges[i] = lines[order[largest[0]]].x1
    return edges


def _flows_on(last: Line, first: Line) -> bool:
    """`first` (a box's first line) is the next line after `last` (the previous box's last): the
    same size, one line spacing below, in the same column."""
    size = max(last.size, first.size)
    overlap = min(last.x1, first.x1) - max(last.x0, first.x0)
    return (
        _same_size(last, first)
        and 0.5 * size < last.baseline - first.baseline < 1.6 * size
        and overlap > 0.5 * min(last.x1 - last.x0, first.x1 - first.x0)
    )


def _mark_rows(flows: list[list[Line]], rules) -> None:
    """Mark the lines that a number of its own (a form's row number, its own box as pdfminer lays it
    out) stands just left of, on the same baseline, with no ruled line between (a pleading's margin
    of line numbers has one)."""
    numbers = [line for lines in flows for line in lines if line.number]
    for line in (line for lines in flows for line in lines if not line.number):
        line.row = any(
            abs(n.baseline - line.baseline) < ROW_BASELINE * line.size
            and 0 <= line.x0 - n.x1 < ROW_NUMBER_GAP * line.size
            and not any(r[0] >= n.x1 and r[2] <= line.x0 and r[1] <= line.baseline <= r[3] for r in rules)
            for n in numbers
        )


def _cut(page: int, lines: list[Line], rules) -> list[Block]:
    """A box's lines as blocks (see the module docstring)."""
    blocks: list[Block] = []
    for line in lines:
        if blocks:
            block = blocks[-1]
            previous = block.lines[-1]
            left, _, right, _ = block.bbox
            width = max(right, line.x1) - min(left, line.x0)
            new = (
                line.number or previous.number or line.row
                or not _same_size(line, previous)
                or previous.x1 - previous.x0 < SHORT_LINE * width
                or line.x0 > left + 1.5 * line.size
                or previous.baseline - line.baseline > 2.0 * max(line.size, previous.size)
                or any(r[1] < previous.y0 + 1 and r[3] > line.y1 - 1 and r[0] < line.x1 and r[2] > line.x0 for r in rules)
                or (line.pieces and line.pieces[0][0] in "•▪◦‣–-*")
                or _broken_on_purpose(previous, line)
                or _footnote(line)
            )
            if not new:
                block.lines.append(line)
                continue
        blocks.append(Block(page, [line]))
    return blocks


def _broken_on_purpose(previous: Line, line: Line) -> bool:
    """`line`'s first word would have fitted at the end of `previous`: a line broken where the text
    says so (a list of short lines, a poem, an address), not where the measure ran out."""
    text = "".join(piece for piece, _, _ in previous.pieces).rstrip()
    if not line.chars or text.endswith("-"):
        return False
    word_end = line.chars[0].x1
    for before, char in zip(line.chars, line.chars[1:]):
        if char.x0 - before.x1 > WORD_GAP * line.size or not char.get_text().strip():
            break
        word_end = char.x1
    return previous.edge - previous.x1 > word_end - line.x0 + (SPACE + FIT_SLACK) * line.size


def _footnote(line: Line) -> bool:
    """The line starts with a footnote's mark: a raised, smaller number or sign."""
    first = line.chars[0] if line.chars else None
    return (first is not None and (first.get_text().isdigit() or first.get_text() in "*†‡§")
            and first.size < SUPERSCRIPT * line.size and first.y0 > line.y0 + 0.1 * line.size)


def _decide(block: Block, upright_page: bool, drawn: dict[LTComponent, Drawn]) -> None:
    chars = [c for line in block.lines for c in line.chars]
    marks = [drawn[c] for c in chars]
    symbols = [c for c in chars if c.get_text().strip() not in ("", ".", ",")]  # math fonts' dots are leaders
    block.shows = {show for line in block.lines for _, _, show in line.pieces if show is not None}
    block.glyphs = {(m.show, m.glyph) for m in marks if m.show is not None}
    block.invisible = all(m.invisible for m in marks)
    letters = [c for c in chars if c.get_text().isalpha()]
    block.serif = sum(_is_serif(c, drawn[c].font) for c in letters) > len(letters) / 2
    color = getattr(chars[0].graphicstate, "ncolor", None) if chars else None
    block.color = tuple(color) if isinstance(color, (list, tuple)) else ((color,) if isinstance(color, (int, float)) else ())
    text = block.text
    block.translate = (
        upright_page
        and not all(line.number for line in block.lines)
        and not NUMBER.fullmatch(text.strip())  # a row number alone: 8a, IV.
        and is_translatable(text)
        and not URL.match(text)
        and "(cid:" not in text
        and all(show is not None and show >= 0 for line in block.lines for piece, _, show in line.pieces if piece.strip())
        and sum(bool(MATH_FONT.search(c.fontname or "")) for c in symbols) < 0.3 * max(len(symbols), 1)
        and not all(MONO_FONT.search(c.fontname or "") for c in chars if c.get_text().strip())  # code
    )


def _is_serif(char: LTChar, font: PDFFont) -> bool:
    """The character's font is a serif face, by its name or its descriptor's Serif flag."""
    name = char.fontname or ""
    if "sans" in name.lower():
        return False
    descriptor = getattr(font, "descriptor", None) or {}
    try:
        flags = int(descriptor.get("Flags", 0))
    except (TypeError, ValueError):
        flags = 0
    return bool(SERIF_FONT.search(name) or flags & 2)


def _alignment(block: Block, left: float, right: float, page_width: float) -> str:
    """How the block's lines are set, from their edges (several lines) or its place on the page (one)."""
    lines = block.lines
    x0, _, x1, _ = block.bbox
    if len(lines) > 1:
        lefts, rights = [l.x0 for l in lines], [l.x1 for l in lines]
        centers = [(l.x0 + l.x1) / 2 for l in lines]
        if len(lines) > 2 and max(rights[:-1]) - min(rights[:-1]) < 1 and max(lefts[1:]) - min(lefts[1:]) < 1:
            return "justify"  # both edges straight, but for the last line's end (and a first line's indent)
        if max(lefts) - min(lefts) < 1:
            return "left"
        if max(rights) - min(rights) < 1 and max(lefts[1:]) - min(lefts[1:]) >= 1:  # not an indented first line
            return "right"
        return "center" if max(centers) - min(centers) < 2 else "left"
    if x0 > left + 0.25 * (right - left) and abs(x1 - right) < 2:
        return "right"
    if x0 > left + 5 and min(abs((x0 + x1) / 2 - c) for c in ((left + right) / 2, page_width / 2)) < 3:
        return "center"
    return "left"


def _keep_shared(blocks: list[Block], splittable: set[int]) -> None:
    """A block that shares a text-showing operator with a kept block is kept too, unless the
    operator's glyphs can be taken out one by one (see _elements)."""
    changed = True
    while changed:
        changed = False
        kept = set().union(*(b.shows for b in blocks if not b.translate)) if blocks else set()
        for block in blocks:
            if block.translate and (block.shows & kept) - splittable:
                block.translate = False
                changed = True
