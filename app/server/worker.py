"""The engine worker: one thread owns the translator (it is not safe to call from many threads) and
the pipeline; requests wait in a queue and share its batches.

What arrives within `GATHER_SECONDS` of a request, and whatever queued while a batch ran, is
translated together: the texts of all requests for one language pair and glossary go to the
engine in one call, so 64 clients at once fill one batch instead of waiting for 64 calls in turn.
Other work (a document, alternatives) runs alone, in its turn.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Callable

from dragoman.app.glossary import Glossary
from dragoman.app.server.pipeline import Pipeline, Text

log = logging.getLogger("dragoman.server")

GATHER_SECONDS = 0.005  # how long the first request of a batch waits for others to join it


@dataclass
class TextWork:
    source: str
    target: str
    texts: list[Text]
    glossary: Glossary | None
    glossary_id: str  # the batch key's stand-in for the glossary
    future: Future = field(default_factory=Future)

    def key(self) -> tuple[str, str, str]:
        return self.source, self.target, self.glossary_id


@dataclass
class CallWork:
    call: Callable[[Pipeline], object]
    future: Future = field(default_factory=Future)


class EngineWorker:
    """`start()` makes the pipeline on the worker thread (raising what that raised); `translate`
    and `call` return futures; `stop()` lets queued work finish and closes the pipeline."""

    def __init__(self, make_pipeline: Callable[[], Pipeline]):
        self._make_pipeline = make_pipeline
        self._queue: queue.Queue[TextWork | CallWork | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="dragoman-engine", daemon=True)
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self.batches = 0  # engine calls made for text work (the benchmark reads it)

    def start(self) -> None:
        self._thread.start()
        self._ready.wait()
        if self._failure is not None:
            raise self._failure

    def stop(self) -> None:
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()

    def translate(self, source: str, target: str, texts: list[Text], glossary: Glossary | None = None,
                  glossary_id: str = "") -> Future:
        """A future of the texts' translations (Pipeline.translate)."""
        work = TextWork(source, target, texts, glossary, glossary_id)
        self._queue.put(work)
        return work.future

    def call(self, call: Callable[[Pipeline], object]) -> Future:
        """A future of `call(pipeline)`, run on the engine thread in its turn."""
        work = CallWork(call)
        self._queue.put(work)
        return work.future

    def _run(self) -> None:
        try:
            pipeline = self._make_pipeline()
            pipeline.translator.bind_gpu_to_thread()
        except BaseException as e:  # the model did not load: start() raises it
            self._failure = e
            self._ready.set()
            return
        self._ready.set()
        try:
            while (batch := self._gather()) is not None:
                self._serve(pipeline, batch)
        finally:
            pipeline.close()

    def _gather(self) -> list[TextWork | CallWork] | None:
        """The next batch: a request, and all that queued within GATHER_SECONDS of it (None: stop)."""
        first = self._queue.get()
        if first is None:
            return None
        batch = [first]
        deadline = time.monotonic() + GATHER_SECONDS
        while (left := deadline - time.monotonic()) > 0 or not self._queue.empty():
            try:
                work = self._queue.get(timeout=max(left, 0))
            except queue.Empty:
                break
            if work is None:
                self._queue.put(None)  # stop once this batch is served
                break
            batch.append(work)
        return batch

    def _serve(self, pipeline: Pipeline, batch: list[TextWork | CallWork]) -> None:
        groups: dict[tuple[str, str, str], list[TextWork]] = {}
        calls = []
        for work in batch:
            if not work.future.set_running_or_notify_cancel():
                continue  # its request gave up (timed out, client gone)
            if isinstance(work, TextWork):
                groups.setdefault(work.key(), []).append(work)
            else:
                calls.append(work)
        for group in groups.values():
            self._translate(pipeline, group)
        for work in calls:
            try:
                work.future.set_result(work.call(pipeline))
            except BaseException as e:
                work.future.set_exception(e)

    def _translate(self, pipeline: Pipeline, group: list[TextWork]) -> None:
        first = group[0]
        texts = [text for work in group for text in work.texts]
        self.batches += 1
        try:
            results = pipeline.translate(first.source, first.target, texts, first.glossary)
        except BaseException as e:
            if len(group) == 1:
                first.future.set_exception(e)
            else:  # one request's bad markup fails that request alone
                for work in group:
                    self._translate(pipeline, [work])
            return
        at = 0
        for work in group:
            work.future.set_result(results[at:at + len(work.texts)])
            at += len(work.texts)
