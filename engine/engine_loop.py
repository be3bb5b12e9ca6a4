"""The engine's one loop, and how any thread talks to it: `Translator.submit(TranslationRequest)`
returns a `TranslationHandle` (CTranslate2's `translate_batch_async`, vLLM's request handles).

One thread of the engine's own owns the device (it binds the GPU to itself, `bind_gpu_to_thread`)
and runs `Generator.run`, fed by `EngineLoop._feed` at every step: what any thread submitted since
joins the running batch at the next step, typed text ahead of documents (the scheduler's priority
lanes), and handles cancelled since leave it. When nothing waits or decodes the run ends and the
thread sleeps until the next submission.

A handle streams each text's best hypothesis while it decodes and each text's `Translation` as
soon as it is whole (callbacks `subscribe`s, or the iterator `stream()` on the caller's thread),
gives them all (`result`), can be waited on with a timeout and cancelled. Callbacks run on the engine's thread:
they should be short (emit a signal, put in a queue), and an error they raise fails their handle only.
"""

from __future__ import annotations

import queue
import sys
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator, Protocol

if TYPE_CHECKING:
    from dragoman.engine.decoding import DecodingOptions
    from dragoman.engine.generator import Generator
    from dragoman.engine.scheduler import Request
    from dragoman.engine.translator import Translation

TYPED, DOCUMENT = 0, 1  # priorities: typed text first
# The loop waits on the device at every step and then needs the interpreter back at once. While
# other threads run Python (a server's requests, a document's reading), the default 5 ms before a
# waiting thread gets it would be paid at every step (docs/performance.md, "Local server").
GIL_SWITCH_S = 0.0005


@dataclass(frozen=True)
class TranslationRequest:
    """Texts to translate (one segment each), and how.

    `terms[i]`: target-language strings text i's translation must hold (Translator.translate says
    how); `starts[i]`: the start of text i's translation as a person typed it, completed from there;
    `alternatives`: hypotheses each Translation carries, itself included (at most num_beams; 0:
    its text only, no score read);
    `adapter`: a LoRA adapter of the adapters folder (None or "": the base model); `priority`: lower
    runs first (TYPED, DOCUMENT); `partials`: stream each text's best hypothesis while it decodes."""

    texts: list[str]
    src_lang: str
    tgt_lang: str
    options: DecodingOptions | None = None
    terms: list[list[str | tuple[str | None, ...]]] | None = None
    starts: list[str | None] | None = None
    alternatives: int = 1
    adapter: str | None = None
    priority: int = DOCUMENT
    partials: bool = False


class TranslationHandle:
    """A submitted request's progress and result, safe to use from any thread."""

    def __init__(self, count: int):
        self._lock = threading.RLock()
        self._over = threading.Event()
        self._translations: list[Translation | None] = [None] * count
        self._left = count
        self._latest: dict[int, str] = {}  # the current best hypothesis of each text still decoding
        self._listeners: list[tuple[Callable[[int, str], None] | None, Callable[[int, Translation], None] | None]] = []
        self._watchers: list[Callable[[], None]] = []  # told once it is over
        self._error: BaseException | None = None
        self.cancelled = False
        if not count:
            self._over.set()

    def subscribe(self, on_partial: Callable[[int, str], None] | None = None,
                  on_translation: Callable[[int, Translation], None] | None = None) -> None:
        """`on_partial(i, hypothesis)` for text i's best hypothesis at each step, `on_translation(i,
        translation)` once it is whole; what came before the call is heard at once (the latest
        hypotheses, the translations so far), so nothing is missed. Called on the engine's thread."""
        with self._lock:
            if on_partial is not None:
                for i, text in self._latest.items():
                    on_partial(i, text)
            if on_translation is not None:
                for i, translation in enumerate(self._translations):
                    if translation is not None:
                        on_translation(i, translation)
            self._listeners.append((on_partial, on_translation))

    def stream(self, every: float | None = None) -> Iterator[tuple[int, str | Translation] | None]:
        """What happens to it, on the caller's thread, until it is over: (i, hypothesis) while text
        i decodes (with `partials`), (i, Translation) once it is whole (those before the call
        first), and None whenever `every` seconds pass without news (the caller may cancel then)."""
        news: queue.SimpleQueue = queue.SimpleQueue()
        with self._lock:
            self.subscribe(lambda i, text: news.put((i, text)), lambda i, translation: news.put((i, translation)))
            self._watchers.append(lambda: news.put(None))
            if self._over.is_set():
                news.put(None)
        while True:
            try:
                item = news.get(timeout=every)
            except queue.Empty:
                yield None
                continue
            if item is None:
                return
            yield item

    def cancel(self) -> None:
        """Stop: texts not yet whole stay None; the engine drops their sentences at its next step."""
        with self._lock:
            if not self._over.is_set():
                self.cancelled = True
                self._close()

    def done(self) -> bool:
        """Whether it is over: every text whole, cancelled, or failed."""
        return self._over.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until it is over (at most `timeout` seconds); whether it is."""
        return self._over.wait(timeout)

    def result(self, timeout: float | None = None) -> list[Translation | None]:
        """Each text's Translation, once over (None: cancelled before it was whole); raises what
        failed it (an unusable adapter, NaN scores, an error of a callback), or TimeoutError."""
        if not self._over.wait(timeout):
            raise TimeoutError(f"the translation is not done after {timeout} s")
        if self._error is not None:
            raise self._error
        return list(self._translations)

    # -- the engine's side ---------------------------------------------------------------------------

    def partial(self, i: int, text: str) -> None:
        with self._lock:
            if self._over.is_set():
                return
            self._latest[i] = text
            for on_partial, _ in self._listeners:
                if on_partial is not None:
                    on_partial(i, text)

    def finish(self, i: int, translation: Translation) -> None:
        with self._lock:
            if self._over.is_set() or self._translations[i] is not None:
                return
            self._translations[i] = translation
            self._latest.pop(i, None)
            self._left -= 1
            for _, on_translation in self._listeners:
                if on_translation is not None:
                    on_translation(i, translation)
            if not self._left:
                self._close()

    def fail(self, error: BaseException) -> None:
        with self._lock:
            if not self._over.is_set():
                self._error = error
                self._close()

    def _close(self) -> None:
        self._over.set()
        for watcher in self._watchers:
            watcher()


class Submission(Protocol):
    """A submitted request as the loop sees it (engine.translator.Submission)."""

    priority: int
    handle: TranslationHandle
    in_flight: set[Request]  # its sentences the generator has been given and not finished

    def take(self, texts: int) -> list[Request]:
        """Its sentences to decode next: any that must run again, and those of up to `texts` more texts."""
        ...

    def first_portion(self) -> int:
        """How many of its texts to prepare before it first joins: those that decode together at once."""
        ...

    def later_portion(self) -> int:
        """How many more of its texts to prepare at a step while the device runs."""
        ...


class EngineLoop:
    """The thread that owns the device and runs the generator over whatever is submitted."""

    def __init__(self, generator: Generator):
        self.generator = generator
        self._wake = threading.Condition()
        self._inbox: list[Submission] = []
        self._closing = False
        self._thread: threading.Thread | None = None
        self._active: list[Submission] = []  # the engine thread's own: submissions it feeds

    def submit(self, submission: Submission) -> None:
        """Queue a submission (any thread); it joins the running batch at the next step."""
        with self._wake:
            if self._closing:
                raise RuntimeError("the engine is closed")
            self._inbox.append(submission)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="dragoman-engine", daemon=True)
                self._thread.start()
            self._wake.notify()

    @property
    def closed(self) -> bool:
        """Whether `close` was called: submissions are refused."""
        return self._closing

    def close(self, wait: bool = True) -> None:
        """Cancel everything submitted and end the thread (`wait`: until it has ended)."""
        with self._wake:
            self._closing = True
            self._wake.notify()
            thread = self._thread
        if wait and thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        self.generator.bind_gpu_to_thread()
        sys.setswitchinterval(min(sys.getswitchinterval(), GIL_SWITCH_S))  # the whole process's
        while True:
            with self._wake:
                while not (self._inbox or self._closing):
                    self._wake.wait()
                if self._closing:
                    for submission in self._inbox:
                        submission.handle.cancel()
                    return
            try:
                # Looked up at each run, so that a test can watch it.
                self.generator.run([], self._feed)
            except BaseException as e:  # out of memory for one sentence, a bug: its handles fail, the loop goes on
                for submission in self._active:
                    submission.handle.fail(e)
                self._active = []

    def _feed(self, idle: bool) -> list[Request] | None:
        """`Generator.run`'s feed: new submissions' first sentences, cancelled ones withdrawn, and
        more of the running ones' texts while few sentences wait; None ends the run (idle, nothing new)."""
        with self._wake:
            new, self._inbox = self._inbox, []
            closing = self._closing
        if closing:
            for submission in self._active + new:
                submission.handle.cancel()
            new = []
        withdrawn: set[Request] = set()
        for submission in self._active:
            if submission.handle.done():
                withdrawn |= submission.in_flight
        if withdrawn:
            self.generator.withdraw(withdrawn)
        self._active = [s for s in self._active if not s.handle.done()]
        requests = []
        few_wait = len(self.generator.scheduler.waiting) < self.generator.max_rows
        for submission in sorted(self._active, key=lambda s: s.priority):
            requests += submission.take(submission.later_portion() if few_wait else 0)
        for submission in sorted(new, key=lambda s: s.priority):
            if not submission.handle.done():
                requests += submission.take(submission.first_portion())
                self._active.append(submission)
        if idle and not requests:
            for submission in self._active:  # nothing of it left to decode: it cannot finish now
                submission.handle.fail(RuntimeError("the engine lost track of a translation"))
            self._active = []
            return None
        return requests
