"""The runner: sentences join the running batch at a step boundary, decode together, leave as they finish.

Every live row (a beam, or the one row of a greedy sentence) lives in `DecoderRows` on the device.
Each step feeds every row the newest token of its hypothesis through one decoder step (a CUDA
graph on the GPU), then the searches of all sentences that share decoding options advance
together as a few tensor operations (engine/batched_search.py). The host does a fixed amount of
work per options group and a little integer bookkeeping per sentence: nothing per row. On the GPU
steps are pipelined: the host queues step t + 1 before it reads which sentences step t finished,
so the device never waits for the host; a sentence found done sits step t + 1 out (its rows
replaced by the scratch row on the device). Each step ends by storing what the host reads of it in
host memory (kernels.step_report): which sentences are done, their results, and the best
hypotheses of those that stream partial results. On the CPU, where a step has run by the time it
is launched, each step is finished at once.

Admission: the sources of new sentences are encoded together; all but the last token of each
decoder prefix (`</s>` before the language code) is fed to each sentence's first row in a step
without logits, and its other beams take over that row's slots. From then on the sentence scores
at every step. A sentence of several beams with the usual prefix skips that step: in its first
step one beam feeds `</s>` for all while the others feed the language code (engine/rows.py).

A typed sentence (admitted alone, a short source, the base model, half precision on the GPU) has
its source folded into every layer's cross-attention as the encoder's graph ends
(engine.model.FoldedSources), and its steps score against that instead of reading the source cache,
while no other sentence runs beside it (`_fold_slots`, `_search_in_graph`).

Documents join in bulk: while sentences run, waiting ones of priority 1 or more are admitted only
once `admit_share` of the rows is free (or all of them fit), since each admission costs an encoder
pass, and for greedy a prefix step, that a few sentences use poorly. Typed text (priority 0) never
waits for that.

Memory: sentences are admitted while free KV blocks and rows allow; when a step would run out of
blocks, the most recently admitted sentence is preempted (its blocks freed, the sentence requeued
from scratch). The search is deterministic, so a restarted sentence ends exactly as it would have.

Out of GPU memory in a step: every running sentence is requeued, the rows a step may have are
halved, and decoding carries on; only when a single sentence does not fit does the error reach
the caller.

Adapters: a request naming a LoRA adapter takes a reference on its slot in the LoRA pool at
admission (promoting it from disk if needed) and gives it back when it finishes or is preempted;
when every slot is held, it waits. Its rows carry the slot, so one batch mixes adapters.
"""

from __future__ import annotations

import atexit
import functools
import gc
import itertools
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

import torch

from dragoman import kernels
from dragoman.engine.batched_search import search_step
from dragoman.engine.cuda_graphs import AdmissionGraphs, DecodeGraphs, EncoderGraphs, bucket_for
from dragoman.engine.decoding import BLOCKED, DecodingOptions, bans_only_eos
from dragoman.engine.device import sum_in_float32, to_device, to_device_many, tokens_to_device
from dragoman.engine.kv_cache import OutOfBlocks, PagedKVCache, Sequence
from dragoman.engine.lora import DEFAULT_SLOTS, AdapterError, LoraPool, LoraRows
from dragoman.engine.model import FOLD_MAX_ROWS, FoldedSources, NllbModel
from dragoman.engine.rows import DecoderRows


@dataclass
class Request:
    """One sentence to translate. `prefix` is the decoder start: `</s>` then the target language code."""

    src_ids: list[int]
    prefix: list[int]
    options: DecodingOptions
    priority: int = 1  # lower runs first: 0 for typed text, 1 for documents
    on_partial: Callable[[list[int]], None] | None = None
    adapter: str | None = None  # a LoRA adapter of the pool's folder; None: the active one (the base model by default)
    on_done: Callable[[Request], None] | None = None  # called with the request once its result is set
    # This sentence's own max_length (HF's: `</s>`, the language code and the tokens), where it is
    # below the options': sentences of one batch may stop at different lengths and still share a search.
    max_length: int | None = None
    result: list[int] | None = None
    error: str | None = None  # why it did not run (an unusable adapter; a request `feed` gave too long): no result

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


@dataclass
class SequenceState:
    """Rows decoding one sentence in lockstep: its beams, or one row (greedy, the contract's primitives).

    Its rows write into self-attention blocks it owns; `cached` counts each row's positions in the cache.
    """

    rows: list[int]
    cross_kv: Sequence = field(default_factory=Sequence)
    adapter_slot: int = -1  # its LoRA slot, -1 for the base model
    blocks: list[int] = field(default_factory=list)
    cached: int = 0


@dataclass(eq=False)  # one admission of a request, compared by identity (as a dict key too)
class Running:
    request: Request
    seq: SequenceState
    length: int  # tokens in each of its hypotheses
    order: int  # admission order: the youngest is preempted first
    live: bool = True  # false once it has left (finished, preempted or stopped)


@dataclass
class LaunchedStep:
    """A step queued on the device: the sentences it advanced and, once the device has run it, which
    of them are done and the current best hypothesis of those that stream partial results."""

    sentences: list[Running]
    lengths: list[int]  # their hypotheses' lengths after the step
    # The step's report (kernels.step_report), host memory the device fills: done (S,) bool, and best
    # (S, >= max(lengths)) int64 with best_lengths (S,) int32, the best hypotheses of the sentences
    # it finished (their results) and, if any sentence is in `partial`, of all.
    done: torch.Tensor
    best: torch.Tensor
    best_lengths: torch.Tensor
    partial: list[int]  # the sentences that stream partial results, as indices into `sentences`
    ready: torch.cuda.Event | None  # recorded after the step; None on the CPU


class Group:
    """Running sentences that share decoding options: their searches advance as one."""

    def __init__(self, options: DecodingOptions):
        self.options = options
        self.sentences: dict[Running, None] = {}  # in admission order; removal without a walk
        self._rows: torch.Tensor | None = None

    def rows(self, device: torch.device) -> torch.Tensor:
        """(S, num_beams) row ids, sentence by sentence: the order of the group's rows in a step."""
        if self._rows is None:
            # From a flat list (torch.tensor of 2,048 one-row lists took ~1.1 ms of host, and with
            # sentences of natural lengths the group changes at nearly every step).
            [flat] = to_device_many([[row for item in self.sentences for row in item.seq.rows]], device)  # (S * B,)
            self.set_rows(flat)
        return self._rows

    def set_rows(self, rows: torch.Tensor) -> None:
        """`rows()` as on the device already (S * num_beams,) (any integer dtype)."""
        self._rows = rows.view(len(self.sentences), -1).long()  # (S * B,) -> (S, B); a copy, its own memory

    def add(self, item: Running) -> None:
        self.sentences[item] = None
        self._rows = None

    def remove(self, item: Running) -> None:
        del self.sentences[item]
        self._rows = None


BLOCK_SIZE = 16
ADMIT_SHARE = 0.25  # see "Documents join in bulk" above; measured in docs/performance.md
ADMISSION_GRAPH_ROWS = 16  # a sentence admitted alone with at most this many beams sets its rows up by a graph
log = logging.getLogger(__name__)


def queue_by_priority(waiting: deque[Request], request: Request) -> None:
    """Queue `request` behind the waiting requests of its priority or a more urgent one, ahead of
    the others: typed text fed while a document waits goes first."""
    if not waiting or waiting[-1].priority <= request.priority:
        waiting.append(request)  # the usual case, without a walk over the queue
        return
    at = next(i for i, other in enumerate(waiting) if other.priority > request.priority)
    waiting.insert(at, request)


def freeze_heap() -> None:
    """Keep the garbage collector off every object alive now (torch's, triton's, the model's), which
    stay as long as the engine does (`gc.freeze`). Why: a full collection walks every tracked object
    (~220k once torch is imported: ~80-95 ms here), and one fell inside a run every few document
    runs; on the H200 the GPU sat idle through it (600M greedy over a 512-sentence document: 2,950
    sent/s in that run against ~5,600 in the others). Frozen, a full collection walks only newer
    objects (0.2-0.3 ms). Teardown unfreezes them, as does the interpreter's exit."""
    gc.freeze()


atexit.register(gc.unfreeze)  # so that shutdown collects what was frozen (triton's bindings report leaks otherwise)


# What the engine takes of a GPU's memory beyond the model's weights, unless told otherwise (the
# app's setting "GPU memory for translation"): enough for an 8 GB card beside the display.
DEFAULT_GPU_MEMORY = 2 << 30
GPU_ROWS = 2048  # the most rows a step may have on a GPU
CPU_CACHE_TOKENS = 4096  # a few sentences with 4 beams at full length; the scheduler preempts beyond that
CPU_ROWS = 32


@dataclass(frozen=True)
class MemoryPlan:
    """How much a generator takes: rows a step may have, and tokens of the self-attention cache (the
    source cache holds a quarter of that, at least 2,048)."""

    rows: int
    cache_tokens: int

    def cache_bytes(self, bytes_per_token: int) -> int:
        return (self.cache_tokens + max(self.cache_tokens // 4, 2048)) * bytes_per_token


def plan_memory(budget: int, bytes_per_token: int, logits_per_row: int, max_positions: int,
                free: int | None = None) -> MemoryPlan:
    """Rows and cache tokens within `budget` bytes (and half the `free` memory, where given): the
    steps' logits (`logits_per_row` bytes a row) take at most a quarter, the caches what is left,
    never more than the rows can fill at `max_positions` tokens each. Rows come in a power of two
    (the graphs' largest bucket), and each bucket's graph keeps logits of its own: those of the
    smaller buckets add up to as many again. The scheduler admits what the blocks allow and
    preempts beyond that, so a smaller budget costs speed on long documents, not translations."""
    if free is not None:
        budget = min(budget, free // 2)
    rows = max(1, min(GPU_ROWS, budget // 4 // (2 * logits_per_row)))
    rows = 1 << rows.bit_length() - 1
    cache = budget - 2 * rows * logits_per_row
    tokens = min(cache * 4 // (5 * bytes_per_token), rows * max_positions)
    return MemoryPlan(rows, max(tokens, 4 * BLOCK_SIZE))


class Generator:
    @classmethod
    def build(
        cls,
        model: NllbModel,
        max_rows: int | None = None,
        cache_tokens: int | None = None,
        graphs: bool | None = None,
        adapters_dir: str | None = None,
        adapter_slots: int | None = None,
        fold_sources: bool | None = None,
        gpu_memory: int | None = None,
    ) -> "Generator":
        """A generator with caches sized for the model's device: on a GPU `gpu_memory` bytes
        (default DEFAULT_GPU_MEMORY) of rows and caches (`plan_memory`), a few MB on the CPU;
        `max_rows` and `cache_tokens` override the plan.

        `graphs` (default: on CUDA) runs decoder steps through DecodeGraphs; on the CPU that path
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
            plan = MemoryPlan(CPU_ROWS, CPU_CACHE_TOKENS)
        tokens = cache_tokens or plan.cache_tokens

        def cache(tokens: int) -> PagedKVCache:
            blocks = -(-tokens // BLOCK_SIZE)
            return PagedKVCache(c.decoder_layers, blocks, BLOCK_SIZE, c.decoder_heads, c.head_dim, dtype, device)

        rows = max_rows or plan.rows
        generator = cls(model, cache(tokens), cache(max(tokens // 4, 2048)), rows)
        generator.lora = LoraPool(c, adapter_slots or DEFAULT_SLOTS, device, dtype, adapters_dir)
        generator.folded = folded
        if graphed:
            generator.graphs = DecodeGraphs(rows, generator.rows.scratch, device, generator.lora)
            # A sentence's inputs: per row 10 ints, its prefix and its source's block list, each at most max_positions.
            per_row = 10 + model.max_positions + -(-model.max_positions // BLOCK_SIZE)
            generator.admission_graphs = AdmissionGraphs(generator.lora, device, ADMISSION_GRAPH_ROWS * per_row)
            if device.type == "cuda" and model.attends_packed():
                generator.encoder_graphs = EncoderGraphs(
                    model, generator.cross_cache, generator.lora, generator.scratch_cross_slot, folded
                )
        freeze_heap()
        return generator

    def __init__(self, model: NllbModel, self_cache: PagedKVCache, cross_cache: PagedKVCache, max_rows: int):
        assert self_cache.block_size == cross_cache.block_size, "admission sets up both caches' slots with one size"
        self.model = model
        self.self_cache = self_cache
        self.cross_cache = cross_cache
        self.max_rows = max_rows  # rows admitted at once; at most the capacity of `rows`
        self.admit_share = ADMIT_SHARE  # of max_rows free before waiting documents join running sentences
        self.rows = DecoderRows(max_rows, model.max_positions, model.max_positions, model.device)
        self.eos_id = model.config.eos_id
        self.pad_id = model.config.pad_id
        self.graphs: DecodeGraphs | None = None
        self.encoder_graphs: EncoderGraphs | None = None
        self.admission_graphs: AdmissionGraphs | None = None
        # A lone short sentence's source folded into the cross-attention (`_fold_slots`), and that sentence.
        self.folded: FoldedSources | None = None
        self._folded_item: Running | None = None
        self.lora = LoraPool(model.config, DEFAULT_SLOTS, model.device, model.dtype)
        self._admissions = itertools.count()
        # Host memory the steps report into (`_report_memory`), by graph key, or for steps that are not
        # one graph by ("eager", bucket, parity).
        self._reports: dict[tuple, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}
        self._finished: list[Request] = []  # finished requests whose `on_done` has yet to run
        self._parity = 0
        self.scratch_cross_slot = self._prepare_scratch_row()
        # On the GPU steps are pipelined: the host queues step t + 1 before it reads which sentences
        # step t finished, so the device never waits for the host. On the CPU a step has run by the
        # time it is launched, so there is nothing to overlap: it is finished at once (no step is
        # spent on sentences already done, and results come a step sooner). Tests turn it on to run
        # the GPU's order on the CPU.
        self.pipelined = model.device.type == "cuda"

    def sentences_at_once(self, num_beams: int) -> int:
        """How many sentences of `num_beams` beams decode together (a wave): max_rows // num_beams,
        at least one."""
        return max(1, self.max_rows // num_beams)

    def _prepare_scratch_row(self) -> int:
        """The scratch row (a captured step's padding, and every row of a sentence sitting a step
        out, with or without graphs) writes into a block no sequence owns and reads one slot of
        another, the source cache's scratch slot, which it returns (padding sources write there)."""
        scratch = self.rows.scratch
        self.rows.write_block[scratch] = self.self_cache.reserve_scratch_block()
        cross_slot = self.cross_cache.reserve_scratch_block() * self.cross_cache.block_size
        self.rows.cross_slots[scratch, 0] = cross_slot
        self.rows.cross_len[scratch] = 1
        return cross_slot

    # -- the contract's primitives -------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        return self.model.config.vocab_size

    def supports_beam(self) -> bool:
        return True

    def num_free_blocks(self) -> int:
        return self.self_cache.num_free_blocks()

    def num_total_blocks(self) -> int:
        return self.self_cache.num_total_blocks()

    def kv_block_size(self) -> int:
        return self.self_cache.block_size

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
        del self.model, self.self_cache, self.cross_cache, self.graphs, self.encoder_graphs, self.admission_graphs
        del self.lora, self.rows
        self.folded = self._folded_item = None
        self._reports.clear()
        gc.unfreeze()  # weights held only by reference cycles are freed by a collection, which frozen objects escape
        gc.collect()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            torch.cuda.empty_cache()

    def alloc_sequence(self) -> SequenceState:
        """One decoder row; `prefill` gives it a source, `decode`/`decode_batch` feed it tokens."""
        seq = SequenceState(self.rows.take_rows(1))
        rows = to_device(seq.rows, self.model.device)
        self.rows.kv_len.index_fill_(0, rows, 0)
        self.rows.finished.index_fill_(0, rows, False)
        self.rows.prior_offset.index_fill_(0, rows, 0)  # a sentence preempted before its first step leaves one
        return seq

    def free_sequence(self, seq: SequenceState, with_source: bool = True) -> None:
        self.self_cache.give_back(seq.blocks)
        self.rows.give_back(seq.rows)
        seq.blocks, seq.rows, seq.cached = [], [], 0
        if with_source:
            self.cross_cache.free_sequence(seq.cross_kv)

    def encode_sources(
        self, sources: list[list[int]], adapter_slots: list[int] | None = None, fold: int = 0
    ) -> list[Sequence]:
        """Run the encoder once over the sources and store every decoder layer's cross K/V for each.

        Source i is encoded with the LoRA adapter in `adapter_slots[i]` (-1 or no list: the base model).
        `fold` > 0: the one source's K/V are also folded into `self.folded` at S = fold (`_fold_slots`).
        """
        device = self.model.device
        lengths = [len(s) for s in sources]
        needed = sum(self.cross_cache.blocks_for(n) for n in lengths)
        if needed > self.cross_cache.num_free_blocks():
            raise OutOfBlocks(f"source cache full: {needed} blocks needed, {self.cross_cache.num_free_blocks()} free")
        if self.encoder_graphs is not None and len(sources) == 1 and self.encoder_graphs.fits(lengths[0]):
            seq = Sequence()  # a typed sentence: one graph replay
            self.cross_cache.extend(seq, lengths[0])
            adapter_slot = adapter_slots[0] if adapter_slots is not None else -1
            self.encoder_graphs.run(sources[0], self.cross_cache.slot_list(seq), adapter_slot, fold)
            return [seq]
        # Per token work stays off the host: a document's admission packs tens of thousands of tokens.
        tokens = tokens_to_device(sources, device)  # (T,)
        self.model.ensure_positions(max(lengths) + self.pad_id)
        lora = None
        if adapter_slots is not None and max(adapter_slots) >= 0:
            per_source = to_device(adapter_slots, device, torch.int32)
            lora = LoraRows(self.lora, per_source.repeat_interleave(to_device(lengths, device), output_size=sum(lengths)))  # (T,)
        packed = self.model.encode(tokens, lengths, lora)  # (T, C), sources one after another
        cross = [Sequence() for _ in sources]
        for seq, n in zip(cross, lengths):
            self.cross_cache.extend(seq, n)
        kv = self.model.write_cross_kv(packed, self.cross_cache, self.cross_cache.slots_of(cross, device), lora)
        if fold:  # kv (T, L, 2, H, D) of the one source
            self.folded.fold(kv[:, :, 0].transpose(0, 1), kv[:, :, 1].transpose(0, 1),
                             to_device(lengths, device, torch.int32), fold)
        return cross

    def prefill(self, src_ids: list[int], prefix: list[int], seq: SequenceState) -> torch.Tensor:
        """Encode one source and feed the decoder prefix; returns the logits after the prefix (1, V)."""
        [seq.cross_kv] = self.encode_sources([src_ids], [seq.adapter_slot])
        self._attach_sources([seq])
        logits = None
        for token in prefix:
            logits = self.decode_batch([token], [seq])
        return logits

    def decode(self, token: int, seq: SequenceState) -> torch.Tensor:
        return self.decode_batch([token], [seq])

    def decode_batch(self, tokens: list[int], seqs: list[SequenceState]) -> torch.Tensor:
        """One token for each single-row sequence -> logits (N, V); row i belongs to seqs[i]."""
        device = self.model.device
        self._grow(seqs)
        rows = to_device([s.rows[0] for s in seqs], device)
        positions = to_device([s.cached for s in seqs], device)
        self.rows.hyp[rows, positions] = to_device(tokens, device)
        self.rows.adapter[rows] = to_device([s.adapter_slot for s in seqs], device, torch.int32)
        _, logits = self._run(rows, any(s.adapter_slot >= 0 for s in seqs), with_logits=True)
        for s in seqs:
            s.cached += 1
        return logits

    @staticmethod
    def argmax_batch(logits: torch.Tensor) -> list[int]:
        return logits.argmax(dim=-1).tolist()

    # -- the decoder step ----------------------------------------------------------------------------

    def _forward(
        self, rows: torch.Tensor, with_lora: bool, with_logits: bool, group: int = 1, folded: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Feed each row (N,) the token of its hypothesis at its cache length: the rows fed (N,), with
        the scratch row for those of finished sentences, and logits (N, V) if asked. `group` > 1: the
        rows come in runs of that many beams of one sentence. `folded`: they are all the folded
        sentence's (`_fold_slots`).

        Everything here is device work on `DecoderRows`, so a CUDA graph captures it whole.
        """
        state = self.rows
        # Padding rows (all the scratch row) feed position 0 afresh each step, as do the rows of a
        # sentence the last step found done: the host learns of it one step late, and its rows must
        # not move meanwhile.
        rows, tokens, positions, write, self_lens, cross_lens, priors = kernels.step_inputs(
            rows, state.kv_len, state.write_block, state.kv_slots, state.hyp, state.cross_len, state.finished,
            state.prior_offset, state.scratch, self.self_cache.block_size,
        )  # (N,) each
        lora = LoraRows(self.lora, state.adapter[rows]) if with_lora else None
        return rows, self.model.decode_step(
            tokens=tokens,
            positions=positions,
            rows=rows,
            self_cache=self.self_cache,
            write_slots=write,
            self_slots=state.kv_slots,
            self_lens=self_lens,
            self_priors=priors,
            cross_cache=self.cross_cache,
            cross_slots=state.cross_slots,
            cross_lens=cross_lens,
            with_logits=with_logits,
            lora=lora,
            group=group,
            folded=self.folded if folded else None,
        )

    def _run(
        self, rows: torch.Tensor, with_lora: bool, with_logits: bool, group: int = 1
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The decoder step over `rows` (N,), through a graph where there is one; what `_forward`
        returns, for these rows. `group` as in `_forward`."""
        if self.graphs is None or not self.graphs.fits(rows.numel()):
            return self._forward(rows, with_lora, with_logits, group)
        if bucket_for(rows.numel()) % group:
            group = 1  # the padding would split a run

        def step(padded: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
            return self._forward(padded, with_lora, with_logits, group)

        fed, logits = self.graphs.run(rows, (with_lora, with_logits, group), step)
        n = rows.numel()
        return fed[:n], None if logits is None else logits[:n]

    def _search_in_graph(
        self, group: Group, with_lora: bool, with_best: bool
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
        """The decoder step and the group's search as one graph replay, which also stores in pinned
        host memory what the host reads of it (kernels.step_report): done (S,) bool, and the best
        hypotheses (S, T) int64 and their lengths (S,) int32 of the sentences done (their results)
        or, `with_best`, of all; valid once the step's event has passed and until the step after
        next. None when the step cannot be one graph (no graphs, score processors that need the
        host, or a beam count that does not divide the padded batch)."""
        rows = group.rows(self.model.device)  # (S, B)
        beams = group.options.num_beams
        if self.graphs is None or not self.graphs.fits(rows.numel()) or not bans_only_eos(group.options):
            return None
        size = bucket_for(rows.numel())
        if size % beams:
            return None
        # The folded sentence's steps read buffers of its S: a graph per S.
        alone = len(group.sentences) == 1 and next(iter(group.sentences)) is self._folded_item
        folded = self.folded.slots if alone else 0
        # Two graphs per step key, each reporting into memory of its own (`_report_memory`).
        key = (with_lora, group.options, with_best, self._parity, folded)
        report = self._report_memory((size, *key), size // beams)  # keyed as the graph is

        def step(padded: torch.Tensor) -> None:
            fed, logits = self._forward(padded, with_lora, with_logits=True, group=beams, folded=bool(folded))
            # Padding rows form whole sentences of the scratch row; their search writes only scratch state.
            self._search_and_report(group.options, fed.view(-1, beams), logits, self.rows.max_length, None,
                                    report, with_best)

        self.graphs.run(rows.reshape(-1), key, step)
        S = rows.shape[0]
        return tuple(t[:S] for t in report)

    def _search_and_report(
        self, options: DecodingOptions, sentences: torch.Tensor, logits: torch.Tensor, width: int,
        lengths: list[int] | None, report: tuple[torch.Tensor, torch.Tensor, torch.Tensor], with_best: bool,
    ) -> None:
        """One group's search over its rows `sentences` (S, B) as fed and their logits (S * B, V),
        then its report into `report` (`_report_memory`'s, sliced to the S sentences)."""
        state = self.rows
        done = search_step(options)(state, sentences, logits, options, self.eos_id, width, lengths)
        kernels.step_report(done, sentences, state.kv_len, state.hyp, state.fin_score, state.fin_hyp, state.fin_len,
                            *report, with_best)

    def _report_memory(self, key: tuple, sentences: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Host memory (pinned on the GPU) for the report of a step of `sentences`, by `key`: done (S,)
        bool, best hypotheses (S, max_length) int64, their lengths (S,) int32. Keys carry the step's
        parity, so a step never writes where the host may still be reading the step before."""
        if key not in self._reports:
            host = functools.partial(torch.empty, pin_memory=self.model.device.type == "cuda")
            self._reports[key] = (host(sentences, dtype=torch.bool),
                                  host((sentences, self.rows.max_length), dtype=torch.int64),
                                  host(sentences, dtype=torch.int32))
        return self._reports[key]

    def _grow(self, seqs: list[SequenceState]) -> None:
        """A new block for every row of each sequence whose rows are about to start one."""
        rows, blocks = self._take_blocks(seqs)
        if rows:
            rows_t, blocks_t = to_device_many([rows, blocks], self.model.device)
            self.rows.write_block[rows_t] = blocks_t

    def _take_blocks(self, seqs: list[SequenceState]) -> tuple[list[int], list[int]]:
        """`_grow`'s host half: takes the blocks and returns (rows, their new blocks)."""
        rows, blocks = [], []
        for seq in seqs:
            if seq.cached % self.self_cache.block_size == 0:
                new = self.self_cache.take_blocks(len(seq.rows))
                seq.blocks += new
                rows += seq.rows
                blocks += new
        return rows, blocks

    def _attach_sources(self, seqs: list[SequenceState]) -> None:
        """Point every row of each sequence at its source's cross-attention slots."""
        rows, blocks, lengths = self._source_columns(seqs)
        self._point_at_sources(*to_device_many([rows, blocks, lengths], self.model.device))

    @staticmethod
    def _source_columns(seqs: list[SequenceState]) -> tuple[list[int], list[list[int]], list[int]]:
        """Per row of the sequences, on the host: its id, its source's block list (padded to the
        widest) and its source's length."""
        widest = max(len(s.cross_kv.blocks) for s in seqs)
        rows, blocks, lengths = [], [], []
        for s in seqs:
            padded = s.cross_kv.blocks + [0] * (widest - len(s.cross_kv.blocks))
            rows += s.rows
            blocks += [padded] * len(s.rows)
            lengths += [s.cross_kv.length] * len(s.rows)
        return rows, blocks, lengths

    def _point_at_sources(self, rows: torch.Tensor, blocks: torch.Tensor, lengths: torch.Tensor) -> None:
        """Rows (R,) read the sources in `blocks` (R, W) of the given lengths (R,): all int32, on the device."""
        offsets = torch.arange(self.cross_cache.block_size, dtype=torch.int32, device=blocks.device)
        slots = self.cross_cache.slot(blocks[:, :, None], offsets).flatten(1)  # (R, W, block) -> (R, W * block)
        self.rows.cross_slots[rows, : slots.shape[1]] = slots
        self.rows.cross_len[rows] = lengths

    # -- running many sentences ----------------------------------------------------------------------

    def generate_beam_batch(self, requests: list[Request]) -> list[list[int]]:
        """Each request's winning hypothesis: `</s>`, language code, tokens, and `</s>` unless cut by max_length."""
        return [r.result for r in self.run(requests)]

    def run(
        self,
        requests: list[Request],
        should_stop: Callable[[], bool] | None = None,
        feed: Callable[[], list[Request] | None] | None = None,
    ) -> list[Request]:
        """Translate all requests to completion (each gets `.result`), admitting them as memory
        allows; returns them, and those `feed` gave, in that order.

        `feed()`, where given, is asked for more requests while the device runs a step and fewer
        than `max_rows` wait: a list (maybe empty; each queues behind the waiting ones of its
        priority, ahead of less urgent ones: `queue_by_priority`), or None once it has
        no more. So the caller prepares a document's later sentences (tokenizes them) in the host's
        idle time instead of between calls while the device waits. Each request's `on_done` runs
        likewise while the device works, once its result is set."""
        for request in requests:
            self._check_lengths(request)
        everything = list(requests)
        waiting = deque(sorted(requests, key=lambda r: r.priority))
        running: list[Running] = []
        groups: dict[DecodingOptions, Group] = {}
        # Pipelined (`self.pipelined`), the host learns which sentences a step finished while the
        # device runs the next one; sentences found done sit that next step out.
        pending: LaunchedStep | None = None
        self._finished = []  # none of a run that raised

        def pull(report: bool = True) -> None:
            """Report finished requests (`on_done`), and take what `feed` has while few wait."""
            nonlocal feed
            if report:
                self._report_finished()
            if feed is None or len(waiting) >= self.max_rows:
                return
            more = feed()
            if more is None:
                feed = None
                return
            for request in more:
                try:
                    self._check_lengths(request)
                except ValueError as e:  # raising here would leave the running sentences behind
                    request.error = str(e)
                    continue
                queue_by_priority(waiting, request)
            everything.extend(more)

        try:
            while waiting or running or feed is not None or self._finished:
                if should_stop is not None and should_stop():
                    self._release_running(running)
                    self._report_finished()
                    return everything
                if not running:
                    pull(report=False)  # the device is idle: what is finished is reported once it works again
                try:
                    self._admit(waiting, running, groups)
                    if not running:
                        self._report_finished()
                        continue  # nothing left, or every waiting request failed (an unusable adapter)
                    self._make_room(waiting, running, groups)
                    # Sentences at their length limit are done whatever the step finds: when the pending
                    # step ends them all, another step would only keep the device busy.
                    if pending is None or any(item.length < item.request.limit for item in running):
                        launched = self._launch(groups)
                    else:
                        launched = None
                except torch.cuda.OutOfMemoryError as e:
                    self._shrink(waiting, running, groups, e)
                    pending = None  # its sentences were requeued
                    continue
                if self.pipelined:  # `launched` runs while the host finishes the step before it
                    finishing, pending = [pending], launched
                    pull()
                else:
                    finishing, pending = [pending, launched], None
                left = [item for step in finishing if step is not None for item in self._finish(step)]
                for item in left:
                    self._leave(item, groups)
                if left:  # one pass, not a list removal per sentence
                    running[:] = [item for item in running if item.live]
                if not self.pipelined:
                    pull()
        except BaseException:
            # An error from the caller's feed or on_done (a full disk under the translation cache),
            # or any other, ends the run: the sentences still decoding give their rows and blocks
            # back, or the engine would keep them for good.
            self._release_running(running)
            raise
        return everything

    def _report_finished(self) -> None:
        finished, self._finished = self._finished, []
        for request in finished:
            request.on_done(request)

    def _shrink(
        self, waiting: deque[Request], running: list[Running], groups: dict[DecodingOptions, Group], error: Exception
    ) -> None:
        """Out of GPU memory mid-step: requeue every running sentence (a restart gives the same
        result), halve the rows a step may have, free what the allocator holds, and carry on."""
        beams = [item.request.options.num_beams for item in running]
        beams += [request.options.num_beams for request in itertools.islice(waiting, 1)]  # one that failed to start
        if self.max_rows <= max(beams, default=1):
            raise error  # not even one sentence fits: nothing left to shrink
        for item in sorted(running, key=lambda item: item.order, reverse=True):
            self._leave(item, groups)
            waiting.appendleft(item.request)
        running.clear()
        self.max_rows //= 2
        log.warning("out of GPU memory; decoding at most %d rows per step from now on (%s)", self.max_rows, error)
        if self.graphs is not None:  # graphs of buckets that can no longer run hold memory
            self.graphs.drop_larger_than(self.max_rows)
        if self.model.device.type == "cuda":
            torch.cuda.empty_cache()

    def _check_lengths(self, request: Request) -> None:
        limit = self.model.max_positions
        if len(request.src_ids) > limit:
            raise ValueError(f"a source of {len(request.src_ids)} tokens is longer than the {limit} the model reads")
        if request.options.length > limit:
            raise ValueError(f"max_length {request.options.length} is more than the model's {limit} positions")
        if request.max_length is not None and request.max_length < 2:
            raise ValueError(f"max length must be at least 2 (the start token and the language code), got {request.max_length}")

    def _worth_admitting(self, waiting: deque[Request], running: list[Running], rows: int) -> bool:
        """Whether waiting sentences should join the running ones, `rows` rows taken now: with none
        running, and for typed text, always; documents once `admit_share` of the rows is free, or
        all that wait fit. (Taken rows with none running are a caller's, held through alloc_sequence.)"""
        if not running or waiting[0].priority == 0:
            return True
        free = self.max_rows - rows
        if free >= self.admit_share * self.max_rows:
            return True
        wanted = 0
        for request in waiting:
            wanted += request.options.num_beams
            if wanted > free:
                return False
        return True

    def _admit(self, waiting: deque[Request], running: list[Running], groups: dict[DecodingOptions, Group]) -> None:
        # The rows taken, without a walk over the running sentences (theirs, and any a caller holds
        # through alloc_sequence, which are taken all the same).
        rows = self.rows.capacity - self.rows.num_free_rows()
        if not waiting or not self._worth_admitting(waiting, running, rows):
            return
        admitted: list[tuple[Request, int]] = []
        free_self = self.self_cache.num_free_blocks() - rows  # one block of headroom per live row
        free_cross = self.cross_cache.num_free_blocks()
        while waiting:
            request = waiting[0]
            beams = request.options.num_beams
            cross_blocks = self.cross_cache.blocks_for(len(request.src_ids))
            if admitted or running:
                if rows + beams > self.max_rows or free_self < 2 * beams or free_cross < cross_blocks:
                    break
            elif beams > self.max_rows:
                raise OutOfBlocks(f"{beams} beams are more than the {self.max_rows} rows a step may have")
            elif cross_blocks > self.cross_cache.num_total_blocks() or beams > self.self_cache.num_total_blocks():
                raise OutOfBlocks(f"a sentence of {len(request.src_ids)} source tokens does not fit the KV cache")
            try:
                adapter_slot = self._acquire_adapter(request)
            except AdapterError as e:
                waiting.popleft()
                request.error = str(e)
                continue
            if adapter_slot is None:
                break  # every adapter slot is held by running sentences: wait for one to finish
            waiting.popleft()
            admitted.append((request, adapter_slot))
            rows += beams
            free_self -= 2 * beams
            free_cross -= cross_blocks
        if not admitted:
            return
        fold = self._fold_slots(admitted, running)
        try:
            crosses = self.encode_sources([r.src_ids for r, _ in admitted], [slot for _, slot in admitted], fold)
        except torch.cuda.OutOfMemoryError:
            for request, adapter_slot in reversed(admitted):  # back in the queue, as they were
                self.lora.release_adapter_slot(adapter_slot)
                waiting.appendleft(request)
            raise
        items = []
        for (request, adapter_slot), cross in zip(admitted, crosses):
            seq = SequenceState(self.rows.take_rows(request.options.num_beams), cross, adapter_slot)
            item = Running(request, seq, len(request.prefix), next(self._admissions))
            if item.length >= request.limit:  # max_length leaves no room to generate
                request.result = list(request.prefix)
                if request.on_done is not None:
                    self._finished.append(request)
                self._release(item)
            else:
                items.append(item)
        if items:
            try:
                rows_t = self._start(items)
            except torch.cuda.OutOfMemoryError:
                for item in reversed(items):
                    self._release(item)
                    waiting.appendleft(item.request)
                raise
            for item in items:
                running.append(item)
                options = item.request.search_options
                groups.setdefault(options, Group(options)).add(item)
            alone = groups[items[0].request.search_options]
            if len(items) == 1 and len(alone.sentences) == 1:
                alone.set_rows(rows_t)  # a sentence alone: no second copy of its rows
            if fold:
                self._folded_item = items[0]

    def _start(self, items: list[Running]) -> torch.Tensor:
        """Set up the new sentences' rows and feed their decoder prefixes but the last token; returns
        their rows (R,) int32 on the device, sentence by sentence.

        A sentence of several beams whose prefix is `</s>` and the language code feeds nothing here:
        its beam 1 feeds `</s>` in the sentence's first step (engine/rows.py). What each row needs is
        gathered on the host and goes to the device in one copy (each copy costs the host ~70 us on
        the H200 machine; this made ~11)."""
        device, state = self.model.device, self.rows
        seqs = [item.seq for item in items]
        widest = max(len(item.request.prefix) for item in items)
        rows, source_blocks, source_lengths = self._source_columns(seqs)
        # Each row's first block, for the sentences that feed position 0 here or in their first step.
        with_start = [s for item, s in zip(items, seqs) if len(item.request.prefix) > 1]
        first_block = dict(zip(*self._take_blocks(with_start)))
        first_blocks = [first_block.get(r, -1) for r in rows]
        # Beam 1's candidates stay out of the first search only while beam 0 alone has the 2B + 1 it
        # keeps: any real vocabulary.
        opening = [len(item.request.prefix) == 2 and 1 < len(s.rows) and 2 * len(s.rows) + 1 < self.vocab_size
                   for item, s in zip(items, seqs)]
        prefixes, beams, adapters, prior_offsets, limits = [], [], [], [], []
        for item, s, opens in zip(items, seqs, opening):
            prefixes += [item.request.prefix + [self.pad_id] * (widest - len(item.request.prefix))] * len(s.rows)
            beams += range(len(s.rows))
            adapters += [s.adapter_slot] * len(s.rows)
            limits += [item.request.limit] * len(s.rows)
            prior_offsets += [1 - b if opens and b != 1 else 0 for b in range(len(s.rows))]  # to beam 1's place
        # The sentences fed here: the first row of each feeds all but the last token of its prefix.
        fed = [(item, s) for item, s, opens in zip(items, seqs, opening) if not opens]
        leads = [s.rows[0] for _, s in fed]
        others = [r for _, s in fed for r in s.rows[1:]]
        others_leads = [s.rows[0] for _, s in fed for _ in s.rows[1:]]
        lists = [rows, prefixes, beams, adapters, first_blocks, prior_offsets, source_blocks, source_lengths, limits, leads,
                 others, others_leads]

        def set_up(*inputs: torch.Tensor) -> None:
            # One launch: as ~16 tensor ops the host took longer than a typed sentence's encoder.
            kernels.admit_rows(
                *inputs[:9], state.hyp, state.kv_len, state.kv_slots, state.finished, state.score, state.fin_score,
                state.improvable, state.adapter, state.write_block, state.prior_offset, state.cross_slots,
                state.cross_len, state.limit, self.self_cache.block_size, BLOCKED,
            )

        if self.admission_graphs is not None and len(items) == 1 and len(rows) <= ADMISSION_GRAPH_ROWS:
            inputs = self.admission_graphs.run(lists, set_up)  # a typed sentence
        else:
            inputs = to_device_many(lists, device)
            set_up(*inputs)
        rows_t, leads_t, others_t, others_leads_t = inputs[0], *inputs[9:]
        leads_t = leads_t.long()  # the step takes int64 rows
        with_lora = any(s.adapter_slot >= 0 for _, s in fed)
        for position in range(widest - 1):
            feeding = [s for item, s in fed if position < len(item.request.prefix) - 1]
            if not feeding:
                break
            if position > 0:  # (blocks for position 0 were taken above)
                self._grow(feeding)
            if len(feeding) == len(fed):
                self._run(leads_t, with_lora, with_logits=False)
            else:
                self._run(to_device([s.rows[0] for s in feeding], device), with_lora, with_logits=False)
            for s in feeding:
                s.cached += 1
        if others:  # the other beams take over the first row's slots
            state.kv_slots[others_t] = state.kv_slots[others_leads_t]
            state.kv_len[others_t] = state.kv_len[others_leads_t]
        for s, opens in zip(seqs, opening):
            if opens:
                s.cached = 1  # as the host counts blocks: `</s>` is in its first blocks' slots already
        return rows_t

    def _fold_slots(self, admitted: list[tuple[Request, int]], running: list[Running]) -> int:
        """The S at which to fold the source of the sentences admitted, (request, adapter slot) each,
        into the cross-attention (FoldedSources), 0 for none: only for one sentence that runs alone
        (nothing `running` already; its steps read the fold while it is alone, `_search_in_graph`),
        with a short source, the base model, and few enough rows for one tile of the scores kernel."""
        if self.folded is None or running or len(admitted) != 1:
            return 0
        request, adapter_slot = admitted[0]
        if adapter_slot >= 0 or bucket_for(request.options.num_beams) > FOLD_MAX_ROWS:
            return 0
        return FoldedSources.slots_for(len(request.src_ids))

    def _acquire_adapter(self, request: Request) -> int | None:
        """A reference on the slot of the request's adapter (-1 for the base model), promoting it
        from disk if needed; None when no slot can be had now."""
        name = request.adapter if request.adapter is not None else self.lora.active
        if name is None:
            return -1
        slot = self.lora.slot_for(name)
        return None if slot is None else self.lora.acquire_adapter_slot(slot)

    def _blocks_needed(self, running: list[Running]) -> int:
        block_size = self.self_cache.block_size
        return sum(len(item.seq.rows) for item in running if item.seq.cached % block_size == 0)

    def _make_room(self, waiting: deque[Request], running: list[Running], groups: dict[DecodingOptions, Group]) -> None:
        while running and self._blocks_needed(running) > self.self_cache.num_free_blocks():
            if len(running) == 1:
                raise OutOfBlocks(
                    f"the KV cache ({self.self_cache.num_total_blocks()} blocks) is too small for one sentence"
                )
            victim = max(running, key=lambda item: item.order)
            running.remove(victim)
            self._leave(victim, groups)
            waiting.appendleft(victim.request)

    def _leave(self, item: Running, groups: dict[DecodingOptions, Group]) -> None:
        options = item.request.search_options
        group = groups[options]
        group.remove(item)
        if not group.sentences:
            del groups[options]
        self._release(item)

    def _release_running(self, running: list[Running]) -> None:
        """A run that ends early (stopped, or an error) gives back the rows of its running sentences."""
        for item in running:
            if item.live:
                self._release(item)

    def _release(self, item: Running) -> None:
        item.live = False
        if item is self._folded_item:
            self._folded_item = None
        self.free_sequence(item.seq)
        self.lora.release_adapter_slot(item.seq.adapter_slot)
        item.seq.adapter_slot = -1

    def _launch(self, groups: dict[DecodingOptions, Group]) -> LaunchedStep:
        """Queue one step: feed every live row one token and advance every group's search."""
        live = list(groups.values())
        sentences = [item for group in live for item in group.sentences]
        self._grow([item.seq for item in sentences])
        with_lora = any(item.seq.adapter_slot >= 0 for item in sentences)
        partial = [i for i, item in enumerate(sentences) if item.request.on_partial is not None]
        # The host reads a step's report while the next step runs, and queues the one after only once
        # it has read it: steps report into two sets of memory in turn.
        self._parity ^= 1
        reported = self._search_in_graph(live[0], with_lora, bool(partial)) if len(live) == 1 else None
        if reported is None:
            reported = self._search_eagerly(live, with_lora, bool(partial))
        for item in sentences:
            item.seq.cached += 1
            item.length += 1
        ready = None
        if self.model.device.type == "cuda":
            ready = torch.cuda.Event()
            ready.record()
        return LaunchedStep(sentences, [item.length for item in sentences], *reported, partial, ready)

    def _finish(self, step: LaunchedStep) -> list[Running]:
        """Wait for a launched step; report its finished sentences' results and the partial results
        of the others; returns the finished ones."""
        if step.ready is not None:
            step.ready.synchronize()
        done = step.done.tolist()
        finished = [i for i, item in enumerate(step.sentences) if done[i] and item.live]
        if not finished and not step.partial:
            return []
        # The step reported the finished sentences' results and, if any streams them, every one's
        # best hypothesis: one conversion of the rows needed (all of a 2,048-sentence step's took
        # ~10 ms of host, and with sentences of natural lengths some finish at nearly every step).
        lengths = step.best_lengths.tolist()
        width = max([lengths[i] for i in finished] + [step.lengths[i] for i in step.partial])
        needed = sorted(set(finished).union(step.partial))
        table = dict(zip(needed, step.best[needed, :width].tolist()))  # sentence -> its (width,) row
        for i in finished:
            request = step.sentences[i].request
            request.result = table[i][: lengths[i]]
            if request.on_done is not None:
                self._finished.append(request)  # reported while the device runs the next step (`run`)
        for i in step.partial:
            item = step.sentences[i]
            if item.live and item.request.result is None:
                item.request.on_partial(table[i][: step.lengths[i]])
        return [step.sentences[i] for i in finished]

    def _search_eagerly(
        self, live: list[Group], with_lora: bool, with_best: bool
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One decoder step over every group's rows, then each group's search and report: what
        `_search_in_graph` returns, for the groups' sentences in order."""
        device = self.model.device
        group_rows = [group.rows(device) for group in live]  # (S, B) each
        beams = live[0].options.num_beams if len(live) == 1 else 1  # the rows' runs of one sentence each
        step_rows = torch.cat([rows.reshape(-1) for rows in group_rows])  # (N,)
        fed, logits = self._run(step_rows, with_lora, with_logits=True, group=beams)  # (N,), (N, V)
        S = sum(rows.shape[0] for rows in group_rows)
        report = self._report_memory(("eager", bucket_for(S), self._parity), bucket_for(S))
        first_row = first_sentence = 0
        for group, rows in zip(live, group_rows):
            lengths = [item.length for item in group.sentences]
            n, s = rows.numel(), rows.shape[0]
            # A sentence sitting this step out (done at the last one) counts its length one too far.
            width = min(max(lengths) + 1, self.rows.max_length)
            self._search_and_report(group.options, fed[first_row : first_row + n].view(rows.shape),  # (s, B)
                                    logits[first_row : first_row + n], width, lengths,
                                    tuple(t[first_sentence : first_sentence + s] for t in report), with_best)
            first_row, first_sentence = first_row + n, first_sentence + s
        return tuple(t[:S] for t in report)
