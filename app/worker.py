"""The engine thread: one QThread owns the Translator (and so the GPU) for the whole session.

The window posts commands (load a model, translate a job) through a queue and hears back through
signals only; this thread never touches a widget, the window never runs the engine. A job stops
early, through the engine's `should_stop`, when it is cancelled, when a newer typed-text job
supersedes it, or when the worker is asked to quit.

Document jobs (app.jobs.DocumentJob) go through the same queue, after any typed text that is
waiting; while one runs, typed text that arrives pauses it (the sentences in flight are put back,
finished ones kept) so that typing stays instant.

Typed text is cut into sentences (app.typed_text) and keeps its recent sentence translations in
memory (`RecentTranslations`): a pause in typing decodes only the sentences that changed, and the
sentence being edited decodes alone (on the GPU, the path of a lone sentence:
engine.model.FoldedSources). Partial hypotheses are reported per line, the line's other sentences
as far as they are known.

A typed job with a `completion` completes one sentence from the start of its translation that a
person typed in the target pane (`completing` streams it); a translation the person accepts
(`accept`) goes into the translation memory with the job's context, so that the same sentence,
model and options give it back from then on.

A click on a translated sentence asks for its alternatives (`find_alternatives`): the sentence
decoded alone with ALTERNATIVES beams (at least), its best finished hypotheses coming back in
`alternatives_found`. It runs as typed text does, before waiting documents.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import QThread, Signal

from dragoman.app import detect
from dragoman.app.confidence import doubts
from dragoman.app.jobs import DocumentJob, JobReport, open_cache, open_memory, run_document_job, translation_context
from dragoman.app.terms import PairTerms, Terms, translate_full_masked
from dragoman.app.typed_text import TypedText
from dragoman.engine import get_language


@dataclass(frozen=True)
class TranslationJob:
    texts: list[str]  # the lines of the source box, each cut into sentences (app.typed_text); one translation each
    source: str  # FLORES-200 code; with `detect`, the language used when detection is unsure
    target: str
    options: dict = field(default_factory=dict)  # overrides of Translator.default_options (None = keep)
    detect: bool = False  # detect the source language first (emits `detected`)
    typed: bool = True  # typed text: runs first, and a newer typed job supersedes it
    adapter: str = ""  # LoRA adapter: a subfolder of adapters_dir; "" = the base model
    adapters_dir: str = ""  # the adapters folder (settings); "" = keep the engine's
    # (sentence index, the start of its translation a person typed): that sentence is completed from
    # the start (Translator.translate's `starts`), the others come from what is known of them.
    completion: tuple[int, str] | None = None


ALTERNATIVES = 4  # hypotheses a click on a sentence asks for


@dataclass(frozen=True)
class FindAlternatives:
    """The alternatives of one sentence of a typed job, for a click on its translation."""

    job: TranslationJob  # the languages, options and adapter it was translated with
    sentence: str
    count: int = ALTERNATIVES


@dataclass(frozen=True)
class AcceptTranslation:
    """A translation a person edited and accepted: stored in the translation memory with the job's context."""

    job: TranslationJob  # the languages, options and adapter it was translated with
    sentence: str
    translation: str


@dataclass(frozen=True)
class LoadModel:
    model_dir: Path
    device: str = "auto"
    dtype: str = "auto"
    adapters_dir: str = ""  # the LoRA adapters folder ("" = none until a job names one)
    adapter_slots: int | None = None  # LoRA adapters resident at once (None: the engine's default)
    gpu_memory: int | None = None  # bytes of GPU memory for translation beyond the weights (None: the engine's default)
    typed_options: dict = field(default_factory=dict)  # what typed text will use: warmed up at load on the GPU


class RecentTranslations:
    """The translations of recently typed sentences, by everything they depend on, least recently used
    dropped past `capacity`. Kept in memory only: typed text is not written to disk."""

    def __init__(self, capacity: int = 4096):
        self.capacity = capacity
        self._found: OrderedDict[tuple, object] = OrderedDict()  # engine.Translation, by context and text

    def translate(self, translator, texts, source, target, options, adapter, on_partial, should_stop,
                  known: dict[str, str] | None = None, terms: PairTerms | None = None,
                  scores: dict[str, float] | None = None) -> list:
        """translator.translate(texts, ...) for typed text, decoding only the texts not `known` (from
        the translation memory) and not seen with the same languages, options, adapter and terms
        (app.terms): the others are reported at once through `on_partial`. `scores` receives the
        engine's score of each text it has one for."""
        context = (translator.adapter_identity(adapter), source, target, options)
        positions = translator.config.max_position_embeddings
        sentence_terms = [tuple(terms.of(t, max_length=options.length, max_positions=positions)) if terms else ()
                          for t in texts]
        results: list[str | None] = [None] * len(texts)
        missing = []
        for i, text in enumerate(texts):
            if known and text in known:
                results[i] = known[text]
                on_partial(i, known[text])
                continue
            found = self._found.get((context, text, sentence_terms[i]))
            if found is None:
                missing.append(i)
            else:
                self._found.move_to_end((context, text, sentence_terms[i]))
                results[i] = found.text
                on_partial(i, found.text)
                if scores is not None and found.score is not None:
                    scores[text] = found.score
        if missing:
            done = translate_full_masked(
                translator, [texts[i] for i in missing], source, target, options, terms, priority=0,
                on_partial=lambda j, text: on_partial(missing[j], text), should_stop=should_stop, adapter=adapter,
            )
            for i, result in zip(missing, done):
                if result is not None:  # not stopped before it finished
                    results[i] = result.text
                    self._found[context, texts[i], sentence_terms[i]] = result
                    if scores is not None and result.score is not None:
                        scores[texts[i]] = result.score
            while len(self._found) > self.capacity:
                self._found.popitem(last=False)
        return results

    def clear(self) -> None:
        self._found.clear()


log = logging.getLogger(__name__)
_QUIT = object()
# Queue ranks: lower is taken first, in submission order within a rank. A model load keeps its place
# among typed jobs; quitting comes after everything so that each queued job is said to be dropped.
_FIRST, _DOCUMENTS, _LAST = 0, 1, 2


class EngineWorker(QThread):
    loaded = Signal(str)  # what runs now: Translator.describe()
    holding = Signal(str)  # Translator.describe() after a job: what the engine holds now
    kernels_unavailable = Signal(str)  # once: the GPU kernels failed and the slower PyTorch path runs
    load_failed = Signal(str)  # why the model could not be loaded
    detected = Signal(int, str)  # job id, detected FLORES-200 code ("" when unsure)
    partial = Signal(int, int, str)  # job id, segment index, current best hypothesis of that segment
    translated = Signal(int, list)  # job id, one translation per segment (the final texts)
    laid_out = Signal(int, object)  # job id, (TypedText, its sentences' translations), before `translated`
    completing = Signal(int, str)  # job id, the hypothesis of the sentence a completion job completes
    remembered = Signal(str, str)  # a sentence and the translation the memory now holds for it
    alternatives_found = Signal(int, object)  # job id, [engine.Translation]: the sentence's best, best first
    doubted = Signal(int, object)  # job id, {segment index: why its translation may be wrong}, before `translated`
    failed = Signal(int, str)  # job id, error message
    cancelled = Signal(int)  # job id: cancelled, superseded, or dropped at quit
    document_progress = Signal(int, int, int)  # job id, sentences done, total
    document_done = Signal(int, str)  # job id, the output file written
    document_report = Signal(int, object)  # job id, its JobReport, before `document_done`
    document_failed = Signal(int, str)  # job id, error message

    def __init__(self, parent=None, paths=None):
        super().__init__(parent)
        self.setObjectName("dragoman-engine")
        self._queue: queue.PriorityQueue = queue.PriorityQueue()
        self._order = itertools.count()  # ties in the priority queue: first in, first out
        self._paths = paths  # AppPaths of the translation cache and memory (None: the default ones)
        self._cache = None  # the translation cache of document jobs, opened on first use by this thread
        self._memory = None  # the translation memory, likewise
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._cancelled: set[int] = set()
        self._latest_typed = 0
        self._quitting = False
        self.translator = None  # owned by this thread: only run() and what it calls use it
        self._recent = RecentTranslations()  # typed lines' translations by the loaded model
        self._kernels_reported = False  # the kernels' failure is for the whole process: said once
        self._terms = Terms()  # the glossaries and do-not-translate settings jobs keep to (set_terms)

    # -- called from the GUI thread ------------------------------------------------------------------

    def load(
        self, model_dir: str | Path, device: str = "auto", dtype: str = "auto", adapters_dir: str | Path = "",
        adapter_slots: int | None = None, typed_options: dict | None = None, gpu_memory: int | None = None,
    ) -> None:
        """Load (or switch to) a model; jobs submitted afterwards use it. On the GPU, a typed
        sentence with `typed_options` (overrides of the model's default options) is translated
        while loading, so that the first one typed does not wait for kernels and graphs."""
        self._put(_FIRST, LoadModel(Path(model_dir), device, dtype, str(adapters_dir), adapter_slots, gpu_memory,
                                    dict(typed_options or {})))

    def submit(self, job: TranslationJob | DocumentJob) -> int:
        """Queue a job; returns its id, which every signal about it carries."""
        job_id = next(self._ids)
        typed = isinstance(job, TranslationJob) and job.typed
        if typed:
            with self._lock:
                self._latest_typed = job_id
        self._put(_FIRST if typed else _DOCUMENTS, (job_id, job))
        return job_id

    def find_alternatives(self, job: TranslationJob, sentence: str) -> int:
        """Queue the search for `sentence`'s alternatives; returns the id `alternatives_found` (or
        `failed`) carries."""
        job_id = next(self._ids)
        self._put(_FIRST, (job_id, FindAlternatives(job, sentence)))
        return job_id

    def accept(self, job: TranslationJob, sentence: str, translation: str) -> None:
        """Store a translation a person accepted in the memory (on this thread); `remembered` follows."""
        self._put(_FIRST, AcceptTranslation(job, sentence, translation))

    def set_terms(self, terms: Terms) -> None:
        """The glossaries and do-not-translate settings of the jobs that start from now on."""
        with self._lock:
            self._terms = terms

    def _current_terms(self) -> Terms:
        with self._lock:
            return self._terms

    def cancel(self, job_id: int) -> None:
        with self._lock:
            self._cancelled.add(job_id)

    def stop(self) -> None:
        """Ask the thread to end: the running job stops at its next decoding step. Then wait()."""
        with self._lock:
            self._quitting = True
        self._put(_LAST, _QUIT)

    def _put(self, rank: int, command) -> None:
        self._queue.put((rank, next(self._order), command))

    # -- the thread ----------------------------------------------------------------------------------

    def run(self) -> None:
        try:
            while (command := self._queue.get()[2]) is not _QUIT:
                if self._quitting:  # stop() was called: what is still queued is dropped, and said so
                    if isinstance(command, tuple):
                        self.cancelled.emit(command[0])
                elif isinstance(command, LoadModel):
                    self._load(command)
                elif isinstance(command, AcceptTranslation):
                    self._remember(command)
                else:
                    self._run_job(*command)
        finally:
            self._unload()
            for store in (self._cache, self._memory):
                if store is not None:
                    store.close()
            self._cache = self._memory = None

    def _open_memory(self):
        if self._memory is None:
            self._memory = open_memory(self._paths)
        return self._memory

    def _remember(self, command: AcceptTranslation) -> None:
        job = command.job
        if self.translator is None:
            return
        options = self.translator.default_options(**job.options)
        context = translation_context(self.translator, job.adapter, job.source, job.target, options)
        self._open_memory().add(job.source, job.target, {command.sentence: command.translation}, context)
        self.remembered.emit(command.sentence, command.translation)

    def _should_stop(self, job_id: int, typed: bool) -> bool:
        with self._lock:
            return self._quitting or job_id in self._cancelled or (typed and job_id < self._latest_typed)

    def _load(self, command: LoadModel) -> None:
        from dragoman.engine import Translator

        self._unload()  # free the old model's memory before the new one arrives
        try:
            translator = Translator(
                command.model_dir, device=command.device, dtype=command.dtype,
                adapters_dir=command.adapters_dir or None, adapter_slots=command.adapter_slots,
                gpu_memory=command.gpu_memory,
            )
            translator.bind_gpu_to_thread()
        except Exception as e:  # CheckpointError, DeviceError, TokenizerError, out of memory...
            self.load_failed.emit(str(e) or type(e).__name__)
            return
        if translator.needs_warm_up():
            try:
                translator.warm_up(**command.typed_options)
            except Exception:  # the model works without it: the first sentence just waits longer
                log.warning("warming up %s failed", command.model_dir, exc_info=True)
        self.translator = translator
        self.loaded.emit(translator.describe())
        self._report_kernels()

    def _report_kernels(self) -> None:
        """Say once, if the GPU kernels failed (at the warm-up, or in a job), that the slower path runs."""
        message = self.translator.kernels_unavailable() if self.translator is not None else None
        if message and not self._kernels_reported:
            self._kernels_reported = True
            self.kernels_unavailable.emit(message)

    def _unload(self) -> None:
        self._recent.clear()  # they were the old model's
        if self.translator is not None:
            self.translator.teardown()
            self.translator = None

    def _run_job(self, job_id: int, job: TranslationJob) -> None:
        try:
            if isinstance(job, DocumentJob):
                self._translate_document(job_id, job)
            elif isinstance(job, FindAlternatives):
                self._find_alternatives(job_id, job)
            else:
                self._translate(job_id, job)
        finally:
            with self._lock:
                self._cancelled.discard(job_id)
        if self.translator is not None:
            self._report_kernels()
            self.holding.emit(self.translator.describe())

    def _translate(self, job_id: int, job: TranslationJob) -> None:
        def should_stop() -> bool:
            return self._should_stop(job_id, job.typed)

        if should_stop():
            self.cancelled.emit(job_id)
            return
        if self.translator is None:
            self.failed.emit(job_id, "No model is loaded.")
            return
        shown: dict[int, str] = {}

        def on_partial(index: int, text: str) -> None:
            if shown.get(index) != text and not should_stop():
                shown[index] = text
                self.partial.emit(job_id, index, text)

        try:
            source = job.source
            if job.detect:
                found = detect.detect_language("\n".join(job.texts))
                self.detected.emit(job_id, found or "")
                source = found or source
            options = self.translator.default_options(**job.options)
            if job.adapters_dir:
                self.translator.set_adapters_dir(job.adapters_dir)
            text = TypedText(job.texts, get_language(source).script, get_language(job.target).script)
            current: list[str | None] = [None] * len(text.sentences)

            def on_sentence(index: int, translation: str) -> None:  # a sentence's hypothesis: its line's
                current[index] = translation
                on_partial(text.line_of[index], text.line(text.line_of[index], current))

            def on_completion(index: int, translation: str) -> None:
                on_sentence(index, translation)
                if not should_stop():
                    self.completing.emit(job_id, translation)

            known: dict[str, str] = {}
            scores: dict[str, float] = {}  # the engine's, by sentence (app.confidence)
            terms = self._current_terms().for_pair(source, job.target)
            positions = self.translator.config.max_position_embeddings
            if job.typed:
                context = translation_context(self.translator, job.adapter, source, job.target, options)
                known = self._open_memory().find(source, job.target, context, text.sentences)
                completed = job.completion[0] if job.completion is not None else None
                others = [i for i in range(len(text.sentences)) if i != completed]
                found = self._recent.translate(self.translator, [text.sentences[i] for i in others], source,
                                               job.target, options, job.adapter,
                                               lambda k, t: on_sentence(others[k], t), should_stop, known, terms, scores)
                results = [None] * len(text.sentences)
                for i, result in zip(others, found):
                    results[i] = result
                if completed is not None:  # a person's start: neither the memory nor recent translations apply
                    known.pop(text.sentences[completed], None)
                    [result] = self.translator.translate_full(
                        [text.sentences[completed]], source, job.target, options, priority=0,
                        on_partial=lambda _, t: on_completion(completed, t), should_stop=should_stop,
                        adapter=job.adapter, starts=[job.completion[1]],
                        terms=[terms.of(text.sentences[completed], max_length=options.length, max_positions=positions)],
                    )
                    results[completed] = self._text_and_score(text.sentences[completed], result, scores)
            else:
                full = translate_full_masked(
                    self.translator, text.sentences, source, job.target, options, terms, priority=1,
                    on_partial=on_sentence, should_stop=should_stop, adapter=job.adapter,
                )
                results = [self._text_and_score(s, t, scores) for s, t in zip(text.sentences, full)]
        except Exception as e:  # a bad language code, out of memory...: the job fails, the thread goes on
            self.failed.emit(job_id, str(e) or type(e).__name__)
            return
        if any(r is None for r in results) or should_stop():
            self.cancelled.emit(job_id)
            return
        reasons: dict[int, list[str]] = {}
        for index, (sentence, result) in enumerate(zip(text.sentences, results)):
            if sentence not in known:  # a person chose those
                reasons.setdefault(text.line_of[index], []).extend(
                    doubts(sentence, result, source, job.target, scores.get(sentence)))
        self.doubted.emit(job_id, {line: "; ".join(dict.fromkeys(r)) for line, r in reasons.items() if r})
        self.laid_out.emit(job_id, (text, results))
        self.translated.emit(job_id, text.lines(results))

    def _find_alternatives(self, job_id: int, command: FindAlternatives) -> None:
        if self.translator is None:
            self.failed.emit(job_id, "No model is loaded.")
            return
        job = command.job
        try:
            options = self.translator.default_options(**job.options)
            options = options.with_changes(num_beams=max(options.num_beams, command.count))
            [found] = self.translator.translate_full([command.sentence], job.source, job.target, options, priority=0,
                                                     adapter=job.adapter, alternatives=command.count)
        except Exception as e:  # out of memory, an adapter gone...: said, the thread goes on
            self.failed.emit(job_id, str(e) or type(e).__name__)
            return
        self.alternatives_found.emit(job_id, [found, *found.alternatives])

    @staticmethod
    def _text_and_score(sentence: str, translation, scores: dict[str, float]) -> str | None:
        """The text of `sentence`'s Translation (None: stopped), its score kept in `scores`."""
        if translation is None:
            return None
        if translation.score is not None:
            scores[sentence] = translation.score
        return translation.text

    def _typed_waiting(self) -> bool:
        """Is a typed job, or a click's alternatives, next in the queue (not a model load, not quitting)?"""
        with self._queue.mutex:
            head = self._queue.queue[0][2] if self._queue.queue else None
        if not isinstance(head, tuple):
            return False
        return isinstance(head[1], FindAlternatives) or (isinstance(head[1], TranslationJob) and head[1].typed)

    def _run_waiting_typed(self) -> None:
        while self._typed_waiting():
            self._run_job(*self._queue.get_nowait()[2])

    def _translate_document(self, job_id: int, job: DocumentJob) -> None:
        def should_stop() -> bool:
            return self._should_stop(job_id, False)

        if should_stop():
            self.cancelled.emit(job_id)
            return
        if self.translator is None:
            self.document_failed.emit(job_id, "No model is loaded.")
            return
        if self._cache is None:
            self._cache = open_cache(self._paths)
        translator = _YieldingToTypedText(self, self.translator)
        report = JobReport()
        try:
            written = run_document_job(
                job, translator, self._cache,
                progress=lambda done, total: self.document_progress.emit(job_id, done, total), should_stop=should_stop,
                memory=self._open_memory(), report=report, terms=self._current_terms(),
            )
        except Exception as e:  # DocumentError, Cancelled, a file its format library chokes on, out of memory...
            if should_stop():
                self.cancelled.emit(job_id)
            else:
                self.document_failed.emit(job_id, str(e).splitlines()[0] if str(e) else type(e).__name__)
            return
        self.document_report.emit(job_id, report)
        self.document_done.emit(job_id, str(written))


class _YieldingToTypedText:
    """The translator as a document job sees it: when typed text is queued, the sentences being
    decoded stop, the typed jobs run, and the unfinished sentences start again (finished ones stay)."""

    def __init__(self, worker: EngineWorker, translator):
        self._worker = worker
        self._translator = translator

    def __getattr__(self, name):
        return getattr(self._translator, name)

    def translate(self, texts: list[str], *args, should_stop=None, on_result=None, on_translation=None, terms=None,
                  **kwargs) -> list[str | None]:
        def stop_for_now() -> bool:
            return (should_stop is not None and should_stop()) or self._worker._typed_waiting()

        def reported(pending: list[int], callback):
            """on_result (or on_translation) for a call over texts[pending]: its indices are the pending list's."""
            return None if callback is None else lambda j, translation: callback(pending[j], translation)

        results: list[str | None] = [None] * len(texts)
        pending = list(range(len(texts)))
        while pending:
            found = self._translator.translate([texts[i] for i in pending], *args, should_stop=stop_for_now,
                                               on_result=reported(pending, on_result),
                                               on_translation=reported(pending, on_translation), **kwargs,
                                               terms=None if terms is None else [terms[i] for i in pending])
            for i, result in zip(pending, found):
                results[i] = result
            pending = [i for i in pending if results[i] is None]
            if not pending or not self._worker._typed_waiting() or (should_stop is not None and should_stop()):
                break
            self._worker._run_waiting_typed()
        return results
