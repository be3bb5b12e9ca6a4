"""The engine thread: one QThread owns the Translator (and so the GPU) for the whole session.

The window posts commands (load a model, translate a job) through a queue and hears back through
signals only; this thread never touches a widget, the window never runs the engine. A job stops
early, through the engine's `should_stop`, when it is cancelled, when a newer typed-text job
supersedes it, or when the worker is asked to quit.
"""

from __future__ import annotations

import itertools
import queue
import threading
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import QThread, Signal

from app import detect


@dataclass(frozen=True)
class TranslationJob:
    texts: list[str]  # one segment each (a line of the source box); blank ones come back empty
    source: str  # FLORES-200 code; with `detect`, the language used when detection is unsure
    target: str
    options: dict = field(default_factory=dict)  # overrides of Translator.default_options (None = keep)
    detect: bool = False  # detect the source language first (emits `detected`)
    typed: bool = True  # typed text: runs first, and a newer typed job supersedes it
    adapter: str = ""  # LoRA adapter folder name, "" = base model; the engine ignores it until adapters land


@dataclass(frozen=True)
class LoadModel:
    model_dir: Path
    device: str = "auto"
    dtype: str = "auto"


_QUIT = object()


class EngineWorker(QThread):
    loaded = Signal(str)  # what runs now: Translator.describe()
    load_failed = Signal(str)  # why the model could not be loaded
    detected = Signal(int, str)  # job id, detected FLORES-200 code ("" when unsure)
    partial = Signal(int, int, str)  # job id, segment index, current best hypothesis of that segment
    translated = Signal(int, list)  # job id, one translation per segment (the final texts)
    failed = Signal(int, str)  # job id, error message
    cancelled = Signal(int)  # job id: cancelled, superseded, or dropped at quit

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("dragoman-engine")
        self._queue: queue.Queue = queue.Queue()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._cancelled: set[int] = set()
        self._latest_typed = 0
        self._quitting = False
        self.translator = None  # owned by this thread: only run() and what it calls use it

    # -- called from the GUI thread ------------------------------------------------------------------

    def load(self, model_dir: str | Path, device: str = "auto", dtype: str = "auto") -> None:
        """Load (or switch to) a model; jobs submitted afterwards use it."""
        self._queue.put(LoadModel(Path(model_dir), device, dtype))

    def submit(self, job: TranslationJob) -> int:
        """Queue a job; returns its id, which every signal about it carries."""
        job_id = next(self._ids)
        if job.typed:
            with self._lock:
                self._latest_typed = job_id
        self._queue.put((job_id, job))
        return job_id

    def cancel(self, job_id: int) -> None:
        with self._lock:
            self._cancelled.add(job_id)

    def stop(self) -> None:
        """Ask the thread to end: the running job stops at its next decoding step. Then wait()."""
        with self._lock:
            self._quitting = True
        self._queue.put(_QUIT)

    # -- the thread ----------------------------------------------------------------------------------

    def run(self) -> None:
        try:
            while (command := self._queue.get()) is not _QUIT:
                if self._quitting:  # stop() was called: what is still queued is dropped, and said so
                    if isinstance(command, tuple):
                        self.cancelled.emit(command[0])
                elif isinstance(command, LoadModel):
                    self._load(command)
                else:
                    self._run_job(*command)
        finally:
            self._unload()

    def _should_stop(self, job_id: int, typed: bool) -> bool:
        with self._lock:
            return self._quitting or job_id in self._cancelled or (typed and job_id < self._latest_typed)

    def _load(self, command: LoadModel) -> None:
        from engine.translator import Translator

        self._unload()  # free the old model's memory before the new one arrives
        try:
            translator = Translator(command.model_dir, device=command.device, dtype=command.dtype)
            translator.bind_gpu_to_thread()
        except Exception as e:  # CheckpointError, DeviceError, TokenizerError, out of memory...
            self.load_failed.emit(str(e) or type(e).__name__)
            return
        self.translator = translator
        self.loaded.emit(translator.describe())

    def _unload(self) -> None:
        if self.translator is not None:
            self.translator.teardown()
            self.translator = None

    def _run_job(self, job_id: int, job: TranslationJob) -> None:
        try:
            self._translate(job_id, job)
        finally:
            with self._lock:
                self._cancelled.discard(job_id)

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
            results = self.translator.translate(
                job.texts, source, job.target, options,
                priority=0 if job.typed else 1, on_partial=on_partial, should_stop=should_stop,
            )
        except Exception as e:  # a bad language code, out of memory...: the job fails, the thread goes on
            self.failed.emit(job_id, str(e) or type(e).__name__)
            return
        if any(r is None for r in results) or should_stop():
            self.cancelled.emit(job_id)
        else:
            self.translated.emit(job_id, results)
