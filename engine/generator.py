"""The generator: sentences join the running batch at a step boundary, decode together, leave as they finish.

Each turn of `run` is plan -> run -> report: the scheduler (engine/scheduler.py) says which
sentences to admit and which to preempt and whether to step, from counts of free rows and blocks;
the step runner (engine/step_runner.py) does that on the device; the sentences the step finished go
back to the scheduler.

On the GPU steps are pipelined: the host queues step t + 1 before it reads which sentences step t
finished, so the device never waits for the host; a sentence found done sits step t + 1 out (its
rows replaced by the padding row on the device). On the CPU, where a step has run by the time it
is launched, each step is finished at once.

Adapters: a request naming a LoRA adapter takes a reference on its slot in the LoRA pool at
admission (`_acquire_adapter`) and gives it back when it finishes or is preempted. An adapter that
is not resident is read on the pool's own thread and copied into a slot at the top of a later turn
(`LoraPool.install_staged`); until then, or while every slot is held, its requests wait in the
queue and the others are admitted past them. Its rows carry the slot, so one batch mixes adapters.
"""

from __future__ import annotations

import collections
import itertools
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from dragoman.engine.constraints import Constraints, check_fit, search_width
from dragoman.engine.decoding import DecodingOptions, OptionsError
from dragoman.engine.device import sum_in_float32
from dragoman.engine.heap import freeze_heap, thaw_heap
from dragoman.engine.kv_cache import PagedKVCache
from dragoman.engine.lora_pool import DEFAULT_SLOTS, LoraPool
from dragoman.engine.memory import BLOCK_SIZE, DEFAULT_GPU_MEMORY, plan_cpu, plan_memory
from dragoman.engine.model import FoldedSources, NllbModel
from dragoman.engine.peft_adapter import AdapterError
from dragoman.engine.scheduler import DOCUMENT, TYPED, Plan, Scheduler, Ticket
from dragoman.engine.step_runner import LaunchedStep, StepRunner

__all__ = ["DEFAULT_GPU_MEMORY", "Generator", "Request"]
ADAPTER_WAIT = 0.05  # seconds a run with nothing to decode waits for an adapter's read before it looks again
ARRIVAL_POLL_S = 50e-6  # how often a wait for a document's step looks for typed text (a step takes milliseconds)
log = logging.getLogger(__name__)


def arrives_during(step: LaunchedStep | None, arrived: Callable[[], bool]) -> bool:
    """Wait for a launched step to end on the device, unless typed text arrives first (`arrived()`):
    whether it did. The host's wait for a step (`StepRunner.finish`) cannot be interrupted, and the
    reading of the step's report, the feed and the plan that follow would come before a typed
    sentence's admission while the device waits."""
    if step is None or step.ready is None:  # on the CPU a step has run by the time it is launched
        return False
    while not step.ready.query():
        if arrived():
            return True
        time.sleep(ARRIVAL_POLL_S)
    return False


@dataclass(eq=False)  # compared by identity: a set of them is what `withdraw` takes
class Request:
    """One sentence to translate, as the generator takes it and gives its result back. `prefix` is
    the decoder start: `</s>` then the target language code. The scheduler sees only its ticket
    (`Ticket`: counts and keys, made as the generator takes it); the step runner reads the rest."""

    src_ids: list[int]
    prefix: list[int]
    options: DecodingOptions
    priority: int = DOCUMENT  # lower runs first: TYPED, DOCUMENT
    on_partial: Callable[[list[int]], None] | None = None
    adapter: str | None = None  # a LoRA adapter of the pool's folder; None: the base model
    on_done: Callable[[Request], None] | None = None  # called with the request once its result is set
    # This sentence's own max_length (HF's: `</s>`, the language code and the tokens), where it is
    # below the options': sentences of one batch may stop at different lengths and still share a search.
    max_length: int | None = None
    # How many of its best finished hypotheses it wants with their scores (`hypotheses`); 0: only
    # its result, so that plain sentences read nothing more.
    alternatives: int = 0
    # Token sequences its result must each hold (lexically constrained search, engine/constraints.py).
    constraints: list[list[int]] | None = None
    result: list[int] | None = None
    hypotheses: list[tuple[list[int], float]] | None = None  # (tokens, score), best first; set with `result`
    error: str | None = None  # why it did not run (an unusable adapter; a request `feed` gave too long): no result
    # Its constraints compiled (None: a plain search), by the translator or else when the generator
    # checks the request, which sets the rows their search keeps (constraints.search_width).
    checked_constraints: Constraints | None = field(default=None, repr=False)
    width: int | None = None
    ticket: Ticket | None = field(default=None, repr=False)  # what the scheduler knows of it, while it runs

    @property
    def limit(self) -> int:
        """The longest its hypotheses may grow: its max_length, or the options'."""
        own = self.max_length if self.max_length is not None else self.options.length
        return min(own, self.options.length)

    @property
    def search_options(self) -> DecodingOptions:
        """The options of the search it shares with others: its options, with its own max_length
        where a score processor reads that (forced `</s>`), so that every sentence of a search agrees."""
        if self.options.forced_eos_id is None or self.limit == self.options.length:
            return self.options
        return self.options.with_changes(max_length=self.limit, max_new_tokens=None)

    @property
    def beams(self) -> int:
        """The rows it decodes in: its beams, or its constrained search's width."""
        return self.width if self.width is not None else self.options.num_beams

    @property
    def typed(self) -> bool:
        return self.priority == TYPED

    @property
    def constrained(self) -> bool:
        """Whether it decodes by constrained search (its constraints checked, `Generator._check_request`)."""
        return self.checked_constraints is not None

    @property
    def group_key(self):
        """What the sentences whose searches advance as one share: the search options, and for a
        constrained search that and its width, so that plain sentences keep their search as it is;
        typed text in groups of its own, which step without the documents' (`Scheduler.stepping`)."""
        if not self.constrained:
            return self.search_options, self.typed
        return ("constrained", self.search_options, self.beams, self.typed)


class Generator:
    @classmethod
    def build(
        cls,
        model: NllbModel,
        max_rows: int | None = None,
        cache_tokens: int | None = None,
        graphs: bool | None = None,
        adapters_dir: str | Path | None = None,
        adapter_slots: int | None = None,
        fold_sources: bool | None = None,
        gpu_memory: int | None = None,
    ) -> "Generator":
        """A generator with caches sized for the model's device: on a GPU `gpu_memory` bytes
        (default DEFAULT_GPU_MEMORY) of rows and caches (`plan_memory`), a few MB on the CPU;
        `max_rows` and `cache_tokens` override the plan.

        `graphs` (default: on CUDA) runs decoder steps through CUDA graphs; on the CPU that path
        runs eagerly, padded as on the GPU. Adapters come from `adapters_dir`, with
        `adapter_slots` of them resident at once (default 4). `fold_sources` (default: graphed
        half-precision steps on the GPU) runs a lone short sentence's cross-attention by
        associativity (`FoldedSources`).
        """
        c, device, dtype = model.config, model.device, model.dtype
        graphed = graphs if graphs is not None else device.type == "cuda"
        folded = None
        if graphed and (fold_sources if fold_sources is not None else device.type == "cuda" and dtype != torch.float32):
            folded = FoldedSources(model)  # before the caches, which take a share of what memory is left
            if device.type == "cuda":
                torch.cuda.empty_cache()  # the layers' weights it stacked
        bytes_per_token = c.decoder_layers * 2 * c.d_model * torch.finfo(dtype).bits // 8
        if device.type == "cuda":
            sum_in_float32(dtype)
            free, _ = torch.cuda.mem_get_info(device)
            logits_per_row = c.vocab_size * torch.finfo(dtype).bits // 8
            plan = plan_memory(gpu_memory or DEFAULT_GPU_MEMORY, bytes_per_token, logits_per_row, model.max_positions,
                               free)
        else:
            layer = 4 * c.d_model**2 + 2 * c.d_model**2 + 2 * c.d_model * c.decoder_ffn_dim  # self, cross (q, o), ffn
            plan = plan_cpu(c.decoder_layers * layer + c.vocab_size * c.d_model, bytes_per_token, model.max_positions)
        tokens = cache_tokens or plan.cache_tokens

        def cache(tokens: int) -> PagedKVCache:
            blocks = -(-tokens // BLOCK_SIZE)
            return PagedKVCache(c.decoder_layers, blocks, BLOCK_SIZE, c.decoder_heads, c.head_dim, dtype, device)

        lora = LoraPool(c, adapter_slots or DEFAULT_SLOTS, device, dtype, adapters_dir)
        runner = StepRunner(model, cache(tokens), cache(max(tokens // 4, 2048)), max_rows or plan.rows, lora, folded,
                            graphed)
        generator = cls(runner)
        freeze_heap()
        return generator

    def __init__(self, runner: StepRunner):
        self.runner = runner
        # The runner's, named here for the translator, the bench and the tests.
        self.model, self.rows, self.lora = runner.model, runner.rows, runner.lora
        self.self_cache, self.cross_cache = runner.self_cache, runner.cross_cache
        self.scheduler = Scheduler(runner.rows.capacity, self.self_cache.block_size,
                                   self.self_cache.num_total_blocks(), self.cross_cache.num_total_blocks())
        self._finished: list[Request] = []  # finished requests whose `on_done` has yet to run
        self._requests: dict[int, Request] = {}  # by ticket id: those waiting or decoding in this run
        self._ticket_ids = itertools.count()
        self._group_numbers: dict[object, int] = {}  # `Request.group_key` -> `Ticket.group`
        # Work left for when the engine has time, a piece at a time, done by the engine's loop
        # (EngineLoop) on its own thread: the CPU's int8 weights to prepack (engine/quantize.py),
        # the GPU's document steps to capture (Translator.prepare_document_steps).
        self.idle_work: collections.deque[Callable[[], None]] = collections.deque()
        # On the GPU steps are pipelined: the host queues step t + 1 before it reads which sentences
        # step t finished, so the device never waits for the host. On the CPU a step has run by the
        # time it is launched, so there is nothing to overlap: it is finished at once (no step is
        # spent on sentences already done, and results come a step sooner). Tests turn it on to run
        # the GPU's order on the CPU.
        self.pipelined = self.model.device.type == "cuda"

    @property
    def max_rows(self) -> int:
        """Rows admitted at once; at most the capacity of `rows`."""
        return self.scheduler.max_rows

    @max_rows.setter
    def max_rows(self, rows: int) -> None:
        self.scheduler.max_rows = rows

    @property
    def admit_share(self) -> float:
        """Of max_rows free before waiting documents join running sentences (engine/scheduler.py)."""
        return self.scheduler.admit_share

    @admit_share.setter
    def admit_share(self, share: float) -> None:
        self.scheduler.admit_share = share

    def sentences_at_once(self, num_beams: int) -> int:
        """How many sentences of `num_beams` beams decode together (a wave): max_rows // num_beams,
        at least one."""
        return max(1, self.max_rows // num_beams)

    def num_free_blocks(self) -> int:
        return self.self_cache.num_free_blocks()

    def num_total_blocks(self) -> int:
        return self.self_cache.num_total_blocks()

    def bind_gpu_to_thread(self) -> None:
        """Make the model's GPU, and a stream of its own, current for the calling thread."""
        device = self.model.device
        if device.type == "cuda":
            torch.cuda.set_device(device)
            self.stream = torch.cuda.Stream(device)
            torch.cuda.set_stream(self.stream)

    def teardown(self) -> None:
        """Free the caches and the weights; the generator is unusable afterwards."""
        device = self.model.device
        del self.runner, self.model, self.rows, self.lora, self.self_cache, self.cross_cache
        thaw_heap()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            torch.cuda.empty_cache()

    def run(
        self,
        requests: list[Request],
        feed: Callable[[bool], list[Request] | None] | None = None,
        arrived: Callable[[], bool] | None = None,
        expecting_typed: Callable[[], bool] | None = None,
        typed_arrived: Callable[[], bool] | None = None,
    ) -> list[Request]:
        """Translate all requests to completion (each gets `.result`), admitting them as memory
        allows; returns them, and those `feed` gave, in that order.

        `feed(idle)`, where given, is asked for more requests at every step, while the device runs
        it: a list (maybe empty; each queues behind the waiting ones of its priority, ahead of less
        urgent ones: `Scheduler.add`), or None once it has no more. `idle`: nothing waits or decodes,
        so the run ends if it gives nothing. So requests join the running batch at the next step
        (the engine's loop, engine/translator.py's EngineLoop, feeds what any thread submits), and a document's
        later sentences are tokenized in the host's idle time instead of while the device waits.
        Each request's `on_done` runs likewise while the device works, once its result is set
        (typed text's as soon as the step that finished it is read).
        `arrived()`, where given, says whether `feed` has new requests; it is asked before each step
        is planned, so that one that came while the host read the last step's report (typed text)
        is planned into the next step, not (pipelined) into the one after. `expecting_typed()`, where
        given, says whether typed text is expected soon (a person is typing): meanwhile document
        steps are shorter (the scheduler's "Paced documents"), and each is finished before the next
        is launched, so that typed text that comes waits for the one short step in flight, not for
        the one queued behind it too, and the host waits for that step watching `typed_arrived()`
        (whether `feed` has typed text), so that typed text that comes is admitted and queued
        behind it at once (`arrives_during`)."""
        for request in requests:
            self._check_request(request)
        everything = list(requests)
        scheduler, runner = self.scheduler, self.runner
        self._requests = {}  # none of a run that raised
        scheduler.start([self._ticket_for(request) for request in requests])
        # Pipelined (`self.pipelined`), the host learns which sentences a step finished while the
        # device runs the next one; sentences found done sit that next step out.
        pending: LaunchedStep | None = None
        self._finished = []  # none of a run that raised

        def pull(report: bool = True) -> None:
            """Report finished requests (`on_done`), and take what `feed` has."""
            nonlocal feed
            if report:
                self._report_finished()
            if feed is None:
                return
            more = feed(not (scheduler.waiting or scheduler.running or self._finished))
            if more is None:
                feed = None
                return
            for request in more:
                try:
                    self._check_request(request)
                except ValueError as e:  # raising here would leave the running sentences behind
                    request.error = str(e)
                    if request.on_done is not None:
                        self._finished.append(request)
                    continue
                scheduler.add(self._ticket_for(request))
            everything.extend(more)

        try:
            while scheduler.waiting or scheduler.running or feed is not None or self._finished:
                if not scheduler.running or (arrived is not None and arrived()):
                    pull(report=False)  # what is finished is reported while the device works
                # Documents' steps shortened while a person types.
                scheduler.pacing = expecting_typed is not None and not scheduler.typing and expecting_typed()
                try:
                    self.lora.install_staged()  # adapters read since the last step go into their slots
                    plan = scheduler.schedule(self.self_cache.num_free_blocks(), self.cross_cache.num_free_blocks(),
                                              self._acquire_adapter, in_flight=pending is not None)
                    self._admit(plan)
                    if not scheduler.running:
                        self._report_finished()
                        if scheduler.waiting:  # what waits needs an adapter still being read
                            self.lora.install_staged(timeout=ADAPTER_WAIT)
                        continue  # or nothing is left, or every waiting request failed (an unusable adapter)
                    launched = runner.launch(scheduler.stepping()) if plan.step else None
                except torch.cuda.OutOfMemoryError as e:
                    self._shrink(e)
                    pending = None  # its sentences were requeued
                    continue
                # Typed text's own steps stay pipelined: only a document's wait for it.
                # Asked again: a keystroke that came while this step was planned holds it too.
                awaiting_typed = expecting_typed is not None and not scheduler.typing and expecting_typed()
                pipelined = self.pipelined and not awaiting_typed
                if (self.pipelined and awaiting_typed and typed_arrived is not None
                        and arrives_during(launched, typed_arrived)):
                    # Typed text came while the document's step ran: it is admitted and its first
                    # step queued behind that one at once, which is then read while they run.
                    pipelined = True
                if pipelined:  # `launched` runs while the host finishes the step before it
                    finishing, pending = [pending], launched
                    pull()
                else:
                    finishing, pending = [pending, launched], None
                left = [s for step in finishing if step is not None for s in runner.finish(step)]
                done = [self._requests.pop(s.ticket.id) for s in left]
                # Reported while the device runs the next step (`pull`).
                self._finished += [r for r in done if r.on_done is not None]
                for sentence in left:
                    runner.release(sentence)
                scheduler.update(left)
                if any(request.typed for request in done):
                    # Typed text's translation now: at the next `pull` it would come after the next
                    # step is planned and launched, documents admitted to it (an encoder pass).
                    self._report_finished(typed_only=True)
                if not pipelined:
                    pull()
        except BaseException:
            # An error from the caller's feed or on_done, or any other, ends the run: the sentences
            # still decoding give their rows and blocks back, or the engine would keep them for good.
            self._stop()
            raise
        return everything

    def _admit(self, plan: Plan) -> None:
        """The plan's preemptions, then its admissions: typed text takes the rows and blocks of the
        document sentences that made way for it."""
        for ticket, error in plan.finished:
            request = self._requests.pop(ticket.id)
            if error is None:
                request.result = list(request.prefix)  # at its max_length already
            request.error = error
            if request.on_done is not None:
                self._finished.append(request)
        for sentence in plan.preempt:
            self.runner.release(sentence)
        if plan.admit:
            group = self.scheduler.groups[plan.admit[0].ticket.group]
            requests = [self._requests[s.ticket.id] for s in plan.admit]
            try:
                self.runner.admit(plan.admit, requests, plan.alone, group)
            except torch.cuda.OutOfMemoryError:
                self.scheduler.unadmit(plan.admit)
                raise

    def _acquire_adapter(self, adapter: str | None) -> int | str | None:
        """A reference on the slot of a request's adapter (-1 for the base model); None while it is
        being read (on the pool's thread) or every slot is held; why, for an unusable adapter."""
        if adapter is None:
            return -1
        try:
            slot = self.lora.slot_for(adapter)
            return None if slot is None else self.lora.acquire_adapter_slot(slot)
        except AdapterError as e:
            return str(e)

    def withdraw(self, requests: set[Request]) -> None:
        """Cancelled requests leave at once, waiting or decoding (their rows and blocks given back;
        a step in flight skips them, as it does preempted sentences); called between steps (`feed`)."""
        ids = {request.ticket.id for request in requests if request.ticket is not None}
        for sentence in self.scheduler.withdraw(ids):
            self.runner.release(sentence)
        for ticket_id in ids:
            self._requests.pop(ticket_id, None)

    def _stop(self) -> None:
        """A run that ends early (an error) gives back the rows of its running sentences."""
        for sentence in self.scheduler.stop():
            self.runner.release(sentence)

    def _report_finished(self, typed_only: bool = False) -> None:
        """Each finished request's `on_done`, typed text's first. Documents' are left for a later
        call with `typed_only`, and while typed text waits or runs (a cohort of them finishing
        together would take the host milliseconds in typed text's path)."""
        finished = [r for r in self._finished if r.typed]
        documents = [r for r in self._finished if not r.typed]
        if self.scheduler.typing or typed_only:
            self._finished = documents
        else:
            finished += documents
            self._finished = []
        for request in finished:
            assert request.on_done is not None  # `_finished` holds those with one
            request.on_done(request)

    def _shrink(self, error: Exception) -> None:
        """Out of GPU memory mid-step: requeue every running sentence (a restart gives the same
        result), halve the rows a step may have, free what the allocator holds, and carry on."""
        requeued = self.scheduler.shrink()
        if requeued is None:
            raise error  # not even one sentence fits: nothing left to shrink
        for sentence in requeued:
            self.runner.release(sentence)
        log.warning("out of GPU memory; decoding at most %d rows per step from now on (%s)", self.max_rows, error)
        self.runner.shrink(self.max_rows)

    def _ticket_for(self, request: Request) -> Ticket:
        """What the scheduler knows of a checked request (`_check_request`); the request is kept by
        the ticket's id until it leaves. Requests that share a `group_key` get one group number."""
        if not self._requests:
            self._group_numbers.clear()  # no ticket holds one: the numbers start over
        group = self._group_numbers.setdefault(request.group_key, len(self._group_numbers))
        ticket = Ticket(next(self._ticket_ids), request.beams, len(request.prefix), len(request.src_ids), request.limit,
                        request.priority, request.constrained, request.alternatives > 0, group, request.adapter)
        request.ticket = ticket
        self._requests[ticket.id] = request
        return ticket

    def _check_request(self, request: Request) -> None:
        limit = self.model.max_positions
        if len(request.src_ids) > limit:
            raise ValueError(f"a source of {len(request.src_ids)} tokens is longer than the {limit} the model reads")
        if request.options.length > limit:
            raise ValueError(f"max_length {request.options.length} is more than the model's {limit} positions")
        if request.max_length is not None and request.max_length < 2:
            raise ValueError(f"max length must be at least 2 (the start token and the language code), got {request.max_length}")
        if request.constraints and request.width is None:
            # compiled once: by the translator, which checked them against the options already
            constraints = request.checked_constraints or Constraints(request.constraints, self.model.config.eos_id)
            vocab = self.model.config.vocab_size
            if constraints.largest_token >= vocab:
                raise OptionsError("constraints",
                                   f"hold token {constraints.largest_token}, past the vocabulary of {vocab}")
            check_fit(constraints, request.prefix, request.options, request.limit)
            request.checked_constraints = constraints
            request.width = search_width(request.options.num_beams, constraints.total)
