"""The window's adapter to the engine: a QThread that loads the Translator and runs its translation
pipeline (app.pipeline.pipeline: the pipeline itself) for the whole run of the window, turning what
the engine's handles report into signals.

The window posts commands (load a model, translate a job, find a sentence's alternatives, accept a
translation) through a queue and hears back through signals only; these threads never touch a
widget, the window never runs the engine. Each command is a few lines over the pipeline. A job
stops early (its engine handle cancelled) when it is cancelled, when a newer typed-text job
supersedes it, or when the worker is asked to quit. A new model is loaded beside the working one,
which goes on serving where the new settings fail (a precision or device the engine refuses).

The device belongs to the engine's own loop (engine.Translator.submit), which decodes whatever is
submitted together, typed text first. Document jobs (app.pipeline.jobs.DocumentJob) run one after
another on a thread of their own: typed text and alternatives (Alt+Down, the context menu), translated on this one
meanwhile, join the engine's batch at its next step and come back while the document goes on,
neither stopped nor started again. A model load waits for the running document.

Partial hypotheses are reported per line, the line's other sentences as far as they are known; a
completion job (`TranslationJob.completion`) also streams the completed sentence (`completing`).
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path

from PySide6.QtCore import QThread, Signal

from dragoman.app.session.jobs import DocumentJob, JobReport
from dragoman.app.session.session import ALTERNATIVES, TranslationJob, TranslationSession
from dragoman.app.session.terms import Terms
from dragoman.app.settings import AppPaths
from dragoman.app.wording import one_line


@dataclass(frozen=True)
class FindAlternatives:
    """The alternatives of one sentence of a typed job, asked for from the translation pane (Alt+Down, the context menu)."""

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
    typed_options: dict = field(default_factory=dict)  # what typed text will use: warmed up once loaded, on the GPU


log = logging.getLogger(__name__)


def _out_of_memory(error: Exception) -> bool:
    """Did a load fail for want of memory (torch's OutOfMemoryError, Python's MemoryError)? Then it may
    fit once the working model makes way."""
    return isinstance(error, MemoryError) or type(error).__name__ == "OutOfMemoryError" \
        or "out of memory" in str(error).lower()

_QUIT = object()
# Queue ranks: lower is taken first, in submission order within a rank. A model load keeps its place
# among typed jobs; quitting comes after everything so that each queued job is said to be dropped.
_FIRST, _DOCUMENTS, _LAST = 0, 1, 2


class EngineWorker(QThread):
    loaded = Signal(str)  # what runs now: Translator.describe()
    holding = Signal(str)  # Translator.describe() after a job: what the engine holds now
    kernels_unavailable = Signal(str)  # once: the GPU kernels failed and the slower PyTorch path runs
    # (True, building) while the loaded model's warm-up runs (first sentences slower), building
    # while its kernels compile in another process (a first launch), then (False, False)
    warming_up = Signal(bool, bool)
    load_failed = Signal(str)  # why the model could not be loaded: none is
    load_refused = Signal(str)  # why the new model settings could not be loaded: the model before them goes on
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
        self.setObjectName("dragoman-worker")
        self._queue: queue.PriorityQueue = queue.PriorityQueue()
        self._documents: queue.SimpleQueue = queue.SimpleQueue()  # (job id, DocumentJob) for the documents' thread
        self._document_running = threading.Lock()  # held while a document translates: a model load waits for it
        self._order = itertools.count()  # ties in the priority queue: first in, first out
        self._paths = paths  # AppPaths of the translation cache and memory (None: the default ones)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._cancelled: set[int] = set()
        self._latest_typed = 0
        self._quitting = False
        self.translator = None  # loaded and dropped by this thread, while no document runs
        self.loaded_command: LoadModel | None = None  # what `translator` was loaded with
        self.pipeline: TranslationSession | None = None  # over the translator, with the cache and the memory
        self._kernels_reported = False  # the kernels' failure is for the whole process: said once
        self._terms = Terms()  # the glossaries and do-not-translate settings jobs keep to (set_terms)
        self.warm_up_thread: threading.Thread | None = None  # the last model's warm-up (`_open`)

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

    def expect_typing(self) -> None:
        """A keystroke in the source pane, or in a translation being edited (its completion): typed
        text is likely soon, and the engine makes ready for it (`Translator.expect_typing`). Called
        on the window's thread: it only sets a time."""
        translator = self.translator
        if translator is not None:
            translator.expect_typing()

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
            if self.pipeline is not None:
                self.pipeline.set_terms(terms)

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
        documents = threading.Thread(target=self._run_documents, name="dragoman-documents", daemon=True)
        documents.start()
        try:
            while (command := self._queue.get()[2]) is not _QUIT:
                if self._quitting:  # stop() was called: what is still queued is dropped, and said so
                    if isinstance(command, tuple):
                        self.cancelled.emit(command[0])
                elif isinstance(command, LoadModel):
                    with self._document_running:
                        self._load(command)
                elif isinstance(command, AcceptTranslation):
                    self._remember(command)
                elif isinstance(command[1], DocumentJob):
                    self._documents.put(command)
                else:
                    self._run_job(*command)
        finally:
            self._documents.put(_QUIT)
            documents.join()
            self._unload()

    def _run_documents(self) -> None:
        """The documents' thread: one document job after another, over the pipeline this thread loaded."""
        while (command := self._documents.get()) is not _QUIT:
            with self._document_running:
                self._run_job(*command)

    def _remember(self, command: AcceptTranslation) -> None:
        if self.pipeline is None:
            return
        self.pipeline.accept(command.job, command.sentence, command.translation)
        self.remembered.emit(command.sentence, command.translation)

    def _should_stop(self, job_id: int, typed: bool) -> bool:
        with self._lock:
            return self._quitting or job_id in self._cancelled or (typed and job_id < self._latest_typed)

    def _load(self, command: LoadModel) -> None:
        """The new model is made beside the working one, which goes on serving when the new one fails
        (`load_refused`, then `loaded` with what still runs); only where both do not fit in memory
        does the working one make way first, and come back if the new one fails alone too."""
        previous = self.loaded_command
        try:
            translator = self._open(command)
        except Exception as e:  # CheckpointError, DeviceError, TokenizerError, out of memory...
            if self.translator is None:
                self.load_failed.emit(str(e) or type(e).__name__)
                return
            assert previous is not None  # set with `translator` (`_serve`)
            if not _out_of_memory(e):
                self.load_refused.emit(one_line(e))
                self.loaded.emit(self.translator.describe())
                return
            self._unload()
            try:
                translator = self._open(command)
            except Exception as alone:
                try:
                    self._serve(self._open(previous), previous)
                except Exception as again:
                    self.load_failed.emit(str(again) or type(again).__name__)
                    return
                self.load_refused.emit(one_line(alone))
                self.loaded.emit(self.translator.describe())
                return
        self._unload()
        self._serve(translator, command)
        self.loaded.emit(translator.describe())
        self._report_kernels()

    def _open(self, command: LoadModel):
        """A Translator for `command`, its warm-up started where it needs one."""
        from dragoman.engine import drop_uploads, read_ahead

        read_ahead(command.model_dir, command.device)  # while torch is imported
        from dragoman.engine import Translator

        try:
            translator = Translator(
                command.model_dir, device=command.device, dtype=command.dtype,
                adapters_dir=command.adapters_dir or None, adapter_slots=command.adapter_slots,
                gpu_memory=command.gpu_memory, weights_cache=(self._paths or AppPaths.default()).weights_cache,
                build_kernels_apart=True,
            )
        except BaseException:
            drop_uploads()  # the weights copied to the GPU for a model that did not load
            raise
        if translator.needs_warm_up():
            # On a thread of its own: the model serves at once, and a sentence typed meanwhile joins
            # the warm-up's steps in the engine's batch instead of waiting for the warm-up to end.
            self.warm_up_thread = threading.Thread(target=self._warm_up, args=(translator, command),
                                                   name="dragoman-warm-up", daemon=True)
            self.warm_up_thread.start()
        return translator

    def _warm_up(self, translator, command: LoadModel) -> None:
        if translator.kernels_building():
            self.warming_up.emit(True, True)
            translator.wait_for_kernels()
        self.warming_up.emit(True, False)
        try:
            translator.warm_up(**command.typed_options)
            # Documents take the typed text's options: their steps' graphs made in the engine's idle time.
            translator.prepare_document_steps(**command.typed_options)
        except Exception:  # the model works without it: the first sentence just waits longer
            if not translator.loop.closed:  # not a model replaced meanwhile
                log.warning("warming up %s failed", command.model_dir, exc_info=True)
        finally:
            self.warming_up.emit(False, False)
        if self.translator is translator:
            self._report_kernels()

    def _serve(self, translator, command: LoadModel) -> None:
        """Jobs from now on run on `translator` (loaded with `command`)."""
        self.translator = translator
        self.loaded_command = command
        with self._lock:
            # A memory or cache file that cannot be used (one line naming it): typing goes on without it.
            self.pipeline = TranslationSession.open(translator, self._paths, self._terms, unusable=log.warning)

    def _report_kernels(self) -> None:
        """Say once, if the GPU kernels failed (at the warm-up, or in a job), that the slower path runs."""
        message = self.translator.kernels_unavailable() if self.translator is not None else None
        if message and not self._kernels_reported:
            self._kernels_reported = True
            self.kernels_unavailable.emit(message)

    def _unload(self) -> None:
        if self.pipeline is not None:
            self.pipeline.close()
            self.pipeline = None
        if self.translator is not None:
            self.translator.teardown()
            self.translator = None
            self.loaded_command = None

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
        if self.pipeline is None:
            self.failed.emit(job_id, "No model is loaded.")
            return
        shown: dict[int, str] = {}

        def on_partial(index: int, text: str) -> None:
            if shown.get(index) != text and not should_stop():
                shown[index] = text
                self.partial.emit(job_id, index, text)

        try:
            if job.detect:
                found = self.pipeline.source_of(job)
                self.detected.emit(job_id, found or "")
                job = replace(job, source=found or job.source, detect=False)
            layout = self.pipeline.layout(job)
            current: list[str | None] = [None] * len(layout.sentences)

            def on_sentence(index: int, translation: str) -> None:  # a sentence's hypothesis: its line's
                current[index] = translation
                on_partial(layout.line_of[index], layout.line(layout.line_of[index], current))
                if job.completion is not None and index == job.completion[0] and not should_stop():
                    self.completing.emit(job_id, translation)

            result = self.pipeline.translate(job, on_sentence, should_stop)
        except Exception as e:  # a bad language code, out of memory...: the job fails, the thread goes on
            self.failed.emit(job_id, str(e) or type(e).__name__)
            return
        if result.stopped or should_stop():
            self.cancelled.emit(job_id)
            return
        self.doubted.emit(job_id, result.line_doubts())
        self.laid_out.emit(job_id, (result.text, result.translations))
        self.translated.emit(job_id, result.lines())

    def _find_alternatives(self, job_id: int, command: FindAlternatives) -> None:
        if self.pipeline is None:
            self.failed.emit(job_id, "No model is loaded.")
            return
        try:
            found = self.pipeline.alternatives(command.job, command.sentence, command.count)
        except Exception as e:  # out of memory, an adapter gone...: said, the thread goes on
            self.failed.emit(job_id, str(e) or type(e).__name__)
            return
        self.alternatives_found.emit(job_id, found)

    def _translate_document(self, job_id: int, job: DocumentJob) -> None:
        def should_stop() -> bool:
            return self._should_stop(job_id, False)

        if should_stop():
            self.cancelled.emit(job_id)
            return
        if self.pipeline is None:
            self.document_failed.emit(job_id, "No model is loaded.")
            return
        report = JobReport()
        try:
            written = self.pipeline.translate_document(
                job, progress=lambda done, total: self.document_progress.emit(job_id, done, total),
                should_stop=should_stop, report=report,
            )
        except Exception as e:  # DocumentError, Cancelled, a file its format library chokes on, out of memory...
            if should_stop():
                self.cancelled.emit(job_id)
            else:
                self.document_failed.emit(job_id, one_line(e))
            return
        self.document_report.emit(job_id, report)
        self.document_done.emit(job_id, str(written))
