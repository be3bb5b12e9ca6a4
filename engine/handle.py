"""What goes to the engine and what comes back (`Translator.submit`): the request, its handle (its
progress and result, safe to use from any thread while the engine's loop decodes it) and each
text's translation. Free of torch, so that a document's own process (app.session.document_process)
speaks them too."""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field
from typing import Callable, Iterator

from dragoman.engine.decoding import DecodingOptions
from dragoman.engine.scheduler import DOCUMENT


@dataclass
class Translation:
    """A text's translation with its score and, where asked, its alternatives.

    `score` is the length-normalised log-probability of the hypothesis: beam search's score of the
    finished hypothesis (HF's `sequences_scores`), greedy's mean log-probability of its tokens; None
    where nothing was decoded (a blank text, a max_length that leaves no token to generate). A text decoded in
    pieces (too long to read at once) scores the mean of its pieces' scores and has no alternatives.
    `alternatives` are the other finished hypotheses, best first (HF's `num_return_sequences`: the
    first returned sequence is `text`); each has no alternatives of its own."""

    text: str
    score: float | None = None
    alternatives: list[Translation] = field(default_factory=list)


@dataclass(frozen=True)
class TranslationRequest:
    """Texts to translate (one segment each), and how.

    `terms[i]`: target-language strings text i's translation must hold (Translator.translate says
    how); `starts[i]`: the start of text i's translation as a person typed it, completed from there;
    `alternatives`: hypotheses each Translation carries, itself included (at most num_beams; 0:
    its text only, no score read);
    `adapter`: a LoRA adapter of the adapters folder (None or "": the base model); `priority`: lower
    runs first (TYPED, DOCUMENT); `partials`: stream each text's best hypothesis while it decodes;
    `sources[i]`, where the caller tokenized the texts with this model's tokenizer (a document's
    process does, so that the engine's thread need not): text i's source ids in the pieces the model
    reads (`NllbTokenizer.encode_source_pieces` with `Translator.max_positions`)."""

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
    sources: list[list[list[int]]] | None = None


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
