"""A typed sentence's latency alone and while a long document runs in the same engine:
`python -m bench.typed_latency --checkpoint DIR --device cuda` (a checkpoint of `python -m
bench.checkpoint`, or a real one).

Both go through `Translator.submit`, as the window's typed text and documents do: the document
(`--sentences` of 10-60 words, beam 4, 40 new tokens, DOCUMENT priority) is submitted once and never
stopped; each typed sentence (beam 4, 32 new tokens, TYPED) joins its running batch at the next
step. Output lengths are forced, so random weights do the work of real ones. Each typed sentence
comes as the window's does, after a keystroke told the engine to expect it (`expect_typing`: the
document's steps are no longer queued two deep); beside the document also without one, as the
server's and the command line's come. Prints the median of `--repeats` typed sentences each way,
their ratio, and whether the document was still decoding when the last typed sentence came back
(else the second figure measured nothing).

`--through-app PAGES`: as the window does it, through the app's pipeline with its translation
memory and cache (of a new data folder): the document a .docx book of bench.docx_book (formatting,
numbers and links: constrained sentences among its plain ones), translated by
`TranslationSession.translate_document` on a thread of its own (its parts prepared, its doubts
judged alongside, its translations stored as they come), and each typed sentence (a different one
each time: no translation is recalled) by `TranslationSession.translate`. The app's own threads
then share the interpreter with the engine's while typed text decodes.

`--timeline`: also what the engine's loop did around each typed sentence, alone and beside the
document (`LoopTimeline`): how long it waited to be admitted, the document's steps and admissions
launched meanwhile, its own steps' host time and, on the GPU, their device time and the device's
span from its admission to its last step (more than the two summed: the device waited for the host).

`--stacks`: also where the process's threads were while typed text waited or decoded beside the
document (`ThreadSampler`: their innermost frames every millisecond, the most frequent first). The
sampler takes the interpreter a thousand times a second, so its run's times are not comparable.
"""

from __future__ import annotations

import argparse
import collections
import random
import statistics
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Callable, TypeVar

import dragoman  # noqa: F401  (before anything that imports transformers: the checkout guard)
from bench import add_out_argument, emit
from dragoman.engine import DOCUMENT, TYPED, TranslationRequest

if TYPE_CHECKING:
    from dragoman.engine import Translator

T = TypeVar("T")

TYPED_TEXT = "The quick brown fox jumps over the lazy dog while the children watch from the window."
KEYSTROKE_LEAD_S = 0.01  # a document step takes a few milliseconds at most: its queue has drained by then
WORDS = ("the river house green small reads book city light morning translation engine window people "
         "water always before after between because system document sentence").split()


class LoopTimeline:
    """What the engine's loop does around each typed request: times taken at `Translator.submit`
    and at the step runner's admissions and launches (the instance's methods wrapped), and on the
    GPU events recorded around each admission and step."""

    def __init__(self, translator: Translator):
        import torch

        self.events: list[tuple[float, str, float]] = []  # (when, what, host ms), from any thread
        # (when, its start and end events) of each admission and step: read once they have passed
        self.device: dict[float, tuple[torch.cuda.Event, torch.cuda.Event]] = {}
        runner, submit = translator.generator.runner, translator.submit
        admit, launch = runner.admit, runner.launch
        on_gpu = translator.device.type == "cuda"

        graphs = runner.graphs

        def graph_work() -> tuple[int, int]:
            """Graph keys run so far (eagerly, the first time) and graphs captured."""
            return (len(graphs.seen), len(graphs.graphs)) if graphs is not None else (0, 0)

        def timed(what: str, call: Callable[[], T], typed: bool) -> T:
            start = time.perf_counter()
            events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) if on_gpu else None
            if events is not None:
                events[0].record()
            before = graph_work()
            out = call()
            if events is not None:
                events[1].record()
                self.device[start] = events
            new = " (new graph)" if graph_work() != before else ""  # a key met first, or captured
            self.events.append((start, what + new, (time.perf_counter() - start) * 1e3))
            return out

        def submitted(request: TranslationRequest):
            typed = request.priority == TYPED
            if typed:
                self.events.append((time.perf_counter(), "submitted", 0.0))
            handle = submit(request)
            if typed:
                handle.subscribe(None, lambda i, translation: self.events.append((time.perf_counter(), "done", 0.0)))
            return handle

        def admitted(sentences, requests, alone, group):
            kind = "typed" if group.typed else "document"
            timed(f"{kind} admitted", lambda: admit(sentences, requests, alone, group), group.typed)

        def launched(groups):
            typed = any(group.typed for group in groups.values())
            return timed("typed step" if typed else "document step", lambda: launch(groups), typed)

        translator.submit, runner.admit, runner.launch = submitted, admitted, launched

    def mark(self) -> int:
        return len(self.events)

    def typed_since(self, mark: int) -> list[dict]:
        """Each typed request submitted since `mark`: its milliseconds in all and before its
        admission, the document's steps and admissions launched before it (their host time, and
        the steps that ran a graph's key for the first time or captured it), its steps and their
        host time; on the GPU also its admission's and steps' device time, the device's span from
        its admission's start to its last step's end, and the document's work the device ran last
        before the admission (what, when the host launched it, its device time, and the device's
        time from its end to the admission's start: about none where the admission waited for it)."""
        everything = sorted(self.events)
        events = sorted(self.events[mark:])
        found = []
        for i, (submitted, what, _) in enumerate(events):
            if what != "submitted":
                continue
            end = next((j for j in range(i + 1, len(events)) if events[j][1] == "done"), len(events) - 1)
            span = events[i:end + 1]
            admitted = next((t for t, what, _ in span if what.startswith("typed admitted")), submitted)
            before = [event for event in span if event[0] < admitted]
            steps = [t for t, what, _ in span if what.startswith("typed step")]
            found.append({
                "ms": round((span[-1][0] - submitted) * 1e3, 2),
                "to_admission_ms": round((admitted - submitted) * 1e3, 2),
                "document_steps_before": len([t for t, what, _ in before if what.startswith("document step")]),
                "document_steps_before_new_graph": len([t for t, what, _ in before if what == "document step (new graph)"]),
                "document_admissions_before": len([t for t, what, _ in before if what.startswith("document admitted")]),
                "document_work_before_host_ms": round(sum(ms for _, what, ms in before if what.startswith("document")), 2),
                "steps": len(steps),
                "steps_host_ms": round(sum(ms for _, what, ms in span if what.startswith("typed step")), 2),
                **(self._device_times(admitted, steps) if admitted in self.device and steps else {}),
                **(self._last_document_work(everything, submitted, admitted) if admitted in self.device else {})})
        return found

    def _last_document_work(self, events: list[tuple[float, str, float]], submitted: float, admitted: float) -> dict:
        """The document's admission or step launched last before the typed admission at `admitted`:
        what, when the host launched it after the typed text was submitted (at `submitted`;
        negative: before), its device time, and the device's time from its end to that admission's start."""
        last = next(((t, what) for t, what, _ in reversed(events) if t < admitted and what.startswith("document")
                     and t in self.device), None)
        if last is None:
            return {}
        work = self.device[last[0]]
        return {"last_document_work": last[1], "last_document_work_launched_after_submission_ms": round((last[0] - submitted) * 1e3, 2),
                "last_document_work_device_ms": round(work[0].elapsed_time(work[1]), 3),
                "last_document_work_end_to_admission_device_ms": round(work[1].elapsed_time(self.device[admitted][0]), 3)}

    def _device_times(self, admitted: float, steps: list[float]) -> dict:
        def ms(start, end) -> float:
            return round(start.elapsed_time(end), 3)

        admission = self.device[admitted]
        return {"admission_device_ms": ms(*admission),
                "steps_device_ms": round(sum(ms(*self.device[t]) for t in steps), 2),
                "device_span_ms": ms(admission[0], self.device[steps[-1]][1])}

    @staticmethod
    def medians(timeline: list[dict]) -> dict:
        """Each number's median over the typed requests of a timeline (those that have it)."""
        keys = dict.fromkeys(key for typed in timeline for key, value in typed.items() if not isinstance(value, str))
        return {key: statistics.median(typed[key] for typed in timeline if key in typed) for key in keys}


# Calls that wait without the interpreter: a thread found in one is idle.
BLOCKING_CALLS = (".get(", ".poll(", ".recv(", ".wait(", "sleep(", ".select(", ".accept(", ".join(")


def idle(frame: traceback.FrameSummary) -> bool:
    """Whether a thread's innermost frame waits: in threading's locks and events, or at a blocking call."""
    return Path(frame.filename).name == "threading.py" or any(call in (frame.line or "") for call in BLOCKING_CALLS)


class ThreadSampler:
    """Every `interval` s while typed text waits or decodes beside a document's running sentences, the
    innermost `depth` frames of each thread of the process that is not idle (`idle`); `stop()`
    counts them by whether the typed text was admitted yet, the thread's name and those frames.
    Through the app, also every sample of each typed call (`call`), whatever the engine does: those
    of the slowest call are kept apart."""

    def __init__(self, translator: Translator, interval: float = 0.001, depth: int = 4):
        self.translator, self.interval, self.depth = translator, interval, depth
        self.samples: collections.Counter[tuple[str, str, str]] = collections.Counter()
        self._call: collections.Counter[tuple[str, str, str]] | None = None  # the typed call going on
        self.slowest: tuple[float, collections.Counter[tuple[str, str, str]]] = (0.0, collections.Counter())
        self._running = True
        self._thread = threading.Thread(target=self._run, name="bench-thread-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        loop, scheduler = self.translator.loop, self.translator.generator.scheduler
        while self._running:
            time.sleep(self.interval)
            call = self._call
            # A document sentence runs beside the typed text (the list copied: the engine's thread changes it).
            beside = loop.typing and not all(s.ticket.typed for s in list(scheduler.running))
            if not beside and call is None:
                continue
            phase = ("admitted" if scheduler.typing else "waiting") if loop.typing else "in the app"
            names = {thread.ident: thread.name for thread in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
                frames = traceback.extract_stack(frame)[-self.depth:]
                if ident == threading.get_ident() or not frames or idle(frames[-1]):
                    continue
                where = " < ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(frames))
                if beside:
                    self.samples[(phase, names.get(ident, "?"), where)] += 1
                if call is not None:
                    call[(phase, names.get(ident, "?"), where)] += 1

    def call(self) -> Callable[[float], None]:
        """A typed call begins; returns what ends it, given its milliseconds."""
        self._call = collections.Counter()

        def ended(ms: float) -> None:
            if self._call is not None and ms > self.slowest[0]:
                self.slowest = (ms, self._call)
            self._call = None

        return ended

    @staticmethod
    def counted(samples: collections.Counter[tuple[str, str, str]], most: int) -> list[dict]:
        return [{"samples": count, "typed_text": phase, "thread": name, "frames": where}
                for (phase, name, where), count in samples.most_common(most)]

    def stop(self) -> list[dict]:
        """Stop sampling; the 25 most frequent (phase, thread, frames), most frequent first."""
        self._running = False
        self._thread.join()
        return self.counted(self.samples, 25)


def keystroke(translator: Translator) -> None:
    """What the window's keystrokes tell the engine before it translates (`expect_typing`), then a
    pause long enough for a document's queued steps to drain (the window's is 0.4 s)."""
    translator.expect_typing()
    time.sleep(KEYSTROKE_LEAD_S)


def typed_ms(translator: Translator, options, repeats: int, announced: bool = True) -> list[float]:
    """Each typed sentence's milliseconds from its submission to its translation; `announced`: as
    the window does, a keystroke's `expect_typing` comes first (`KEYSTROKE_LEAD_S` before)."""
    found = []
    for _ in range(repeats):
        if announced:
            keystroke(translator)
        start = time.perf_counter()
        translator.submit(TranslationRequest([TYPED_TEXT], "eng_Latn", "fra_Latn", options, priority=TYPED,
                                             partials=True)).result()
        found.append((time.perf_counter() - start) * 1e3)
    return found


def typed_through_app_ms(pipeline, options: dict, repeats: int, first: int,
                         sampler: ThreadSampler | None = None) -> list[float]:
    """`typed_ms` through the pipeline, typed sentence `first` onwards (each a different sentence);
    `sampler`: each call sampled whole (`ThreadSampler.call`)."""
    from dragoman.app.session.session import TranslationJob

    found = []
    for i in range(first, first + repeats):
        keystroke(pipeline.translator)
        ended = sampler.call() if sampler is not None else None
        start = time.perf_counter()
        pipeline.translate(TranslationJob([f"{TYPED_TEXT[:-1]} number {i}."], "eng_Latn", "fra_Latn", options))
        found.append((time.perf_counter() - start) * 1e3)
        if ended is not None:
            ended(found[-1])
    return found


def through_app(translator: Translator, pages: int, repeats: int, documents_here: bool = False,
                timeline: LoopTimeline | None = None, prepare: bool = True, sampler: ThreadSampler | None = None) -> dict:
    """Typed sentences alone, then beside a .docx book of `pages` pages, both through the pipeline.
    `prepare`: the book's steps captured beforehand, as the window has them once its model is
    loaded (`Translator.prepare_document_steps`); `sampler`: the typed calls beside the book sampled whole."""
    from bench.docx_book import make_book
    from dragoman.app.session.jobs import DocumentJob, JobReport
    from dragoman.app.session.session import TranslationSession
    from dragoman.app.settings import AppPaths

    typed = {"num_beams": 4, "min_new_tokens": 32, "max_new_tokens": 32}
    with tempfile.TemporaryDirectory(prefix="dragoman-typed-latency-") as folder:
        work = Path(folder)
        # As the window's: the translation memory and cache of a data folder (a new one, nothing in it).
        pipeline = TranslationSession.open(translator, AppPaths.under(work))
        if documents_here:
            pipeline.documents_apart = False

        book_options = {"num_beams": 4, "min_new_tokens": 40, "max_new_tokens": 40}

        def document(pages: int, name: str, seed: int) -> DocumentJob:
            make_book(work / f"{name}.docx", pages, seed=seed)
            return DocumentJob(work / f"{name}.docx", work / f"{name}.fra_Latn.docx", "eng_Latn", "fra_Latn",
                               book_options)

        if prepare:
            translator.prepare_document_steps(**book_options)
            while translator.generator.idle_work:  # done while nothing else runs, as after the window's start
                time.sleep(0.01)

        pipeline.translate_document(document(2, "warm-up", seed=1), report=JobReport())  # its kernel variants compiled
        typed_through_app_ms(pipeline, typed, 2, 0)
        alone = typed_through_app_ms(pipeline, typed, repeats, 2)
        book = document(pages, "book", seed=0)
        start = time.perf_counter()
        running = threading.Thread(target=pipeline.translate_document, args=(book,), kwargs={"report": JobReport()})
        running.start()
        while not translator.generator.scheduler.running and running.is_alive():
            time.sleep(0.005)
        mark = timeline.mark() if timeline is not None else 0
        beside = typed_through_app_ms(pipeline, typed, repeats, 2 + repeats, sampler)
        beside_timeline = timeline.typed_since(mark) if timeline is not None else None
        still_running = running.is_alive()
        running.join()
        document_s = time.perf_counter() - start
        documents_apart = pipeline.documents_apart
        pipeline.close()
    return {"typed_alone_ms": statistics.median(alone), "typed_beside_document_ms": statistics.median(beside),
            "ratio": statistics.median(beside) / statistics.median(alone), "document_pages": pages,
            "steps_prepared": prepare,
            "document_still_running_after_the_last_typed": still_running, "document_s": document_s,
            "documents_apart": documents_apart, **({"beside_timeline": beside_timeline} if timeline is not None else {})}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.typed_latency")
    parser.add_argument("--checkpoint", required=True, help="an NLLB checkpoint folder")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--sentences", type=int, default=2048, help="sentences of the document")
    parser.add_argument("--repeats", type=int, default=10, help="typed sentences each way (median)")
    parser.add_argument("--through-app", type=int, metavar="PAGES",
                        help="the document a .docx book of PAGES pages, both through the app's pipeline")
    parser.add_argument("--timeline", action="store_true",
                        help="also what the engine's loop did around each typed sentence beside the document")
    parser.add_argument("--stacks", action="store_true",
                        help="also where the process's threads were while typed text waited or decoded beside the "
                             "document (perturbs the times)")
    parser.add_argument("--unprepared", action="store_true",
                        help="with --through-app: the book's steps not captured beforehand (Translator."
                             "prepare_document_steps), each met the first time in its run")
    parser.add_argument("--documents-here", action="store_true",
                        help="with --through-app: the book's work on this process's threads, not in a process of "
                             "its own as on a GPU")
    parser.add_argument("--paced-rows", type=int, metavar="ROWS",
                        help="document rows a step advances while a person types (the scheduler's PACED_ROWS "
                             "unless given; 0: the documents are not paced)")
    add_out_argument(parser)
    args = parser.parse_args()

    from dragoman.engine import Translator  # here, not above: the book's own process imports this module, not torch

    translator = Translator(args.checkpoint, args.device, args.dtype)
    scheduler = translator.generator.scheduler
    if args.paced_rows is not None:
        scheduler.paced_rows = args.paced_rows or sys.maxsize
    paced = {"paced_rows": scheduler.paced_rows if scheduler.paced_rows < sys.maxsize else 0}
    if args.through_app:
        if translator.needs_warm_up():
            translator.warm_up(num_beams=4, min_new_tokens=32, max_new_tokens=32)
        timeline = LoopTimeline(translator) if args.timeline else None
        sampler = ThreadSampler(translator) if args.stacks else None
        found = through_app(translator, args.through_app, args.repeats, args.documents_here, timeline,
                            prepare=not args.unprepared, sampler=sampler)
        stacks = {} if sampler is None else {
            "stacks": sampler.stop(), "slowest_typed_ms": sampler.slowest[0],
            "slowest_typed_stacks": ThreadSampler.counted(sampler.slowest[1], 40)}
        emit({"device": translator.describe(), **paced, **found, **stacks},
             "typed_latency_through_app", translator.device, args.out)
        translator.teardown()
        return
    typed = translator.default_options(num_beams=4, min_new_tokens=32, max_new_tokens=32)
    document_options = translator.default_options(num_beams=4, min_new_tokens=40, max_new_tokens=40)
    if translator.needs_warm_up():
        translator.warm_up(num_beams=4, min_new_tokens=32, max_new_tokens=32)
    typed_ms(translator, typed, 2)  # kernels compiled and graphs captured for this sentence too
    rng = random.Random(0)
    document = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(10, 60))).capitalize() + "."
                for _ in range(args.sentences)]
    translator.translate(document[:64], "eng_Latn", "fra_Latn", document_options)  # the document's steps warm too

    timeline = LoopTimeline(translator) if args.timeline else None
    sampler = ThreadSampler(translator) if args.stacks else None
    alone = typed_ms(translator, typed, args.repeats)
    alone_timeline = timeline.typed_since(0) if timeline is not None else None
    started = threading.Event()
    start = time.perf_counter()
    running = translator.submit(TranslationRequest(document, "eng_Latn", "fra_Latn", document_options,
                                                   priority=DOCUMENT))
    running.subscribe(on_translation=lambda i, translation: started.set())
    started.wait()
    mark = timeline.mark() if timeline is not None else 0
    beside = typed_ms(translator, typed, args.repeats)
    beside_timeline = timeline.typed_since(mark) if timeline is not None else None
    unannounced = typed_ms(translator, typed, args.repeats, announced=False)
    still_running = not running.done()
    running.result()
    document_s = time.perf_counter() - start
    out = {
        "device": translator.describe(),
        **paced,
        "typed_alone_ms": statistics.median(alone),
        "typed_beside_document_ms": statistics.median(beside),
        "ratio": statistics.median(beside) / statistics.median(alone),
        # as the server's and the command line's typed text comes: no keystroke before it
        "typed_beside_document_unannounced_ms": statistics.median(unannounced),
        "document_sentences": args.sentences,
        "document_still_running_after_the_last_typed": still_running,
        "document_sentences_per_s": args.sentences / document_s,
        **({"alone_timeline_medians": LoopTimeline.medians(alone_timeline),
            "beside_timeline_medians": LoopTimeline.medians(beside_timeline),
            "beside_timeline": beside_timeline} if alone_timeline is not None and beside_timeline is not None else {}),
        **({"stacks": sampler.stop()} if sampler is not None else {}),
    }
    emit(out, "typed_latency", translator.device, args.out)
    translator.teardown()


if __name__ == "__main__":
    main()
