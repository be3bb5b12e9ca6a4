"""A document's texts through the translation pipeline: the translation memory, the cache and the
engine, in parts (`DocumentBatch`), for `TranslationSession.translate_document` and
`translate_segments`.

The texts go to the engine in parts (`part_sizes`), pulled from the document as its segments are
planned (`DocumentTranslator.translate_stream`): each part is planned, looked up in the memory and
the cache and masked while the engine decodes the parts before it, so that decoding starts once
the first part is ready, not the whole document. Every part but the last waits for its
translations on a thread of its own; their results come on the engine's thread. Translations are
stored in the cache as they come, every CACHE_SECONDS, and whatever came before a stop or an error
is stored before `run` returns. A part that fails stops the others, and a stop ends them all.
From when the last part decodes, each translation is told as it is known (`found`), so that the
document's segments are rebuilt and placed while the rest decodes (segments.PlacingAlongside); not
before, while this process prepares the parts the engine waits for.
Where the job keeps a report, each translation's doubts are judged as it comes, on a thread of
their own (confidence.DoubtsAlongside). On a GPU all of this runs in the document's own process
(app.session.document_process), apart from the engine's thread.
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

from dragoman.app.session.confidence import DoubtsAlongside
from dragoman.app.session.jobs import DocumentJob, Doubtful, JobReport
from dragoman.app.session.terms import Masked, PairTerms, cache_text
from dragoman.engine import DOCUMENT

if TYPE_CHECKING:
    from dragoman.app.session.session import TranslationSession
    from dragoman.engine import DecodingOptions, Translation

# While a document decodes, its translations are stored at most this often (what a killed run can
# lose): a GPU finishes thousands of sentences a second, and each store is one commit (no fsync).
CACHE_SECONDS = 0.25
# The first part is small, so that decoding starts at once; each next one this many times larger,
# up to the largest. A part is prepared (planned, masked, tokenized, submitted) while the engine
# decodes those before it, so the engine runs dry unless preparing is GROWTH times faster than
# decoding; past the largest, as fast is enough. At growth 8 and no largest part a GPU waited for
# the third part of a book; at 2 and 1,024 it waits least (docs/performance.md, "Documents
# through the app").
FIRST_DOCUMENT_PART = 64
DOCUMENT_PART_GROWTH = 2
LARGEST_DOCUMENT_PART = 1024


def part_sizes() -> Iterator[int]:
    """The sizes of the parts in which a document's texts go to the engine, in order."""
    size = FIRST_DOCUMENT_PART
    while True:
        yield size
        size = min(size * DOCUMENT_PART_GROWTH, LARGEST_DOCUMENT_PART)


class DocumentTranslator:
    """`translate_batch` of a document job (app.documents.segments.StreamingTranslator): each call
    one DocumentBatch, whose texts come as a list or, streamed, as the document is planned."""

    def __init__(self, pipeline: TranslationSession, job: DocumentJob, options: DecodingOptions, context: str,
                 terms: PairTerms, should_stop: Callable[[], bool] | None,
                 progress: Callable[[int, int], None] | None, report: JobReport | None):
        self.pipeline, self.job, self.options, self.context, self.terms = pipeline, job, options, context, terms
        self.should_stop, self.progress, self.report = should_stop, progress, report

    def __call__(self, texts: list[str]) -> list[str | None]:
        return self.translate_stream(iter(texts))

    def translate_stream(self, texts: Iterator[str],
                         found: Callable[[str, str], None] | None = None) -> list[str | None]:
        return DocumentBatch(self.pipeline, self.job, texts, self.options, self.context, self.terms,
                             self.should_stop, self.progress, self.report, found).run()


class DocumentBatch:
    """One `translate_batch(texts)` call of a document job: `run` pulls the texts in parts and gives
    each text's translation (None: stopped). `progress(done, total)` follows the results, at most
    every ~0.5%, from when all texts are pulled; `report` counts the texts of each kind and lists
    the doubtful translations; `found(text, translation)` is told each translation as it is known."""

    def __init__(self, pipeline: TranslationSession, job: DocumentJob, texts: Iterable[str],
                 options: DecodingOptions, context: str, terms: PairTerms, should_stop: Callable[[], bool] | None,
                 progress: Callable[[int, int], None] | None, report: JobReport | None,
                 found: Callable[[str, str], None] | None = None):
        self.pipeline, self.job, self.options, self.context, self.terms = pipeline, job, options, context, terms
        self.source = iter(texts)
        self.texts: list[str] = []  # pulled so far
        self.pulled_all = False  # len(self.texts) is the total
        self.should_stop, self.progress, self.report = should_stop, progress, report
        self.tell_found = found
        # Told from when the last part decodes: before, this process prepares the parts the engine waits for.
        self.telling = False
        self.untold: list[tuple[str, str]] = []
        self.found: dict[str, str] = {}
        self.remembered: set[str] = set()  # chosen by a person: not doubted
        self.verbatim: set[str] = set()  # nothing to translate
        self.masked: dict[str, Masked] = {}
        self.keys: dict[str, str] = {}  # the cache keys on what the model read and keeps what it wrote, marks and all
        self.scores: dict[str, float] = {}  # the engine's, for the doubts
        self.unstored: dict[str, str] = {}
        self.lock = threading.Lock()  # results come on the engine's thread while later parts are prepared
        self.store_by = time.monotonic() + CACHE_SECONDS
        self.reported = 0
        self.step = 1  # of progress, once the total is known
        # Judged while the engine decodes the rest: judging them all at the end would keep the job waiting.
        self.judge = DoubtsAlongside(job.source, job.target) if report is not None else None
        self.failed = threading.Event()  # a part failed, or the preparation: the others stop
        self.errors: list[BaseException] = []

    def run(self) -> list[str | None]:
        decoding: list[threading.Thread] = []
        judged: dict[str, list[str]] = {}
        try:
            for size in part_sizes():
                if self.stopped():  # a part failed, or the job was stopped: the rest is not prepared
                    break
                part = list(itertools.islice(self.source, size))  # planned now, where streamed
                self.texts.extend(part)
                if len(part) < size:
                    self.pulled_all = True
                    self.step = max(1, len(self.texts) // 200)
                missing = self.prepare(part)
                if missing and self.pulled_all:
                    self.decode(missing, last=True)  # on this thread
                elif self.pulled_all:
                    with self.lock:
                        self.start_telling()
                elif missing:
                    decoding.append(threading.Thread(target=self.decode, args=(missing,), daemon=True,
                                                     name="dragoman-document-part"))
                    decoding[-1].start()
                if self.pulled_all:
                    break
        except BaseException:
            self.failed.set()
            raise
        finally:
            for thread in decoding:
                thread.join()
            with self.lock:
                self.store()
            if self.judge is not None:
                judged = self.judge.close()
        if self.errors:
            raise self.errors[0]
        if self.report is not None:
            self.add_to_report(judged)
        return [self.found.get(t) for t in self.texts]

    def stopped(self) -> bool:
        return self.failed.is_set() or (self.should_stop is not None and self.should_stop())

    def prepare(self, part: list[str]) -> list[str]:
        """The part's texts from the memory, as they are (verbatim) and from the cache; returns
        those left for the engine."""
        pipeline, job = self.pipeline, self.job
        mine = pipeline.recall(job, self.context, part)
        self.masked.update(zip(part, pipeline.masked(self.terms, part, self.options, tagged=True)))
        as_is = {t for t in part if t not in mine and self.masked[t].verbatim}
        self.keys.update((t, cache_text(self.masked[t].text, self.masked[t].terms)) for t in part)
        left = [t for t in part if t not in mine and t not in as_is]
        cache = pipeline.cache
        stored = cache.get_many(self.context, [self.keys[t] for t in left]) if cache is not None else {}
        cached = {t: self.masked[t].restore(stored[self.keys[t]]) for t in left if self.keys[t] in stored}
        with self.lock:
            self.remembered.update(mine)
            self.verbatim.update(as_is)
            for known in (mine, {t: t for t in as_is}, cached):
                for text, translation in known.items():
                    self.add_found(text, translation)
            self.tell_progress(at_least_step=False)
        missing = [t for t in left if t not in cached]
        if self.report is not None:
            self.report.remembered += len(mine)
            self.report.cached += len(cached)
            self.report.translated += len(missing)
        return missing

    def decode(self, missing: list[str], last: bool = False) -> None:
        """The engine's translations of `missing` (`last`: the last part), waited for; an error
        stops the other parts."""
        job, masked = self.job, self.masked
        try:
            results = self.pipeline.translator.translate(
                [masked[t].text for t in missing], job.source, job.target, self.options, priority=DOCUMENT,
                should_stop=self.stopped, adapter=job.adapter,
                on_translation=lambda i, translation: self.on_translation(missing[i], translation, last),
                terms=[masked[t].terms for t in missing])
            with self.lock:
                for text, result in zip(missing, results):
                    if result is not None and text not in self.found:  # from a translator that does not report
                        self.unstored[text] = result
                        self.add_found(text, masked[text].restore(result))
        except BaseException as e:
            self.errors.append(e)
            self.failed.set()

    def on_translation(self, text: str, translation: Translation, last: bool = False) -> None:
        """A text's translation, as the engine reports it (on its thread; `last`: of the last part)."""
        with self.lock:
            if last and not self.telling:
                self.start_telling()
            if translation.score is not None:
                self.scores[text] = translation.score
            self.unstored[text] = translation.text
            self.add_found(text, self.masked[text].restore(translation.text))
            if self.judge is not None:
                self.judge.add(text, self.found[text], translation.score)
            if time.monotonic() >= self.store_by:
                self.store()
            self.tell_progress()

    def add_found(self, text: str, translation: str) -> None:
        """A text's translation known (with the lock held)."""
        self.found[text] = translation
        if self.tell_found is not None and self.telling:
            self.tell_found(text, translation)
        elif self.tell_found is not None:
            self.untold.append((text, translation))

    def start_telling(self) -> None:
        """`found` told what was found so far, and from now on each as it is (with the lock held)."""
        self.telling = True
        if self.tell_found is not None:
            for text, translation in self.untold:
                self.tell_found(text, translation)
        self.untold.clear()

    def store(self) -> None:
        """The translations not yet in the cache put there (with the lock held)."""
        cache = self.pipeline.cache
        if cache is not None and self.unstored:
            cache.put_many(self.context, {self.keys[t]: translation for t, translation in self.unstored.items()})
        self.unstored.clear()
        self.store_by = time.monotonic() + CACHE_SECONDS

    def tell_progress(self, at_least_step: bool = True) -> None:
        """`progress` told, where `step` more texts are done (or all, or `at_least_step` is off), with the lock held."""
        found, total = len(self.found), len(self.texts)
        if self.progress and self.pulled_all and (not at_least_step or found - self.reported >= self.step
                                                   or found == total):
            self.reported = found
            self.progress(found, total)

    def add_to_report(self, judged: dict[str, list[str]]) -> None:
        """Every text counted, and the engine's translations found doubtful listed (those judged
        alongside as judged, the others now)."""
        report, job = self.report, self.job
        assert report is not None
        for text in self.texts:
            report.sentences += 1
            translation = self.found.get(text)
            if text in self.remembered or text in self.verbatim:
                continue
            reasons = judged[text] if text in judged else self.pipeline.doubts_of(
                text, translation, job.source, job.target, self.scores.get(text))
            if reasons and translation is not None:  # (only a translation has reasons)
                report.doubtful.append(Doubtful(report.sentences, text, translation, tuple(reasons),
                                                self.scores.get(text)))
