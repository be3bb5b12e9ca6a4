"""A document job in a process of its own, the engine in this one (`translate_document_apart`).

On a GPU the engine's thread launches a step every millisecond or two and needs the interpreter
for each. A document's own work (reading the file, planning its sentences, the translation memory
and cache, masking, restoring each translation, judging its doubts, writing) held the same
interpreter on the app's threads, and the device waited (docs/performance.md, "Documents through
the app"); typed text beside a long document waited too. So on a GPU the whole document job runs
`TranslationSession.translate_document_here`, the one document pipeline, in a spawned process
(the app's threads hold locks a fork would copy) whose session has the same stores and terms,
and whose engine (`EngineAcross`) sends each translate call here through a pipe. Here, on the
caller's thread, `translate_document_apart` submits each call to the Translator, sends the
translations back in batches as they come, asks the engine what the pipeline asks of it, and
passes on progress, stops, the report, the file written and any error, as raised there. One such
process is kept ready for the next job (`DocumentProcess.start_spare`): the window, the server and
the command line start one as they open their session on a GPU, the command line already while
its model loads. The pipe carries pickles between the app and its own child only, never a file's
bytes.

Messages, each a tuple whose first item says its kind:
- from the document's process: ("ask", id, name, args, kwargs), ("translate", id, TranslationRequest),
  ("cancel", id), ("progress", done, total), ("finished", path, report), ("failed", error);
- to it: the engine's tokenizer while it waits (`EngineTokenizer`, where the app has its engine),
  the job (`DocumentOrder`), then ("answer", id, value, error), ("heard", [(id, i, text, score),
  ...]), ("done", id, texts), ("failed", id, error) and ("stop",).
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import itertools
import multiprocessing
import pickle
import queue
import threading
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, cast

from dragoman.app.documents.safety import DocumentError
from dragoman.app.session.jobs import DocumentJob, JobReport
from dragoman.engine import Translation, TranslationRequest

if TYPE_CHECKING:
    from dragoman.app.session.session import TranslationSession
    from dragoman.app.session.terms import Terms
    from dragoman.engine import DecodingOptions, NllbConfig, NllbTokenizer, TranslationHandle, Translator

# How often this side sends the translations heard and looks for a stop, at most (seconds).
FLUSH_SECONDS = 0.005
# How often a translate call of the document's process looks at its job's stop.
STOP_POLL_SECONDS = 0.05
# What the document's pipeline may ask of the engine beyond translating (TranslationSession's use).
ASKABLE = ("default_options", "adapter_identity", "spells")


@dataclass
class DocumentOrder:
    """What the document's process is sent first: the job and the session it runs in."""

    job: DocumentJob
    terms: Terms
    cache: Path | None  # the stores' files (None: not used)
    memory: Path | None
    model_identity: str  # the engine's (`Translator.model_identity`)
    config: NllbConfig
    report: JobReport | None
    tokenizer: EngineTokenizer | None  # None: the process was given it while it waited (`give_tokenizer`)


@dataclass
class EngineTokenizer:
    """The engine's tokenizer, pickled, and the source tokens its model reads at once: a document's
    process tokenizes its texts with it (`EngineAcross`), so that the engine's thread need not."""

    model_identity: str
    pickled: bytes
    max_positions: int

    @classmethod
    def of(cls, translator: Translator) -> EngineTokenizer:
        return cls(translator.model_identity, pickle.dumps(translator.tokenizer), translator.max_positions)


class TokenizerRead:
    """An EngineTokenizer read on a thread of its own (`tokenizer` None until then): sentencepiece
    takes up to a second for NLLB's 256k pieces, and reads without holding the interpreter."""

    def __init__(self, given: EngineTokenizer):
        self.model_identity, self.max_positions = given.model_identity, given.max_positions
        self.tokenizer: NllbTokenizer | None = None
        threading.Thread(target=self._read, args=(given.pickled,), daemon=True, name="dragoman-tokenizer").start()

    def _read(self, pickled: bytes) -> None:
        self.tokenizer = pickle.loads(pickled)


class DocumentProcess:
    """A spawned process waiting for its document job (`serve_document`), and its end of the pipe.
    One is kept ready (`start_spare`), so that a job does not wait for an interpreter to start and
    import the document pipeline."""

    _spare: DocumentProcess | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        self.conn, there = context.Pipe()
        self.process = context.Process(target=serve_document, args=(there,), daemon=True,
                                       name="dragoman-document-spare")
        self.process.start()
        there.close()
        self.tokenizer_of: str | None = None  # the model identity of the tokenizer it was given
        self._sending = threading.Lock()  # the tokenizer goes before the job

    @classmethod
    def start_spare(cls, translator: Translator | None = None) -> None:
        """A process made ready for the next job, unless one is; given `translator`'s tokenizer."""
        with cls._lock:
            if cls._spare is None or not cls._spare.process.is_alive():
                cls._spare = DocumentProcess()
            if translator is not None:
                cls._spare.give_tokenizer(translator)

    @classmethod
    def take(cls, translator: Translator) -> DocumentProcess:
        """The spare process (or a new one), and a new spare started for the job after."""
        with cls._lock:
            taken, cls._spare = cls._spare, None
        if taken is None or not taken.process.is_alive():
            taken = DocumentProcess()
        taken.process.name = "dragoman-document"
        cls.start_spare(translator)
        return taken

    def give_tokenizer(self, translator: Translator) -> None:
        """Send the engine's tokenizer, unless it was: the process reads it while it waits for its
        job. Sent on a thread of its own, since the pipe takes it only as the process, still
        importing, reads it."""
        if self.tokenizer_of == translator.model_identity:
            return
        self.tokenizer_of = translator.model_identity
        given = EngineTokenizer.of(translator)
        self._sending.acquire()
        threading.Thread(target=self._send_then_release, args=(given,), daemon=True,
                         name="dragoman-document-tokenizer").start()

    def send(self, message: object) -> None:
        with self._sending:
            self.conn.send(message)

    def _send_then_release(self, message: object) -> None:
        try:
            self.conn.send(message)
        except OSError:  # the process ended: its job, if any, says so
            pass
        finally:
            self._sending.release()


def translate_document_apart(pipeline: TranslationSession, job: DocumentJob,
                             progress: Callable[[int, int], None] | None = None,
                             should_stop: Callable[[], bool] | None = None,
                             report: JobReport | None = None) -> Path:
    """`pipeline.translate_document_here(job, ...)` run in a process of its own, the engine's work
    done here; returns the file written and fills `report`, or raises what the job raised."""
    translator = pipeline.translator
    apart = DocumentProcess.take(translator)
    handles: dict[int, TranslationHandle] = {}
    try:
        tokenizer = None if apart.tokenizer_of == translator.model_identity else EngineTokenizer.of(translator)
        apart.send(DocumentOrder(job, pipeline.terms, pipeline.cache.path if pipeline.cache is not None else None,
                                 pipeline.memory.path if pipeline.memory is not None else None,
                                 translator.model_identity, translator.config, report, tokenizer))
        path, done = _serve(apart.conn, translator, handles, progress, should_stop)
        if report is not None and done is not None:
            for name in (f.name for f in dataclasses.fields(JobReport)):
                setattr(report, name, getattr(done, name))
        return path  # the process closes its stores and ends on its own: nothing waits for that
    except BaseException as e:
        apart.process.join(5)  # a failed job's process ends once it has said so
        if isinstance(e, (EOFError, BrokenPipeError, ConnectionResetError)):  # it ended without a word
            raise DocumentError(
                f"the document's process ended unexpectedly (exit code {apart.process.exitcode})") from None
        raise
    finally:
        for handle in handles.values():
            handle.cancel()
        apart.conn.close()


def _serve(conn: Connection, translator: Translator, handles: dict[int, TranslationHandle],
           progress: Callable[[int, int], None] | None,
           should_stop: Callable[[], bool] | None) -> tuple[Path, JobReport | None]:
    """The engine's side of a document job, until it finishes (its file and report) or fails."""
    heard: collections.deque[tuple[int, int, str, float | None]] = collections.deque()  # on the engine's thread
    # Submitted while no typed text waits or decodes: submitting checks a long request's texts and
    # compiles their terms, which would hold the interpreter in typed text's path.
    unsent: dict[int, TranslationRequest] = {}
    stopping = False

    def listener(call: int) -> Callable[[int, Translation], None]:
        return lambda i, translation: heard.append((call, i, translation.text, translation.score))

    while True:
        if conn.poll(FLUSH_SECONDS):
            message = conn.recv()
            kind = message[0]
            if kind == "ask":
                _, call, name, args, kwargs = message
                try:
                    if name not in ASKABLE:
                        raise ValueError(f"the engine is not asked {name!r}")
                    conn.send(("answer", call, getattr(translator, name)(*args, **kwargs), None))
                except Exception as e:
                    conn.send(("answer", call, None, _portable(e)))
            elif kind == "translate":
                unsent[message[1]] = message[2]
            elif kind == "cancel" and message[1] in handles:
                handles[message[1]].cancel()
            elif kind == "cancel" and message[1] in unsent:
                conn.send(("done", message[1], [None] * len(unsent.pop(message[1]).texts)))
            elif kind == "progress" and progress is not None:
                progress(message[1], message[2])
            elif kind == "finished":
                return message[1], message[2]
            elif kind == "failed":
                raise message[1]
        while unsent and not stopping and not translator.typing:  # (once stopping, the job cancels them)
            call = next(iter(unsent))
            request = unsent.pop(call)
            try:
                handles[call] = translator.submit(request)
            except Exception as e:
                conn.send(("failed", call, _portable(e)))
            else:
                handles[call].subscribe(None, listener(call))
        over = [call for call, handle in handles.items() if handle.done()]  # before what they heard is sent
        if heard:
            conn.send(("heard", [heard.popleft() for _ in range(len(heard))]))
        for call in over:
            handle = handles.pop(call)
            try:
                conn.send(("done", call, [None if t is None else t.text for t in handle.result()]))
            except Exception as e:
                conn.send(("failed", call, _portable(e)))
        if not stopping and should_stop is not None and should_stop():
            stopping = True
            for handle in handles.values():
                handle.cancel()
            conn.send(("stop",))


def _portable(error: BaseException) -> BaseException:
    """`error` if it survives the pipe as itself, else a RuntimeError with its line."""
    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:
        return RuntimeError(f"{type(error).__name__}: {error}")


# -- the document's process ---------------------------------------------------------------------------


class EngineAcross:
    """In the document's process: what TranslationSession's document pipeline uses of a Translator,
    each call answered by the app's engine through the pipe. Its thread reads the pipe and calls
    each `on_translation` as the translations come. Once the engine's tokenizer is read
    (`TokenizerRead`: while the process waited for its job, or else beside the job's first texts,
    sent meanwhile), each call's texts go tokenized too: the engine's thread would take the host's
    time between two steps for it, and the device waited (docs/performance.md, "Documents through
    the app")."""

    def __init__(self, conn: Connection, order: DocumentOrder, tokenizer: TokenizerRead):
        self.conn, self.model_identity, self.config = conn, order.model_identity, order.config
        self.tokenizer = tokenizer
        self.stopped = threading.Event()  # the app stopped the job, or went
        # Each call waiting for the app's answer: its outcome, and where its translations go as they come.
        self._calls: dict[int, tuple[concurrent.futures.Future, Callable[[int, Translation], None] | None]] = {}
        self._ids = itertools.count()
        self._turns = itertools.count()  # translate calls, numbered as they come
        self._sent_turns = 0  # of them sent (or failed before sending)
        self._in_turn = threading.Condition()
        self._outbox: queue.SimpleQueue[tuple | None] = queue.SimpleQueue()
        self._sender = threading.Thread(target=self._send_all, daemon=True, name="dragoman-engine-send")
        self._sender.start()
        threading.Thread(target=self._read, daemon=True, name="dragoman-engine-across").start()

    def send(self, message: tuple) -> None:
        """`message` sent to the app, in order, by a thread of its own: the thread that reads the
        pipe sends too (progress, as translations come), and where it waited for the app to read
        while the app waited for it to read, each with its pipe full, the job hung."""
        self._outbox.put(message)

    def close(self) -> None:
        """Returns once every message is sent (or the app went)."""
        self._outbox.put(None)
        self._sender.join()

    def _send_all(self) -> None:
        while (message := self._outbox.get()) is not None:
            try:
                self.conn.send(message)
            except OSError:  # the app went: what is left is for no one
                self.stopped.set()
            except Exception as e:  # a message that does not pickle: the job fails, saying why
                try:
                    self.conn.send(("failed", RuntimeError(f"{type(e).__name__}: {e}")))
                except OSError:
                    self.stopped.set()

    def default_options(self, **overrides) -> DecodingOptions:
        return self._ask("default_options", **overrides)

    def adapter_identity(self, adapter: str | None) -> str:
        return self._ask("adapter_identity", adapter)

    def spells(self, text: str) -> bool:
        return self._ask("spells", text)

    def translate(self, texts: list[str], src_lang: str, tgt_lang: str, options: DecodingOptions | None = None, *,
                  priority: int, should_stop: Callable[[], bool] | None = None, adapter: str | None = None,
                  on_translation: Callable[[int, Translation], None] | None = None,
                  terms: list[list[str | tuple[str | None, ...]]] | None = None) -> list[str | None]:
        """Translator.translate's, as a document's pipeline calls it."""
        with self._in_turn:
            turn = next(self._turns)
        message = None
        try:
            tokenizer, positions = self.tokenizer.tokenizer, self.tokenizer.max_positions
            sources = None if tokenizer is None else [
                tokenizer.encode_source_pieces(text, src_lang, positions) if text.strip() else [] for text in texts]
            request = TranslationRequest(texts, src_lang, tgt_lang, options, terms=terms, adapter=adapter,
                                         priority=priority, alternatives=1 if on_translation is not None else 0,
                                         sources=sources)
            outcome, number = self._open(on_translation)
            message = ("translate", number, request)
        finally:
            # Sent in the order the calls came (a document's parts, each tokenized on its own thread), not as
            # tokenized: the engine then decodes them in the document's order.
            with self._in_turn:
                self._in_turn.wait_for(lambda: self._sent_turns == turn)
                if message is not None:
                    self.send(message)
                self._sent_turns += 1
                self._in_turn.notify_all()
        cancelled = False
        while concurrent.futures.wait([outcome], STOP_POLL_SECONDS).not_done:
            if not cancelled and should_stop is not None and should_stop():
                cancelled = True
                self.send(("cancel", number))
        return outcome.result()

    def _ask(self, name: str, *args: Any, **kwargs: Any) -> Any:
        outcome, number = self._open(None)
        self.send(("ask", number, name, args, kwargs))
        return outcome.result()

    def _open(self, on_translation: Callable[[int, Translation], None] | None) -> tuple[concurrent.futures.Future, int]:
        outcome: concurrent.futures.Future = concurrent.futures.Future()
        number = next(self._ids)
        self._calls[number] = (outcome, on_translation)
        return outcome, number

    def _read(self) -> None:
        try:
            while True:
                message = self.conn.recv()
                kind = message[0]
                if kind == "heard":
                    for number, i, text, score in message[1]:
                        on_translation = self._calls[number][1]
                        if on_translation is not None:
                            on_translation(i, Translation(text, score))
                elif kind == "stop":
                    self.stopped.set()
                else:  # answer (a value and an error), done (a value), failed (an error)
                    outcome, _ = self._calls.pop(message[1])
                    error = message[3] if kind == "answer" else message[2] if kind == "failed" else None
                    if error is not None:
                        outcome.set_exception(error)
                    else:
                        outcome.set_result(message[2])
        except (EOFError, OSError):  # the app went: every call ends
            self.stopped.set()
            for outcome, _ in list(self._calls.values()):
                outcome.set_exception(DocumentError("the app stopped translating"))


def serve_document(conn: Connection) -> None:
    """The document's process: one job through the session's document pipeline, its outcome sent."""
    from dragoman.app.documents import formats
    from dragoman.app.session import detect
    from dragoman.app.session.session import TranslationSession
    from dragoman.app.session.translation_memory import TranslationMemory
    from dragoman.engine import TranslationCache

    # The app started this process as a daemon, to be ended with the app; the job's own helpers (a
    # long PDF's page readers) are processes still, which a daemon may not start.
    multiprocessing.current_process().daemon = False
    formats()  # what the job will need, read while the process waits for it
    detect.load_in_background()  # its doubts detect the translations' language
    given: TokenizerRead | None = None
    try:
        while isinstance(message := conn.recv(), EngineTokenizer):  # while it waits for its job
            given = TokenizerRead(message)
    except EOFError:  # a spare the app did not need
        return
    order: DocumentOrder = message
    if order.tokenizer is not None:
        given = TokenizerRead(order.tokenizer)
    assert given is not None and given.model_identity == order.model_identity  # the app sends it when it was not
    engine = EngineAcross(conn, order, given)
    pipeline = None
    try:
        # The session takes the app's engine as its Translator: the document pipeline uses only what EngineAcross has.
        pipeline = TranslationSession(cast("Translator", engine),
                                     TranslationCache(order.cache) if order.cache is not None else None,
                                     TranslationMemory(order.memory) if order.memory is not None else None, order.terms,
                                     documents_apart=False)
        written = pipeline.translate_document_here(order.job, lambda done, total: engine.send(("progress", done, total)),
                                                  engine.stopped.is_set, order.report)
        engine.send(("finished", written, order.report))
    except BaseException as e:
        engine.send(("failed", _portable(e)))
    finally:
        engine.close()
        if pipeline is not None:
            pipeline.close()
        conn.close()
