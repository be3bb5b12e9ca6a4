"""Whether a document keeps a fast engine fed: `python -m bench.document_pace --checkpoint DIR [--rate 1100]`.

Makes the .docx book of bench.docx_book and the same sentences as .txt, and translates each
through the app's document path as it runs on a GPU (`TranslationSession.translate_document`: the
document's own process reading, planning, masking and tokenizing it, the pipe, each part submitted
to the real Translator) with an engine that finishes the submitted texts in order at --rate texts/s, giving
each text back as its translation, instead of decoding them. Prints one JSON object: for each
book, the seconds that engine had nothing to do between the first text and the last (a GPU's
idle time waiting for the document's next part), when each part reached it and its texts, the
whole job, and the seconds before the first text reached the engine and after it finished the
last (the reading and the writing that no decoding hides). No GPU: the host's side of a document at a GPU's pace (the book's 600M rate on an
H100 is ~1,100 texts/s, bench.docx_book). The model's weights are read but not used.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import tempfile
import threading
import time
from pathlib import Path

from bench import add_out_argument, emit

TICK_SECONDS = 0.002  # how often the paced engine finishes what its rate allows


def paced_translator(checkpoint: Path, rate: float):
    """A Translator of `checkpoint` whose `submit` queues the texts for a thread that finishes them
    in order at `rate` texts/s and keeps count of the time it had none (`idle`)."""
    from dragoman.engine import Translation, Translator
    from dragoman.engine.handle import TranslationHandle

    class Paced(Translator):
        def start_pacing(self) -> None:
            self.queue: collections.deque = collections.deque()  # (handle, index, text)
            self.ready = threading.Condition()
            self.reset()
            threading.Thread(target=self._pace, daemon=True, name="paced-engine").start()

        def reset(self) -> None:
            self.idle = 0.0
            self.empty_since: float | None = None
            self.first: float | None = None
            self.parts: list[tuple[float, int]] = []  # (seconds since the first part, texts)

        def submit(self, request):
            handle = TranslationHandle(len(request.texts))
            with self.ready:
                now = time.perf_counter()
                self.first = now if self.first is None else self.first
                if self.empty_since is not None:
                    self.idle += now - self.empty_since
                    self.empty_since = None
                self.parts.append((now - self.first, len(request.texts)))
                self.queue.extend((handle, i, text) for i, text in enumerate(request.texts))
                self.ready.notify()
            return handle

        def _pace(self) -> None:
            owed, last = 0.0, time.perf_counter()
            while True:
                with self.ready:
                    while not self.queue:
                        self.ready.wait()
                        owed, last = 0.0, time.perf_counter()
                time.sleep(TICK_SECONDS)
                now = time.perf_counter()
                owed, last = owed + (now - last) * rate, now
                finished = []
                with self.ready:
                    while owed >= 1 and self.queue:
                        finished.append(self.queue.popleft())
                        owed -= 1
                    if not self.queue:
                        self.empty_since = time.perf_counter()
                for handle, i, text in finished:
                    handle.finish(i, Translation(text, -1.0))

    translator = Paced(checkpoint, device="cpu", dtype="float32")
    translator.start_pacing()
    return translator


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.document_pace", description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, required=True, help="NLLB checkpoint folder (its tokenizer is used)")
    parser.add_argument("--rate", type=float, default=1100, help="texts the paced engine finishes a second")
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3, help="runs of each book (each figure the median)")
    add_out_argument(parser)
    args = parser.parse_args()

    from bench.docx_book import make_book, make_books
    from dragoman.app.session.jobs import DocumentJob, JobReport
    from dragoman.app.session.session import TranslationSession
    from dragoman.app.session.terms import Terms
    from dragoman.app.settings import AppPaths

    translator = paced_translator(args.checkpoint, args.rate)
    out: dict = {"pages": args.pages, "rate": args.rate, "runs": args.runs}
    with tempfile.TemporaryDirectory(prefix="dragoman-document-pace-") as folder:
        work = Path(folder)
        book, text, _ = make_books(work, args.pages)
        warm_up = work / "warm-up.docx"
        make_book(warm_up, 2, seed=1)
        runs: dict[str, list[dict[str, float]]] = {"docx": [], "txt": []}  # each run's figures, by name
        # The warm-up first (its job starts the next job's process, which is given the tokenizer
        # while it waits, as in an app that has run a while), then each book in turn; a new data
        # folder each run, so that nothing is cached.
        for n, (name, source) in enumerate([("warm-up", warm_up)] + [("docx", book), ("txt", text)] * args.runs):
            session = TranslationSession.open(translator, AppPaths.under(work / f"home-{n}"), terms=Terms())
            session.documents_apart = True  # as on a GPU (the paced engine's model is on the CPU)
            try:
                job = DocumentJob(source, work / f"out-{n}{source.suffix}", "eng_Latn", "fra_Latn", {}, overwrite=True)
                translator.reset()
                start = time.perf_counter()
                session.translate_document(job, report=JobReport())
                end = time.perf_counter()
                if name in runs:
                    assert translator.first is not None and translator.empty_since is not None
                    runs[name].append({"engine_idle_s": translator.idle, "job_s": end - start,
                                       "before_first_text_s": translator.first - start,
                                       "after_last_text_s": end - translator.empty_since})
                    out[f"{name}_parts"] = [(round(at, 3), texts) for at, texts in translator.parts]
            finally:
                session.close()
        for name, timed in runs.items():
            for key in timed[0]:
                out[f"{name}_{key}"] = statistics.median(run[key] for run in timed)
            out[f"{name}_paced_s"] = sum(texts for _, texts in out[f"{name}_parts"]) / args.rate
    translator.loop.close()
    emit(out, f"document_pace_{args.pages}", None, args.out)


if __name__ == "__main__":
    main()
