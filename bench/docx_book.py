"""A Word book through `dragoman translate`'s path against the engine alone on its sentences:
`python -m bench.docx_book --checkpoint DIR [--pages 300] [--device cuda] [--beams 4]`.

Writes an N-page .docx with python-docx (a test dependency), the same every run: each page a
heading and paragraphs of 2-4 sentences (~30 sentences a page); a third of the paragraphs have a
bold, an italic or a linked run, a third of the sentences a number, a year or a price, one in
twenty a URL, and every tenth page a small table. Then, after a warm-up on a two-page book, in one
process and on one engine, times:
- the .docx through `TranslationSession.translate_document`, as `dragoman translate book.docx`
  does it (reading, splitting, the translation memory and cache of a data folder new for each run,
  protected spans and formatting marks forced in the decoder, the engine, the doubts of the job's
  report, writing), with the default protection and with `--no-protect`'s;
- the same paragraphs as a .txt, one a line, through the same path;
- `Generator.run` over the book's sentences, tokenized beforehand: the engine alone;
- the .docx with the model replaced by the identity: what reading and writing cost.
Every translation is forced to --new-tokens tokens (DESIGN.md's document workload). With
--repeats N each path runs N times in turn and its fastest run counts: a kernel variant that a path
meets first is compiled during its first run. With --steps, each path's steps too (`StepLog`), and
on a GPU the device's idle time by what the host was doing meanwhile (`device_idle_while_s`).
Prints one JSON object: sentences/s of each path and its share of the engine's.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import random
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench import add_out_argument

WORDS = ("the river town market bridge museum morning evening light street house garden people "
         "walk old new small green long quiet visitors history century square church window road "
         "follow reach open close show find keep leave return build remember cross north south").split()


def sentence(rng: random.Random) -> str:
    """10-25 words, a third with a number, a year or a price, one in twenty with a URL."""
    words = [rng.choice(WORDS) for _ in range(rng.randint(10, 25))]
    kind = rng.random()
    if kind < 0.05:
        words.insert(rng.randrange(1, len(words)), f"https://example.org/walks/{rng.randint(1, 999)}")
    elif kind < 0.38:
        figure = rng.choice([str(rng.randint(2, 9999)), str(rng.randint(1800, 2030)),
                             f"${rng.randint(1, 500)}.{rng.randint(0, 99):02d}", f"{rng.randint(1, 99)}%"])
        words.insert(rng.randrange(1, len(words)), figure)
    return " ".join(words).capitalize() + "."


def add_link(paragraph, text: str, url: str) -> None:
    """A hyperlink run (python-docx has no call for one)."""
    from docx.opc.constants import RELATIONSHIP_TYPE
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    link = OxmlElement("w:hyperlink")
    link.set(qn("r:id"), paragraph.part.relate_to(url, RELATIONSHIP_TYPE.HYPERLINK, is_external=True))
    run = OxmlElement("w:r")
    text_element = OxmlElement("w:t")
    text_element.text = text
    run.append(text_element)
    link.append(run)
    paragraph._p.append(link)


def make_book(path: Path, pages: int, seed: int = 0) -> list[list[str]]:
    """Write the book; its paragraphs' sentences, in order (headings and table cells included)."""
    import docx

    rng = random.Random(seed)
    document = docx.Document()
    paragraphs: list[list[str]] = []
    for page in range(1, pages + 1):
        heading = f"Chapter {page}: " + sentence(rng).split(" ", 3)[-1][:40].rstrip(" .")
        document.add_heading(heading, level=1)
        paragraphs.append([heading])
        for _ in range(9):
            texts = [sentence(rng) for _ in range(rng.randint(2, 4))]
            paragraphs.append(texts)
            paragraph = document.add_paragraph()
            style = rng.random()
            if style < 1 / 3:  # one sentence's middle words bold, italic or linked
                at = rng.randrange(len(texts))
                words = texts[at].split(" ")
                start = rng.randrange(1, len(words) - 2)
                before = " ".join(texts[:at] + [" ".join(words[:start])]) + " "
                marked = " ".join(words[start : start + 2])
                after = " " + " ".join([" ".join(words[start + 2 :])] + texts[at + 1 :])
                paragraph.add_run(before)
                if style < 1 / 9:
                    add_link(paragraph, marked, f"https://example.org/{page}")
                else:
                    run = paragraph.add_run(marked)
                    run.bold, run.italic = style < 2 / 9, style >= 2 / 9
                paragraph.add_run(after)
            else:
                paragraph.add_run(" ".join(texts))
        if page % 10 == 0:
            table = document.add_table(rows=3, cols=3)
            for row in table.rows:
                for cell in row.cells:
                    text = sentence(rng)
                    cell.text = text
                    paragraphs.append([text])
        document.add_page_break()
    document.save(str(path))
    return paragraphs


def make_books(folder: Path, pages: int) -> tuple[Path, Path, list[list[str]]]:
    """The book in `folder` as book.docx and its paragraphs as book.txt (one a line); their sentences."""
    book, text = folder / "book.docx", folder / "book.txt"
    paragraphs = make_book(book, pages)
    text.write_text("\n".join(" ".join(p) for p in paragraphs) + "\n", encoding="utf-8")
    return book, text, paragraphs


@dataclass
class LoggedStep:
    """One step as `StepLog` records it."""

    launched: float  # perf_counter seconds
    rows: int
    constrained: bool  # a constrained group runs in it
    host: float  # the host's seconds inside the launch
    graphs: int  # decoder graphs captured so far
    keys: int  # step keys met so far
    groups: int
    in_graph: bool  # its search ran in the step's graph (else eagerly, after the decoder's)
    device: tuple | None  # CUDA events recorded before and after the launch's work was queued


class StepLog:
    """Each step the engine launches (`StepRunner.launch` wrapped): when, its rows, whether a
    constrained group runs in it, and the host's time inside the launch. What a path adds to the
    engine's steps shows there: more steps, emptier ones, constrained ones, or the engine idle
    before the first and after the last. By kind: the time from a step's launch to the next one's,
    summed and its median (what a step costs while the engine is busy: the device's time, or the
    host's where that is longer), and the mean host time inside a launch (a constrained group's
    tables rebuilt, a key met first run eagerly, a kernel compiled). And the decoder graphs
    captured meanwhile, the step keys first met (run eagerly, to be captured at their second use)
    and the admissions. On a GPU also the device's own time: its steps', its admissions' (encoder
    passes, rows set up), and its idle time between them, where it waited for the host."""

    def __init__(self, runner, translator=None):
        self.entries: list[LoggedStep] = []
        self.admissions: list[tuple] = []  # CUDA events around each admission
        self.admission_starts: list[float] = []  # perf_counter seconds, each admission's on the host
        # With `translator`: the host's intervals (perf_counter seconds) of the work that may keep the
        # device waiting, by kind: submissions (the caller's thread), the engine thread's reports of
        # finished requests and its feeds (a document's texts tokenized), admissions.
        self.busy: dict[str, list[tuple[float, float]]] = {"submit": [], "report": [], "feed": [], "admit": []}
        self.admitted: list[int] = []  # the sentences of each admission
        self.new_keys: list[tuple] = []  # the keys first met or captured, as (size, last part of the key)
        launch, admit, search_in_graph = runner.launch, runner.admit, runner._search_in_graph
        graphs = runner.graphs
        timed = runner.model.device.type == "cuda"
        in_graph: list[bool] = []

        def events(work):
            if not timed:
                return work(), None
            import torch

            before, after = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            before.record()
            out = work()
            after.record()
            return out, (before, after)

        def searching_in_graph(*args, **kwargs):
            report = search_in_graph(*args, **kwargs)
            in_graph.append(report is not None)
            return report

        def admitting(sentences, *args, **kwargs):
            started = time.perf_counter()
            out, recorded = events(lambda: admit(sentences, *args, **kwargs))
            self.busy["admit"].append((started, time.perf_counter()))
            self.admission_starts.append(started)
            self.admitted.append(len(sentences))
            if recorded is not None:
                self.admissions.append(recorded)
            return out

        def launching(groups):
            live = list(groups.values())
            in_graph.clear()
            known = set(graphs.seen) | set(graphs.graphs) if graphs else set()
            started = time.perf_counter()
            report, recorded = events(lambda: launch(groups))
            self.entries.append(LoggedStep(
                started, sum(s.ticket.beams for g in live for s in g.sentences), any(g.constrained for g in live),
                time.perf_counter() - started, len(graphs.graphs) if graphs else 0,
                len(graphs.seen) if graphs else 0, len(live), bool(in_graph and in_graph[0]), recorded))
            if graphs:
                self.new_keys += [(key[0], key[-1]) for key in (set(graphs.seen) | set(graphs.graphs)) - known]
            return report

        runner.launch, runner.admit, runner._search_in_graph = launching, admitting, searching_in_graph
        if translator is not None:
            for owner, name, kind in ((translator, "submit", "submit"), (translator.generator, "_report_finished", "report"),
                                      (translator.loop, "_feed", "feed")):
                setattr(owner, name, self._timed(getattr(owner, name), self.busy[kind]))

    @staticmethod
    def _timed(work, intervals: list[tuple[float, float]]):
        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return work(*args, **kwargs)
            finally:
                intervals.append((started, time.perf_counter()))
        return timed

    def clear(self) -> None:
        self.entries.clear()
        self.admissions.clear()
        self.admission_starts.clear()
        for intervals in self.busy.values():
            intervals.clear()
        self.admitted.clear()
        self.new_keys.clear()

    def summary(self, started: float, ended: float) -> dict:
        """The steps logged between `started` and `ended` (perf_counter seconds)."""
        if not self.entries:
            return {"steps": 0}
        entries = self.entries
        rows = [e.rows for e in entries]
        first, last = entries[0], entries[-1]
        summary = {"steps": len(rows), "constrained_steps": sum(e.constrained for e in entries),
                   "mean_rows": sum(rows) / len(rows), "before_first_step_s": first.launched - started,
                   "after_last_step_s": ended - last.launched, "graphs_captured": last.graphs - first.graphs,
                   "keys_first_met": last.keys - first.keys,
                   "steps_of_several_groups": sum(e.groups > 1 for e in entries),
                   "steps_searched_eagerly": sum(not e.in_graph for e in entries),
                   "keys_new": [str(k) for k in self.new_keys[:24]],
                   # each costs an encoder pass and the rows' set-up: a few sentences use them poorly
                   "admissions": len(self.admitted), "admissions_of_8_or_fewer": sum(n <= 8 for n in self.admitted)}
        for kind, constrained in (("plain", False), ("constrained", True)):
            gaps = [b.launched - a.launched for a, b in zip(entries, entries[1:]) if a.constrained == constrained]
            if not gaps:
                continue
            slow = sorted(gaps)[int(0.9 * len(gaps)):]
            summary[f"{kind}_steps_s"] = sum(gaps)  # launch to launch: the time the kind's steps held the engine
            summary[f"{kind}_step_ms_median"] = 1000 * statistics.median(gaps)
            summary[f"{kind}_launch_host_ms_mean"] = 1000 * statistics.fmean(
                e.host for e in entries if e.constrained == constrained)
            summary[f"{kind}_slowest_tenth_s"] = sum(slow)  # where the mean's excess over the median goes
            on_device = [e.device[0].elapsed_time(e.device[1]) for e in entries
                         if e.device is not None and e.constrained == constrained]
            if on_device:
                summary[f"{kind}_device_step_ms_median"] = statistics.median(on_device)
                summary[f"{kind}_device_steps_s"] = sum(on_device) / 1000
        if first.device is not None and last.device is not None:
            import torch

            torch.cuda.synchronize()
            summary["device_admissions_s"] = sum(a.elapsed_time(b) for a, b in self.admissions) / 1000
            # Between the first step and the last: what the device spent waiting for the host.
            idle = self._idle_by_tenth(first.device[0], first.device[0].elapsed_time(last.device[1]) / 1000)
            summary["device_idle_s"] = sum(idle)
            summary["device_idle_by_tenth_s"] = [round(seconds, 3) for seconds in idle]
            if any(self.busy["submit"] + self.busy["report"] + self.busy["feed"]):
                summary["device_idle_while_s"] = self._idle_while(first.device[0])
        return summary

    def _idle_while(self, origin) -> dict[str, float]:
        """The device's idle time (as `_idle_by_tenth`) by what the host was doing while it waited:
        each gap ends when the host queued the step or admission after it, so the host's window of a
        gap is the gap's length before that moment; a gap counts for each kind of `busy` work that
        overlaps its window ("nothing recorded" where none does), and how many gaps of more than
        1 ms there were."""
        work = [(e.device, e.launched) for e in self.entries if e.device is not None]
        work += list(zip(self.admissions, self.admission_starts))
        items = sorted((origin.elapsed_time(a) / 1000, origin.elapsed_time(b) / 1000, host) for (a, b), host in work)
        starts = {kind: sorted(intervals) for kind, intervals in self.busy.items()}
        found = {kind: 0.0 for kind in starts} | {"nothing recorded": 0.0, "gaps_over_1ms": 0}
        busy_until = None
        for start, end, host in items:
            if busy_until is not None and start > busy_until:
                gap = start - busy_until
                window = (host - gap, host)
                overlapping = [kind for kind, intervals in starts.items()
                               if any(a < window[1] and b > window[0] for a, b in
                                      intervals[max(0, bisect.bisect_left(intervals, (window[0] - 1.0,)) ):
                                                bisect.bisect_right(intervals, (window[1],))])]
                for kind in overlapping or ["nothing recorded"]:
                    found[kind] += gap
                found["gaps_over_1ms"] += gap > 1e-3
            busy_until = end if busy_until is None else max(busy_until, end)
        return {kind: round(value, 3) if isinstance(value, float) else value for kind, value in found.items()}

    def _idle_by_tenth(self, origin, span: float) -> list[float]:
        """The device's idle time in each tenth of the `span` seconds from the event `origin` (the
        first step's start): the gaps between its steps and admissions, each counted in the tenth it
        ends in; an admission before the first step counts for nothing."""
        intervals = sorted((origin.elapsed_time(a) / 1000, origin.elapsed_time(b) / 1000)
                           for a, b in [e.device for e in self.entries if e.device is not None] + self.admissions)
        idle = [0.0] * 10
        busy_until = 0.0
        for start, end in intervals:
            if start > busy_until:
                idle[min(9, int(10 * start / span))] += start - busy_until
            busy_until = max(busy_until, end)
        return idle


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.docx_book", description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, required=True, help="NLLB checkpoint folder")
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--beams", type=int, default=4)
    parser.add_argument("--new-tokens", type=int, default=40, help="tokens each translation is forced to")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each path, in turn (the fastest counts)")
    parser.add_argument("--steps", action="store_true",
                        help="also each path's steps: how many, their rows, the constrained ones, the engine's idle "
                             "time before the first and after the last (its last run)")
    parser.add_argument("--kinds-together", action="store_true",
                        help="plain and constrained sentences may share steps (scheduler.KINDS_APART off)")
    parser.add_argument("--paths", default="docx,docx_no_protect,txt,engine",
                        help="the paths to time, of docx, docx_no_protect, txt, engine (always timed), and "
                             "docx_here and txt_here (the document's work on this process's threads, not in a "
                             "process of its own as on a GPU)")
    add_out_argument(parser)
    args = parser.parse_args()

    from bench import emit, seconds_of
    from dragoman.app.documents import translate_document
    from dragoman.app.session.jobs import DocumentJob, JobReport
    from dragoman.app.session.session import TranslationSession
    from dragoman.app.session.terms import Terms
    from dragoman.app.settings import AppPaths
    from dragoman.engine import Translator, scheduler
    from dragoman.engine.generator import Request

    scheduler.KINDS_APART = not args.kinds_together

    translator = Translator(args.checkpoint, device=args.device)
    options = {"num_beams": args.beams, "min_new_tokens": args.new_tokens, "max_new_tokens": args.new_tokens}


    with tempfile.TemporaryDirectory(prefix="dragoman-docx-book-") as folder:
        work = Path(folder)

        runs_made = itertools.count()

        def translate(book: Path, protect: bool = True, here: bool = False) -> float:
            job = DocumentJob(book, work / f"{book.stem}.fra_Latn{book.suffix}", "eng_Latn", "fra_Latn", options,
                              overwrite=True)
            folders = AppPaths.under(work / f"home-{next(runs_made)}")  # a new data folder: nothing cached or remembered
            session = TranslationSession.open(translator, folders, terms=Terms(protect=protect))
            if here:
                session.documents_apart = False
            try:
                return seconds_of(lambda: session.translate_document(job, report=JobReport()), translator.device)
            finally:
                session.close()

        warm_up = work / "warm-up.docx"
        make_book(warm_up, 2, seed=1)
        translate(warm_up)
        book, text, paragraphs = make_books(work, args.pages)
        sentences = list(dict.fromkeys(s for p in paragraphs for s in p))
        prefix = translator.tokenizer.decoder_prefix("fra_Latn")
        engine_options = translator.default_options(**options)
        requests = [translator.tokenizer.encode_source(s, "eng_Latn") for s in sentences]
        translator.generator.run([Request(source, prefix, engine_options) for source in requests[:256]])  # warm
        paths = {
            "docx": lambda: translate(book),
            "docx_no_protect": lambda: translate(book, protect=False),
            "txt": lambda: translate(text),
            "docx_here": lambda: translate(book, here=True),
            "txt_here": lambda: translate(text, here=True),
            "engine": lambda: seconds_of(
                lambda: translator.generator.run([Request(s, prefix, engine_options) for s in requests]), translator.device),
        }
        paths = {path: run for path, run in paths.items() if path in args.paths.split(",") or path == "engine"}
        runs: dict[str, list[float]] = {path: [] for path in paths}
        steps: dict[str, dict] = {}
        log = StepLog(translator.generator.runner, translator) if args.steps else None
        for _ in range(args.repeats):
            for path, run in paths.items():
                if log is not None:
                    log.clear()
                started = time.perf_counter()
                runs[path].append(run())
                if log is not None:
                    steps[path] = log.summary(started, time.perf_counter())
        seconds = {path: min(taken) for path, taken in runs.items()}
        start = time.perf_counter()
        translate_document(book, work / "book.identity.docx", lambda texts: texts, overwrite=True)
        layout_seconds = time.perf_counter() - start
    out: dict = {"pages": args.pages, "paragraphs": len(paragraphs), "sentences": len(sentences),
                 "device": translator.describe(), "beams": args.beams, "new_tokens": args.new_tokens,
                 "kinds_apart": scheduler.KINDS_APART,
                 "reading_and_writing_docx_s": layout_seconds, "runs_s": runs, **({"steps": steps} if steps else {})}
    for path, taken in seconds.items():
        out[f"{path}_s"] = taken
        out[f"{path}_sent_per_s"] = len(sentences) / taken
        out[f"{path}_share_of_engine"] = seconds["engine"] / taken
    emit(out, f"docx_book_{args.pages}", translator.device, args.out)
    translator.teardown()


if __name__ == "__main__":
    main()
