"""The engine's front door: a checkpoint folder in, translations of text out.

Any thread calls `Translator.submit(TranslationRequest)` and gets a `TranslationHandle`
(CTranslate2's `translate_batch_async`, vLLM's request handles). One thread of the engine's own,
`EngineLoop`, owns the device (it binds the GPU to itself, `Generator.bind_gpu_to_thread`) and runs
`Generator.run`, fed at every step: what any thread submitted since joins the running batch at the
next step, typed text ahead of documents (the scheduler's priority lanes), and handles cancelled
since leave it. When nothing waits or decodes the run ends and the thread sleeps until the next
submission. A `Submission` is a request on that thread: its texts tokenized as the loop asks, each
piece's result decoded as it finishes, its handle told.

A handle (engine/handle.py) streams each text's best hypothesis while it decodes and each text's
`Translation` as soon as it is whole (callbacks `subscribe`s, or the iterator `stream()` on the
caller's thread), gives them all (`result`), can be waited on with a timeout and cancelled.
Callbacks run on the engine's thread: they should be short (emit a signal, put in a queue), and
an error they raise fails their handle only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import itertools
import logging
import sys
import threading
import time
import unicodedata
import weakref
from pathlib import Path
from typing import Callable

import torch

from dragoman import kernels
from dragoman.engine.batched_search import ran_out_of_numbers
from dragoman.engine.checkpoint import open_checkpoint
from dragoman.engine.completion import CompletionStart, completion_start
from dragoman.engine.config import NllbConfig
from dragoman.engine.constraints import Constraints, check_fit
from dragoman.engine.decoding import DecodingOptions, OptionsError, check_int
from dragoman.engine.device import describe, resolve_device, resolve_dtype
from dragoman.engine.generator import Generator, Request
from dragoman.engine.handle import Translation, TranslationHandle, TranslationRequest
from dragoman.engine.kernel_build import KernelBuild
from dragoman.engine.scheduler import DOCUMENT, TYPED
from dragoman.engine.languages import NO_SPACE_SCRIPTS, get_language
from dragoman.engine.peft_adapter import AdapterError
from dragoman.engine.model import FOLD_SLOTS, FUSED_MAX_ROWS, NllbModel
from dragoman.engine.quantize import StoredInt8Unusable, int8_supported, projection_weights, quantize_int8
from dragoman.engine.translation_cache import model_identity
from dragoman.engine.weights import load_weights

log = logging.getLogger(__name__)

# Texts tokenized a step, at least, while a document decodes (Submission): host time for
# sentences of plain text well within what a step of hundreds of sentences keeps the device busy.
# Greedy waves of 2,048 sentences take 64 a step: at 32, a wave that ended found only part of the
# next one ready, and the rest joined a few a step, each time with an encoder pass and a prefix step.
FEED_TEXTS = 32
STOP_POLL = 0.05  # seconds between looks at translate's `should_stop`
# Words a glued term is tokenized after, when its own first piece carries the word-initial "▁".
GLUE_CONTEXTS = ("a", "1", "的")
# The loop waits on the device at every step and then needs the interpreter back at once. While
# other threads run Python (a server's requests, a document's reading), the default 5 ms before a
# waiting thread gets it would be paid at every step (docs/performance.md, "Local server").
GIL_SWITCH_S = 0.0005
# Steps of a run after which the work left for a free moment (Generator.idle_work) is done a piece
# a step: a run that long gains more from prepacked weights than the packing costs it.
IDLE_WORK_AFTER_STEPS = 64
# How long a keystroke's `expect_typing` lasts: the window translates 0.4 s after the last keystroke,
# and typed text then decodes in tens of milliseconds.
TYPING_EXPECTED_S = 1.0
TYPING_POLL_S = 0.001  # how often a document's submission looks whether typed text is done (`wait_while_typing`)


class ModelOutputError(RuntimeError):
    """The model gave no usable scores for a sentence (NaN), so it has no translation."""


def _joined(pieces: list[Translation]) -> Translation:
    """The Translation of a text decoded in these pieces (one, unless it was too long)."""
    if len(pieces) == 1:
        return pieces[0]
    scores = [p.score for p in pieces if p.score is not None]
    score = sum(scores) / len(scores) if len(scores) == len(pieces) else None  # None if a piece has none
    return Translation(" ".join(p.text for p in pieces), score)


class Submission:
    """A submitted request on the engine's thread (`EngineLoop`): its texts tokenized as the loop
    asks (`take`), each piece's result decoded as it finishes, its handle told.

    A text too long for the model goes in pieces, joined with a space. Texts with terms go after
    those without: a step that mixes constrained and plain groups runs every group's search
    eagerly, so such steps slow the plain sentences beside them too."""

    def __init__(self, translator: Translator, request: TranslationRequest, options: DecodingOptions,
                 prefix: list[int], completions: dict[int, CompletionStart], constraints: dict[int, Constraints],
                 handle: TranslationHandle, tokenized: dict[int, list[list[int]]] | None = None):
        self.translator, self.request, self.options, self.prefix = translator, request, options, prefix
        self.completions, self.constraints, self.handle = completions, constraints, handle
        self._tokenized = tokenized or {}  # texts `Translator.submit` tokenized to check them: not again
        self.priority = request.priority
        self.in_flight: set[Request] = set()
        self._again: list[Request] = []  # completions whose first attempt strayed: forced whole
        self._decoded: dict[int, list[str | None]] = {}  # each text's pieces, decoded as they finish
        self._scored: dict[int, list[Translation | None]] = {}
        texts = request.texts
        order = sorted(range(len(texts)), key=lambda i: i in constraints)  # stable: plain texts first
        self._left = (i for i in order if texts[i].strip())
        self._wave = translator.generator.sentences_at_once(options.num_beams)
        self._wave_left: int | None = None  # of its first wave, texts still to tokenize (None: none taken yet)

    @property
    def filling(self) -> bool:
        """Its first wave is not all tokenized yet: it is taken whatever else waits."""
        return self._wave_left is None or self._wave_left > 0

    def next_portion(self) -> int:
        """The texts `take` tokenizes next: first a wave (the sentences that decode together; typed
        text whole), then a wave's worth in 32 steps, so that the next wave is ready when one ends
        (FEED_TEXTS). The rest of a first wave that typed text cut short comes before them."""
        if self._wave_left is None:
            return len(self.request.texts) if self.priority == TYPED else self._wave
        return self._wave_left or max(FEED_TEXTS, self._wave // 32)

    def take(self, texts: int, until: Callable[[], bool] | None = None) -> list[Request]:
        """Up to `texts` more texts as requests, and those to be decoded again. `until()`, asked
        after every text, ends it sooner: typed text that comes meanwhile would wait for a whole
        wave of a document's texts (hundreds of them on a GPU), or a portion (FEED_TEXTS or more),
        before its admission."""
        requests, self._again = self._again, []
        taken, cut = 0, False
        for i in itertools.islice(self._left, texts):
            sources = self._tokenized.pop(i, None) or self.translator._sources(self.request.texts[i],
                                                                                 self.request.src_lang)
            self._decoded[i] = [None] * len(sources)
            self._scored[i] = [None] * len(sources)
            forced = self.completions[i].attempts[0] if i in self.completions else []
            requests += [self._request(i, piece, source, forced) for piece, source in enumerate(sources)]
            taken += 1
            if until is not None and taken < texts and until():
                cut = True
                break
        if texts > 0:
            self._wave_left = texts - taken if cut and self.filling else 0
        self.in_flight.update(requests)
        return requests

    def _request(self, i: int, piece: int, source: list[int], forced: list[int]) -> Request:
        partial = functools.partial(self._stream, i) if self.request.partials and len(self._decoded[i]) == 1 else None
        return Request(source, self.prefix + forced, self.options, self.priority, partial,
                       adapter=self.request.adapter or None, on_done=functools.partial(self._done, i, piece),
                       alternatives=self.request.alternatives, constraints=self.constraints[i].given if i in self.constraints else None,
                       checked_constraints=self.constraints.get(i))

    def _done(self, i: int, piece: int, request: Request) -> None:
        self.in_flight.discard(request)
        if self.handle.done():
            return
        try:
            self._decode(i, piece, request)
        except Exception as e:  # its own error (NaN scores, an adapter gone) or a listener's: this handle fails
            self.handle.fail(e)

    def _decode(self, i: int, piece: int, request: Request) -> None:
        translator = self.translator
        if request.error is not None:  # its adapter's files changed for the worse since `submit` checked
            raise AdapterError(request.error)
        assert request.result is not None  # set when there is no error
        if ran_out_of_numbers(request.result, request.limit, request.options, translator.tokenizer.eos_id):
            preview = " ".join(self.request.texts[i].split())
            preview = preview if len(preview) <= 40 else preview[:39] + "…"
            precision = str(translator.dtype).removeprefix("torch.")
            raise ModelOutputError(f"the model's output was not a number (NaN) for the sentence \"{preview}\": "
                                   f"the weights are broken or the precision ({precision}) overflows")
        text = translator.tokenizer.decode(request.result)
        start = self.completions.get(i)
        if start is not None:
            if not start.goes_on(text) and request.prefix[len(self.prefix):] != start.attempts[-1]:
                self._again.append(self._request(i, 0, request.src_ids, start.attempts[-1]))
                self.in_flight.update(self._again)
                return
            text = start.as_typed(text) if start.goes_on(text) else text
        self._decoded[i][piece] = text
        self._scored[i][piece] = translator._translation(request, text, start)
        scored = [t for t in self._scored[i] if t is not None]
        if len(scored) == len(self._scored[i]):  # every piece is in
            self.handle.finish(i, _joined(scored))

    def _stream(self, i: int, ids: list[int]) -> None:
        text = self.translator.tokenizer.decode(ids)
        start = self.completions.get(i)
        try:
            if start is None:
                self.handle.partial(i, text)
            elif start.goes_on(text):  # a first attempt that strays from the typed start is not shown
                self.handle.partial(i, start.as_typed(text))
        except Exception as e:  # a listener's
            self.handle.fail(e)


class EngineLoop:
    """The thread that owns the device: it builds the generator and runs it over whatever is submitted.

    The thread that decodes is the one that read and packed the weights: on the CPU, torch's
    OpenMP workers belong to the thread that first ran parallel work, and with a second thread's
    workers in the process as well the engine's steps took half as long again (docs/performance.md,
    "CPU")."""

    def __init__(self, build: Callable[[], Generator]):
        """Start the thread and return once it has built the generator (`build`'s error raised here)."""
        self._wake = threading.Condition()
        self._inbox: list[Submission] = []
        self._closing = False
        self._active: list[Submission] = []  # the engine thread's own: submissions it feeds
        self._steps = 0  # the feeds of the run going on: its steps
        # Whether typed text waits or decodes: set by `submit` and at each step, read by any thread.
        self.typing = False
        self._typing_expected_until = 0.0  # `expect_typing`: time.monotonic() until which typed text is likely
        self._build: Callable[[], Generator] | None = build  # dropped once called: it may hold the weights
        self._error: BaseException | None = None
        self._ready = False
        self._thread = threading.Thread(target=self._run, name="dragoman-engine", daemon=True)
        self._thread.start()
        with self._wake:
            while not self._ready:
                self._wake.wait()
        if self._error is not None:
            self._thread.join()
            raise self._error

    def submit(self, submission: Submission) -> None:
        """Queue a submission (any thread); it joins the running batch at the next step."""
        with self._wake:
            if self._closing:
                raise RuntimeError("the engine is closed")
            self._inbox.append(submission)
            self.typing = self.typing or submission.priority == TYPED
            self._wake.notify_all()

    def add_idle_work(self, work: list[Callable[[], None]]) -> None:
        """Pieces of work for when the loop has nothing to do (`Generator.idle_work`; any thread)."""
        with self._wake:
            self.generator.idle_work.extend(work)
            self._wake.notify_all()

    def expect_typing(self, seconds: float) -> None:
        """Typed text is likely within `seconds` (any thread): meanwhile steps are not pipelined
        (`Generator.run`'s `expecting_typed`)."""
        self._typing_expected_until = time.monotonic() + seconds

    def typing_expected(self) -> bool:
        return time.monotonic() < self._typing_expected_until

    def wait_while_typing(self) -> None:
        """Return once no typed text waits or decodes, or after TYPING_EXPECTED_S (at once on the
        engine's own thread, which would wait for itself). A document's submission calls it as it
        compiles its terms: a long document's compile holds the interpreter, which the engine's
        thread needs at every step of typed text (another thread gets it back only every
        GIL_SWITCH_S)."""
        if threading.current_thread() is self._thread:
            return
        until = time.monotonic() + TYPING_EXPECTED_S
        while self.typing and not self._closing and time.monotonic() < until:
            time.sleep(TYPING_POLL_S)

    def _typed_waiting(self) -> bool:
        """Whether typed text waits in the inbox (asked by the engine's thread, while others append).
        Not `typing`, which also covers typed text decoding and is cleared only at the next feed."""
        return any(submission.priority == TYPED for submission in self._inbox)

    @property
    def closed(self) -> bool:
        """Whether `close` was called: submissions are refused."""
        return self._closing

    def close(self, wait: bool = True) -> None:
        """Cancel everything submitted and end the thread (`wait`: until it has ended)."""
        with self._wake:
            self._closing = True
            self._wake.notify_all()
        if wait and self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        build, self._build = self._build, None
        assert build is not None  # set before the thread starts
        try:
            self.generator: Generator = build()
        except BaseException as e:  # a damaged checkpoint, out of memory: raised in the constructor's thread
            self._error = e
        del build
        with self._wake:
            self._ready = True
            self._wake.notify_all()
        if self._error is not None:
            return
        sys.setswitchinterval(min(sys.getswitchinterval(), GIL_SWITCH_S))  # the whole process's
        bound: Generator | None = None
        while True:
            with self._wake:
                while not (self._inbox or self._closing or self.generator.idle_work):
                    self._wake.wait()
                if self._closing:
                    for submission in self._inbox:
                        submission.handle.cancel()
                    return
                waiting = bool(self._inbox)
            if self.generator is not bound:  # the first run, or a generator a test put in since
                bound = self.generator
                bound.bind_gpu_to_thread()
            if not waiting:  # nothing to translate: a piece of the work left for such a time
                self._do_idle_work()
                continue
            try:
                self._steps = 0
                # Looked up at each run, so that a test can watch it.
                self.generator.run([], self._feed, lambda: bool(self._inbox), self.typing_expected,
                                   self._typed_waiting)
            except BaseException as e:  # out of memory for one sentence, a bug: its handles fail, the loop goes on
                failed, self._active = self._active, []
                if self._steps == 0:  # it raised before its feed took the inbox: run again, it would raise again
                    with self._wake:
                        failed, self._inbox = failed + self._inbox, []
                for submission in failed:
                    submission.handle.fail(e)

    def _do_idle_work(self) -> None:
        """A piece of `Generator.idle_work`, which leaves the queue once done (an empty queue is
        work finished). One that fails leaves the rest undone, said in the log: the engine works
        without it, only slower."""
        try:
            self.generator.idle_work[0]()
        except Exception:
            log.warning("the engine's work for its idle time failed; the rest is left undone", exc_info=True)
            self.generator.idle_work.clear()
        else:
            self.generator.idle_work.popleft()

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
        scheduler = self.generator.scheduler
        # A document's texts are tokenized while its sentences run short, but not while typed text
        # waits or runs (this feed's own included): its steps are short enough that the host's time
        # would show in its latency.
        typing = self.typing = scheduler.typing or any(s.priority == TYPED for s in new)
        self._steps += 1
        if self.generator.idle_work and self._steps > IDLE_WORK_AFTER_STEPS and not typing:
            self._do_idle_work()  # a long run gains from it, a short one need not wait
        few_wait = not typing and len(scheduler.waiting) < self.generator.max_rows
        for submission in sorted(new, key=lambda s: s.priority):
            if not submission.handle.done():
                self._active.append(submission)
        for submission in sorted(self._active, key=lambda s: s.priority):
            if submission.priority == TYPED:
                requests += submission.take(submission.next_portion())
                continue
            more = not typing and (few_wait or submission.filling)
            requests += submission.take(submission.next_portion() if more else 0, self._typed_waiting)
        if idle and not requests:
            for submission in self._active:  # nothing of it left to decode: it cannot finish now
                submission.handle.fail(RuntimeError("the engine lost track of a translation"))
            self._active = []
            return None
        return requests


def term_ids(tokenizer, term: str, tgt_lang: str) -> list[int]:
    """A target term's tokens as it stands in running text: word-initial (a leading "▁") in a script
    written with spaces; glued to what comes before (no "▁") in one without, or for a term that
    starts with punctuation such as a tag `</x1>`."""
    ids = tokenizer.encode_target_start(term)
    glued = get_language(tgt_lang).script in NO_SPACE_SCRIPTS or unicodedata.category(term[0])[0] in "PS"
    if not glued or not ids:
        return ids
    if len(ids) > 1 and tokenizer.decode(ids[:1]) == "":  # a "▁" of its own before the term's pieces
        return ids[1:]
    for context in GLUE_CONTEXTS:  # the "▁" merged into the first piece: the pieces after a word
        before = tokenizer.encode_target_start(context)
        both = tokenizer.encode_target_start(context + term)
        rest = both[len(before):]
        if both[: len(before)] == before and rest and tokenizer.decode(rest) == tokenizer.decode(ids):
            return rest
    return ids


def build_generator(model_dir: Path, config: NllbConfig, dtype: torch.dtype, device: torch.device, int8: bool,
                    stored_int8: Path | None, max_positions: int, **limits) -> Generator:
    """The checkpoint's weights read (and on the CPU made int8, kept in `stored_int8`) into a
    generator with `Generator.build`'s `limits`: the engine's thread's first work (EngineLoop)."""
    packing: list[Callable[[], None]] | None = None
    if int8 and stored_int8 is not None and stored_int8.is_file():
        # The int8 weights kept by an earlier start stand for the projections: those are not read.
        unread = projection_weights(config)
        model = NllbModel(config, load_weights(model_dir, config, dtype, device, skip=unread), max_positions, unread)
        with contextlib.suppress(StoredInt8Unusable):  # damaged or foreign: quantised again below
            packing = quantize_int8(model, stored_int8, pack_now=False)
    if packing is None:
        model = NllbModel(config, load_weights(model_dir, config, dtype, device), max_positions)
        packing = quantize_int8(model, stored_int8, pack_now=False) if int8 else []
    generator = Generator.build(model, **limits)
    generator.idle_work.extend(packing)  # when the engine has a moment (EngineLoop)
    return generator


class Translator:
    def __init__(
        self,
        model_dir: str | Path,
        device: str = "auto",
        dtype: str = "auto",
        *,
        max_rows: int | None = None,
        cache_tokens: int | None = None,
        adapters_dir: str | Path | None = None,
        adapter_slots: int | None = None,
        gpu_memory: int | None = None,
        weights_cache: str | Path | None = None,
        build_kernels_apart: bool = False,
        layers: tuple[int, int] | None = None,
    ):
        """`adapters_dir`: the folder of LoRA adapters that `translate(adapter=...)` names; up to
        `adapter_slots` (default 4) of them stay resident on the device. `gpu_memory`: bytes of GPU
        memory for the work beyond the weights (engine.generator.DEFAULT_GPU_MEMORY by default).
        `weights_cache`: a folder where weights derived from the checkpoint (the CPU's int8 ones)
        are kept between runs, named by the checkpoint's files, so that a later start skips the work.
        `build_kernels_apart`: on a GPU whose Triton cache lacks the kernels (a first launch), they
        are compiled in another process while the references serve (engine/kernel_build.py), as
        the app does; elsewhere they compile on first use. `layers`: (encoder, decoder) layers
        kept of the checkpoint's, for that process's stand-in of the same shapes."""
        model_dir = Path(model_dir)
        self.model_dir = model_dir
        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype, self.device)
        # The CPU default is int8 weights: much faster than float32 (docs/performance.md, "CPU"); float32 stays exact.
        self.int8 = dtype == "int8" or (dtype == "auto" and self.device.type == "cpu" and int8_supported())
        checkpoint = open_checkpoint(model_dir)  # every file checked before anything is allocated
        # What stored translations are keyed on: the weights' files as this engine read them (once:
        # statting them at every typed sentence took a third of the app's own time around it).
        self.model_identity = model_identity(model_dir)
        self.config = checkpoint.config
        if layers is not None:
            self.config = dataclasses.replace(self.config, encoder_layers=layers[0], decoder_layers=layers[1])
        self.generation_defaults = checkpoint.generation_defaults
        self.tokenizer = checkpoint.tokenizer
        stored = None
        if self.int8 and weights_cache is not None:
            name = hashlib.sha256(self.model_identity.encode()).hexdigest()[:32]
            stored = Path(weights_cache) / f"{name}.int8.safetensors"
        build = functools.partial(
            build_generator, model_dir, self.config, self.dtype, self.device, self.int8, stored,
            max(self.config.max_position_embeddings, self.generation_defaults.max_length),
            max_rows=max_rows, cache_tokens=cache_tokens, adapters_dir=adapters_dir, adapter_slots=adapter_slots,
            gpu_memory=gpu_memory)
        self.loop = EngineLoop(build)
        self.kernel_build = KernelBuild.start(self) if build_kernels_apart else None
        # A translator dropped without teardown, or alive at exit, ends its thread: one still in a torch
        # call while the interpreter shuts down aborts the process.
        weakref.finalize(self, self.loop.close, True)

    @property
    def typing(self) -> bool:
        """Whether typed text waits or decodes in the engine now (from any thread; as of its last
        step). Work that would hold the interpreter, such as submitting a long document, can wait."""
        return self.loop.typing

    @property
    def generator(self) -> Generator:
        """The generator the engine's loop runs."""
        return self.loop.generator

    @generator.setter
    def generator(self, generator: Generator) -> None:
        """Another generator over the same model (tests build ones with other limits); before the
        first submission only."""
        self.loop.generator = generator

    def describe(self) -> str:
        c = self.config
        C = c.d_model
        encoder = c.encoder_layers * (4 * C * C + 2 * C * c.encoder_ffn_dim)
        decoder = c.decoder_layers * (8 * C * C + 2 * C * c.decoder_ffn_dim)
        params = c.vocab_size * C + encoder + decoder
        size = f"{params / 1e9:.1f}B" if params >= 1e9 else f"{params / 1e6:.0f}M" if params >= 1e6 else f"{params / 1e3:.0f}k"
        held = f", {self.gpu_memory_held() / 2**30:.1f} GB held" if self.device.type == "cuda" else ""
        return f"{self.model_dir.name} ({size} parameters) on {describe(self.device, self.dtype, self.int8)}{held}"

    def gpu_memory_held(self) -> int:
        """Bytes of GPU memory the engine holds now (weights, caches, graphs, what torch keeps for reuse)."""
        return torch.cuda.memory_reserved(self.device) if self.device.type == "cuda" else 0

    def kernels_building(self) -> bool:
        """Whether the GPU kernels are being compiled in another process (a first launch), the
        slower references serving meanwhile (`build_kernels_apart`)."""
        return self.kernel_build is not None and self.kernel_build.running

    def wait_for_kernels(self) -> None:
        """Return once the kernels built apart are ready (at once where none are being built)."""
        if self.kernel_build is not None:
            self.kernel_build.wait()

    @staticmethod
    def kernels_unavailable() -> str | None:
        """"GPU kernels unavailable: <reason>; using the slower PyTorch path" once a GPU kernel
        failed to compile or launch in this process (translation goes on without them), else None."""
        return kernels.unavailable_message()

    def default_options(self, **overrides) -> DecodingOptions:
        """Decoding options from the checkpoint's generation config, then `overrides` (None = keep)."""
        g = self.generation_defaults
        options = DecodingOptions(
            num_beams=g.num_beams or 4,
            length_penalty=1.0 if g.length_penalty is None else g.length_penalty,
            early_stopping=False if g.early_stopping is None else g.early_stopping,
            max_length=g.max_length,
            min_length=g.min_length or 0,
            no_repeat_ngram_size=g.no_repeat_ngram_size or 0,
            repetition_penalty=1.0 if g.repetition_penalty is None else g.repetition_penalty,
            forced_eos_id=g.forced_eos_id,
        )
        return options.with_changes(**{k: v for k, v in overrides.items() if v is not None})

    def expect_typing(self, seconds: float = TYPING_EXPECTED_S) -> None:
        """A person is typing: typed text is likely within `seconds` (any thread; the window says so
        at each keystroke). Meanwhile the engine finishes each step before it launches the next, so
        that typed text waits for the one document step in flight only; documents decode a little
        slower."""
        self.loop.expect_typing(seconds)

    def submit(self, request: TranslationRequest) -> TranslationHandle:
        """Queue `request` on the engine's loop (`EngineLoop`) from any thread; its texts
        join the running batch at the next step. What is wrong with it raises here, before any
        work: an unknown language (UnknownLanguageError), options, terms or starts that do not fit
        (OptionsError), an adapter that cannot be used (AdapterError). What goes wrong later fails
        the handle: its `result()` raises it (AdapterError when the adapter's files changed for
        the worse since, ModelOutputError for NaN scores)."""
        options = request.options or self.default_options()
        texts = request.texts
        if request.alternatives != 0:  # 0: texts only
            check_int("alternatives", request.alternatives, 1, options.num_beams)
        prefix = self.tokenizer.decoder_prefix(request.tgt_lang)
        self.tokenizer.lang_id(request.src_lang)  # raises UnknownLanguageError before any work starts
        completions = {i: completion_start(self.tokenizer, start, options) for i, start in enumerate(request.starts or [])
                       if start and start.strip() and i < len(texts) and texts[i].strip()}
        # Texts tokenized for the checks below, each once; those the caller tokenized (a document's process).
        tokenized = self._given_sources(request)
        for i in completions:
            if i not in tokenized:
                tokenized[i] = self._sources(texts[i], request.src_lang)
            if len(tokenized[i]) > 1:
                raise OptionsError("start", f"cannot complete a text of more than the model's "
                                            f"{self.max_positions} source tokens")
        constraints = self._constraints(texts, request.src_lang, request.tgt_lang, options, request.terms or [],
                                        tokenized, None if request.priority == TYPED else self.loop.wait_while_typing)
        adapter = request.adapter or None
        if adapter is not None:
            self.generator.lora.slot_for(adapter)  # a bad name raises AdapterError now; its read starts
        handle = TranslationHandle(len(texts))
        for i, text in enumerate(texts):
            if not text.strip():
                handle.finish(i, Translation(""))
        if not handle.done():
            self.loop.submit(Submission(self, request, options, prefix, completions, constraints, handle, tokenized))
        return handle

    def translate(
        self,
        texts: list[str],
        src_lang: str,
        tgt_lang: str,
        options: DecodingOptions | None = None,
        *,
        on_result: Callable[[int, str], None] | None = None,
        **parameters,
    ) -> list[str | None]:
        """Translate each text (one segment each; one too long for the model goes in pieces); blank
        texts stay empty. `submit` and wait: the parameters are `translate_full`'s, and
        `on_result(i, text)` hears text i's translation as soon as it is whole."""
        on_translation = parameters.pop("on_translation", None)
        if on_translation is None:  # texts only: no scores read
            parameters["alternatives"] = 0

        def whole(i: int, translation: Translation) -> None:
            if on_result is not None:
                on_result(i, translation.text)
            if on_translation is not None:
                on_translation(i, translation)

        found = self.translate_full(texts, src_lang, tgt_lang, options, on_translation=whole, **parameters)
        return [None if translation is None else translation.text for translation in found]

    def translate_full(
        self,
        texts: list[str],
        src_lang: str,
        tgt_lang: str,
        options: DecodingOptions | None = None,
        *,
        priority: int = DOCUMENT,
        on_partial: Callable[[int, str], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
        adapter: str | None = None,
        starts: list[str | None] | None = None,
        alternatives: int = 1,
        on_translation: Callable[[int, Translation], None] | None = None,
        terms: list[list[str | tuple[str | None, ...]]] | None = None,
    ) -> list[Translation | None]:
        """Each text's `Translation` (None: stopped before it was done): a `TranslationRequest`
        submitted (`submit`) and waited for, on this thread.

        `starts[i]`, where given and not blank, is the start of text i's translation as a person
        typed it: the translation is completed from it (`CompletionStart`) and begins with it
        exactly. A start that leaves no room within max_length, or one given for a text too long
        to read at once, raises OptionsError.

        `on_partial(i, text)` receives the current best hypothesis of text i while it decodes;
        `on_translation(i, translation)` text i's translation (its score and up to `alternatives`
        - 1 alternatives, at most num_beams) as soon as it is whole (blank texts at once); both on
        the engine's thread. When `should_stop()` turns true (looked at every STOP_POLL seconds) the
        call returns early, unfinished texts as None.
        `terms[i]`, where given, are target-language strings that text i's translation must each
        hold verbatim (`term_ids`; blank ones are ignored): it is decoded by lexically constrained
        beam search. An entry that is a tuple (or list) of strings is a chain: they must all appear
        in that order, anything between them; a None in it is a gap: one token at least, none of
        the chain's (a tag pair around words). Terms that cannot all fit within max_length, or given
        for a text too long to read at once, raise OptionsError.
        `adapter` names a LoRA adapter of the adapters folder (None or "": the base model); one
        that cannot be used raises AdapterError, naming the file and the problem. A sentence for
        which the model's scores hold no number (NaN: broken weights, or float16 overflow) raises
        ModelOutputError, naming the sentence, instead of giving a garbled translation.
        """
        handle = self.submit(TranslationRequest(texts, src_lang, tgt_lang, options, terms, starts, alternatives,
                                                adapter, priority, partials=on_partial is not None))
        handle.subscribe(on_partial, on_translation)
        while should_stop is not None:
            if should_stop():
                handle.cancel()
            if handle.wait(STOP_POLL):
                break
        return handle.result()

    def _translation(self, request: Request, text: str, start: CompletionStart | None) -> Translation:
        """A finished request's Translation: `text`, its decoded result, with the score and the
        other hypotheses the step runner read (a completion's, as typed; those that stray from
        the typed start left out)."""
        assert request.result is not None  # finished
        hypotheses: list[tuple[list[int], float | None]] = (
            list(request.hypotheses) if request.hypotheses else [(request.result, None)])
        others = []
        for tokens, score in hypotheses[1:]:
            other = self.tokenizer.decode(tokens)
            if start is not None:
                if not start.goes_on(other):
                    continue
                other = start.as_typed(other)
            others.append(Translation(other, score))
        return Translation(text, hypotheses[0][1], others)

    def _constraints(self, texts: list[str], src_lang: str, tgt_lang: str, options: DecodingOptions,
                     terms: list[list[str | tuple[str | None, ...]]], tokenized: dict[int, list[list[int]]],
                     pause: Callable[[], None] | None = None) -> dict[int, Constraints]:
        """Each text's terms as token sequences (`term_ids`; a chain as a list of them), compiled once
        (the generator takes them as they are) and checked to fit within max_length, and the text
        within the model's positions (its source ids kept in `tokenized` for `Submission.take`).
        `pause()`, where given, is called after every FEED_TEXTS texts (a document's:
        `EngineLoop.wait_while_typing`)."""
        prefix = self.tokenizer.decoder_prefix(tgt_lang)
        constraints = {}
        # A document's texts share few terms (its marks, the same glossary entries): each term is
        # tokenized, and each set of terms compiled and checked, once a call.
        tokens: dict[object, list] = {}
        compiled_for: dict[tuple, Constraints | None] = {}
        for i, own in enumerate(terms[: len(texts)]):
            if pause is not None and i and i % FEED_TEXTS == 0:
                pause()
            key = tuple(tuple(term) if isinstance(term, list) else term for term in own or [])
            if not key or not texts[i].strip():
                continue
            if key not in compiled_for:
                sequences = []
                for term in key:
                    if term not in tokens:
                        tokens[term] = self._term(term, tgt_lang)
                    sequences.append(tokens[term])
                sequences = [s for s in sequences if s]
                try:
                    checked = Constraints(sequences, self.tokenizer.eos_id) if sequences else None
                    if checked is not None:
                        check_fit(checked, prefix, options)
                except OptionsError as e:
                    raise OptionsError("terms", f"of text {i + 1}: {e.problem}") from None
                compiled_for[key] = checked
            compiled = compiled_for[key]
            if compiled is None:
                continue
            if i not in tokenized:
                tokenized[i] = self._sources(texts[i], src_lang)
            if len(tokenized[i]) > 1:
                raise OptionsError("terms", f"cannot be kept in a text of more than the model's "
                                            f"{self.max_positions} source tokens")
            constraints[i] = compiled
        return constraints

    def _term(self, term: str | tuple[str | None, ...] | list[str | None], tgt_lang: str) -> list:
        """A term's tokens (`term_ids`), or for a tuple or list of strings the chain of theirs (None:
        a gap: a token that shows something); [] for a blank one."""
        if isinstance(term, str):
            return term_ids(self.tokenizer, term.strip(), tgt_lang) if term.strip() else []
        segments = [self._shows_nothing if t is None else term_ids(self.tokenizer, t.strip(), tgt_lang)
                    for t in term if t is None or t.strip()]
        return segments if any(isinstance(s, list) and s for s in segments) else []

    @functools.cached_property
    def _shows_nothing(self) -> frozenset[int]:
        """The tokens that decode to no text or only a space (specials, language codes, a lone "▁",
        the embedding's spare rows): they fill no gap of a chain, since the words it is for must show
        (`</s>` aside: it ends the sentence, which no unmet chain lets happen)."""
        return self.tokenizer.silent_ids(self.generator.model.config.vocab_size) - {self.tokenizer.eos_id}

    def spells(self, text: str) -> bool:
        """Whether the vocabulary writes `text` exactly: none of its characters is lost as <unk>
        (the app marks verbatim spans with what it spells)."""
        return self.tokenizer.decode(self.tokenizer.encode_target_start(text)) == text

    @property
    def max_positions(self) -> int:
        """The source tokens the model reads at once (a longer text goes in pieces)."""
        return self.generator.model.max_positions

    def _sources(self, text: str, src_lang: str) -> list[list[int]]:
        """The text's source ids in pieces the model can read (`encode_source_pieces`)."""
        return self.tokenizer.encode_source_pieces(text, src_lang, self.max_positions)

    def _given_sources(self, request: TranslationRequest) -> dict[int, list[list[int]]]:
        """`request.sources`, checked: one entry a text, each a text's pieces as `_sources` gives
        them (the caller's tokenizer is taken to be this model's), with ids of the vocabulary and
        within the model's positions; blank texts' entries are not used."""
        sources = request.sources
        if sources is None:
            return {}
        if len(sources) != len(request.texts):
            raise OptionsError("sources", f"has {len(sources)} entries for {len(request.texts)} texts")
        vocabulary, positions = self.config.vocab_size, self.max_positions
        given = {}
        for i, (text, pieces) in enumerate(zip(request.texts, sources)):
            if not text.strip():
                continue
            if not pieces or not all(0 < len(piece) <= positions and 0 <= min(piece) and max(piece) < vocabulary
                                     for piece in pieces):
                raise OptionsError("sources", f"of text {i + 1} are not this model's source ids in pieces of at "
                                              f"most {positions}")
            given[i] = [list(piece) for piece in pieces]
        return given

    # -- adapters ------------------------------------------------------------------------------------

    def set_adapters_dir(self, folder: str | Path | None) -> None:
        """Take adapters from `folder` from now on (resident ones from elsewhere are no longer used)."""
        self.generator.lora.folder = Path(folder) if folder else None

    def adapter_identity(self, adapter: str | None) -> str:
        """What a cache of translations keys on besides the model: "" for the base model, else the
        adapter's name and a hash of its files, which changes when they do."""
        if not adapter:
            return ""
        return f"{adapter}:{self.generator.lora.identity_of(adapter):016x}"

    def prepare_document_steps(self, **options) -> None:
        """Capture, when the engine has nothing to do (`Generator.idle_work`), the CUDA graphs of a
        document's plain steps with these overrides of the default options, at every row count:
        otherwise the first document of a session meets each the first time in its own run (its
        ~180 kernels launched from Python, then captured: tens of milliseconds of the engine's
        thread each), and typed text beside it waits for them. On the GPU only."""
        if not self.needs_warm_up():
            return
        runner, documents = self.generator.runner, self.default_options(**options)
        work: list[Callable[[], None]] = [functools.partial(runner.prepare_step, documents, size, parity)
                                          for size in runner.step_sizes(documents) for parity in (0, 1)]
        self.loop.add_idle_work(work)

    def needs_warm_up(self) -> bool:
        """Whether a first translation costs more than later ones: on the GPU (kernels compiled,
        graphs captured on first use); not on the CPU, where it would only delay loading."""
        return self.device.type == "cuda"

    def warm_up(self, **options) -> None:
        """Translate typed sentences, one at a time and each twice, with these overrides of the
        default options, and forget them: a short one, one of more tokens than `FUSED_MAX_ROWS`,
        and one past each source length up to which a typed sentence is folded at one S
        (`FOLD_SLOTS`: its steps are graphs of their own).

        On the GPU the first translation compiles the Triton kernels (seconds on a fresh install,
        before Triton's disk cache has them) and captures the CUDA graphs of a typed sentence's
        steps (keyed by the decoding options); the longer source runs the encoder's projections
        through cuBLAS, whose first call sets the library up. Run beside the first sentences (the
        window's worker starts it on a thread once the model is loaded), it spares a person's
        first typed sentences that wait (docs/performance.md, "Warm once loaded"). Where the
        kernels are built apart (`build_kernels_apart`), it waits for that first.
        See `needs_warm_up`."""
        self.wait_for_kernels()  # graphs are captured with the kernels, not the references
        tok = self.tokenizer
        texts, text = [], "Hello."
        for bound in sorted({0, FUSED_MAX_ROWS, *FOLD_SLOTS[:-1]}):  # a source just past each
            while len(tok.encode_source(text, "eng_Latn")) <= bound:
                text += " Hello."
            texts.append(text)
        for text in texts * 2:  # twice: a graph is captured at its key's second use (engine/cuda_graphs.py)
            # Streaming partial results, as the window asks: a graphed step that reports them is
            # captured apart from one that does not.
            self.submit(TranslationRequest([text], "eng_Latn", "fra_Latn", self.default_options(**options),
                                           priority=TYPED, partials=True)).result()

    def teardown(self) -> None:
        """Cancel what was submitted, end the engine's loop, free the device's memory."""
        self.loop.close()
        self.generator.teardown()
