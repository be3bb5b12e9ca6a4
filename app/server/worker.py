"""The engine worker: the translator and the pipeline over it, and two threads that feed them from
two queues: text requests on one, other work (a document, alternatives) on the other, in turn.

Text requests that arrive within `GATHER_SECONDS` of the first one, and whatever queued while a
batch ran, are translated together: the texts of all requests for one language pair and glossary
go to the pipeline as one job, so 64 clients at once fill one engine batch instead of waiting for 64
calls in turn. The engine's loop decodes a document and text requests in the same batches (text
first), so a long upload does not hold up a browser extension's requests.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Callable

from dragoman.app.server.pipeline import Pipeline, Text
from dragoman.app.session.glossary import Glossary

log = logging.getLogger("dragoman.server")

GATHER_SECONDS = 0.005  # how long the first text request of a batch waits for others to join it


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
        self._texts: deque[TextWork] = deque()
        self._calls: deque[CallWork] = deque()
        self._stopping = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="dragoman-engine", daemon=True)
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self.batches = 0  # pipeline calls made for text work (the benchmark reads it)

    def start(self) -> None:
        self._thread.start()
        self._ready.wait()
        if self._failure is not None:
            raise self._failure

    def stop(self) -> None:
        if self._thread.is_alive():
            with self._changed:
                self._stopping = True
                self._changed.notify_all()
            self._thread.join()

    def translate(self, source: str, target: str, texts: list[Text], glossary: Glossary | None = None,
                  glossary_id: str = "") -> Future:
        """A future of the texts' translations (Pipeline.translate)."""
        work = TextWork(source, target, texts, glossary, glossary_id)
        with self._changed:
            self._texts.append(work)
            self._changed.notify_all()
        return work.future

    def call(self, call: Callable[[Pipeline], object]) -> Future:
        """A future of `call(pipeline)`, run on the engine thread in its turn."""
        work = CallWork(call)
        with self._changed:
            self._calls.append(work)
            self._changed.notify_all()
        return work.future

    def _run(self) -> None:
        try:
            pipeline = self._make_pipeline()
        except BaseException as e:  # the model did not load: start() raises it
            self._failure = e
            self._ready.set()
            return
        calls = threading.Thread(target=self._serve_calls, args=(pipeline,), name="dragoman-server-calls", daemon=True)
        calls.start()
        self._ready.set()
        try:
            while (batch := self._next_texts()) is not None:
                self._serve_texts(pipeline, batch)
        finally:
            calls.join()
            pipeline.close()

    def _next_texts(self) -> list[TextWork] | None:
        """The queued text requests, with those arriving within GATHER_SECONDS of the first; None
        once stopped with none queued."""
        with self._changed:
            while not self._texts and not self._stopping:
                self._changed.wait()
            if not self._texts:
                return None
            deadline = time.monotonic() + GATHER_SECONDS
            while (left := deadline - time.monotonic()) > 0:
                self._changed.wait(left)
            taken = list(self._texts)
            self._texts.clear()
        return taken

    def _serve_calls(self, pipeline: Pipeline) -> None:
        while True:
            with self._changed:
                while not self._calls and not self._stopping:
                    self._changed.wait()
                if not self._calls:
                    return
                work = self._calls.popleft()
            self._serve_call(pipeline, work)

    def _serve_texts(self, pipeline: Pipeline, batch: list[TextWork]) -> None:
        groups: dict[tuple[str, str, str], list[TextWork]] = {}
        for work in batch:
            if work.future.set_running_or_notify_cancel():  # else its request gave up (timed out, client gone)
                groups.setdefault(work.key(), []).append(work)
        for group in groups.values():
            self._translate(pipeline, group)

    @staticmethod
    def _serve_call(pipeline: Pipeline, work: CallWork) -> None:
        if not work.future.set_running_or_notify_cancel():
            return
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
