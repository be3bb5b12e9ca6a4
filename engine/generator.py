"""The runner: sentences join the running batch at a step boundary, decode together, leave as they finish.

Each step every live row (a beam, or the one row of a greedy sentence) feeds the first of its tokens
that is not yet in the KV cache. New sentences therefore need no separate decoder prefill: their
`</s>` and language code go through the same batched step as everyone else's next token, and only
the step that feeds a row's last known token produces scores its search uses.

Memory: sentences are admitted while free KV blocks allow; when a step would run out, the most
recently admitted sentence is preempted (its blocks freed, the sentence requeued from scratch). The
search is deterministic, so a restarted sentence ends exactly as it would have.

Adapters: a request naming a LoRA adapter takes a reference on its slot in the LoRA pool at
admission (promoting it from disk if needed) and gives it back when it finishes or is preempted;
when every slot is held, it waits. Its rows carry the slot, so one batch mixes adapters.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn.functional as F

import kernels
from engine.cuda_graphs import DecodeGraphs
from engine.decoding import NEG_INF, BeamSearch, DecodingOptions, GreedySearch, bans_only_eos, eos_banned, process_scores
from engine.kv_cache import OutOfBlocks, PagedKVCache, Sequence
from engine.lora import DEFAULT_SLOTS, AdapterError, LoraPool, LoraRows
from engine.model import NllbModel


@dataclass
class Request:
    """One sentence to translate. `prefix` is the decoder start: `</s>` then the target language code."""

    src_ids: list[int]
    prefix: list[int]
    options: DecodingOptions
    priority: int = 1  # lower runs first: 0 for typed text, 1 for documents
    on_partial: Callable[[list[int]], None] | None = None
    adapter: str | None = None  # a LoRA adapter of the pool's folder; None: the active one (the base model by default)
    result: list[int] | None = None
    error: str | None = None  # why it did not run (its adapter is unusable); result stays None


@dataclass
class SequenceState:
    """One decoder row: its self-attention blocks, and the source's cross-attention blocks (shared by beams)."""

    self_kv: Sequence = field(default_factory=Sequence)
    cross_kv: Sequence = field(default_factory=Sequence)
    adapter_slot: int = -1  # its request's LoRA slot, -1 for the base model


@dataclass
class Running:
    request: Request
    search: GreedySearch | BeamSearch
    cross_kv: Sequence
    rows: list[SequenceState]  # one per live hypothesis, in the search's order
    order: int  # admission order: the youngest is preempted first
    adapter_slot: int = -1  # the LoRA slot it holds a reference on


BLOCK_SIZE = 16


def default_cache_tokens(device: torch.device, bytes_per_token: int) -> int:
    """How many decoder tokens the self-attention cache holds (sources get a quarter of that)."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return max(4096, min(int(0.5 * free) // bytes_per_token, 1 << 20))
    return 4096  # a few sentences with 4 beams at full length; the scheduler preempts beyond that


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
    ) -> "Generator":
        """A generator with caches sized for the model's device: most of the free GPU memory, or a few MB on the CPU.

        `graphs` (default: on CUDA) runs decoder steps through DecodeGraphs; on the CPU that path
        runs eagerly, padded as on the GPU. Adapters come from `adapters_dir`, with
        `adapter_slots` of them resident at once (default 4).
        """
        c, device, dtype = model.config, model.device, model.dtype
        bytes_per_token = c.decoder_layers * 2 * c.d_model * torch.finfo(dtype).bits // 8
        tokens = cache_tokens or default_cache_tokens(device, bytes_per_token)

        def cache(tokens: int) -> PagedKVCache:
            blocks = -(-tokens // BLOCK_SIZE)
            return PagedKVCache(c.decoder_layers, blocks, BLOCK_SIZE, c.decoder_heads, c.head_dim, dtype, device)

        rows = max_rows or (2048 if device.type == "cuda" else 32)
        generator = cls(model, cache(tokens), cache(max(tokens // 4, 2048)), rows)
        generator.lora = LoraPool(c, adapter_slots or DEFAULT_SLOTS, device, dtype, adapters_dir)
        if graphs if graphs is not None else device.type == "cuda":
            generator.graphs = DecodeGraphs(model, generator.self_cache, generator.cross_cache, rows, generator.lora)
        return generator

    def __init__(self, model: NllbModel, self_cache: PagedKVCache, cross_cache: PagedKVCache, max_rows: int):
        self.model = model
        self.self_cache = self_cache
        self.cross_cache = cross_cache
        self.max_rows = max_rows
        self.eos_id = model.config.eos_id
        self.pad_id = model.config.pad_id
        self.graphs: DecodeGraphs | None = None
        self.lora = LoraPool(model.config, DEFAULT_SLOTS, model.device, model.dtype)
        self._admissions = itertools.count()

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
        del self.model, self.self_cache, self.cross_cache, self.graphs, self.lora
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            torch.cuda.empty_cache()

    def alloc_sequence(self) -> SequenceState:
        return SequenceState()

    def free_sequence(self, seq: SequenceState, with_source: bool = True) -> None:
        self.self_cache.free_sequence(seq.self_kv)
        if with_source:
            self.cross_cache.free_sequence(seq.cross_kv)

    def encode_sources(self, sources: list[list[int]], adapter_slots: list[int] | None = None) -> list[Sequence]:
        """Run the encoder once over the sources and store every decoder layer's cross K/V for each.

        Source i is encoded with the LoRA adapter in `adapter_slots[i]` (-1 or no list: the base model).
        """
        device = self.model.device
        lengths = [len(s) for s in sources]
        needed = sum(self.cross_cache.blocks_for(n) for n in lengths)
        if needed > self.cross_cache.num_free_blocks():
            raise OutOfBlocks(f"source cache full: {needed} blocks needed, {self.cross_cache.num_free_blocks()} free")
        width = max(lengths)
        tokens = torch.tensor([s + [self.pad_id] * (width - len(s)) for s in sources], device=device)  # (B, S)
        length_t = torch.tensor(lengths, device=device)
        self.model.ensure_positions(width + self.pad_id)
        token_lora = packed_lora = None
        if adapter_slots is not None and max(adapter_slots) >= 0:
            per_source = torch.tensor(adapter_slots, dtype=torch.int32, device=device)  # (B,)
            token_lora = LoraRows(self.lora, per_source.repeat_interleave(width))  # (B * S,)
            packed_lora = LoraRows(self.lora, per_source.repeat_interleave(length_t))  # (T,)
        hidden = self.model.encode(tokens, length_t, token_lora)  # (B, S, C)
        valid = torch.arange(width, device=device)[None, :] < length_t[:, None]  # (B, S)
        packed = hidden[valid]  # (T, C), sources one after another
        cross = [Sequence() for _ in sources]
        slots = [slot for seq, n in zip(cross, lengths) for slot in self.cross_cache.extend(seq, n)]
        self.model.write_cross_kv(packed, self.cross_cache, torch.tensor(slots, device=device), packed_lora)
        return cross

    def prefill(self, src_ids: list[int], prefix: list[int], seq: SequenceState) -> torch.Tensor:
        """Encode one source and feed the decoder prefix; returns the logits after the prefix (1, V)."""
        seq.cross_kv = self.encode_sources([src_ids], [seq.adapter_slot])[0]
        logits = None
        for token in prefix:
            logits = self.decode_batch([token], [seq])
        return logits

    def decode(self, token: int, seq: SequenceState) -> torch.Tensor:
        return self.decode_batch([token], [seq])

    def decode_batch(self, tokens: list[int], seqs: list[SequenceState]) -> torch.Tensor:
        """One token for each sequence -> logits (N, V); row i belongs to seqs[i]."""
        positions = [s.self_kv.length + self.pad_id + 1 for s in seqs]
        self.model.ensure_positions(max(positions))
        slots = self.self_cache.extend_each([s.self_kv for s in seqs])
        self_tables = [s.self_kv.blocks for s in seqs]
        cross_tables = [s.cross_kv.blocks for s in seqs]
        self_lens = [s.self_kv.length for s in seqs]
        cross_lens = [s.cross_kv.length for s in seqs]
        widest = (max(map(len, self_tables)), max(map(len, cross_tables)))
        adapter_slots = [s.adapter_slot for s in seqs]
        if max(adapter_slots) < 0:
            adapter_slots = None  # the base model alone: no LoRA work at all
        if self.graphs is not None and self.graphs.fits(len(seqs), *widest):
            return self.graphs.run(
                tokens, positions, slots, self_tables, self_lens, cross_tables, cross_lens, adapter_slots
            )
        device = self.model.device
        lora = None
        if adapter_slots is not None:
            lora = LoraRows(self.lora, torch.tensor(adapter_slots, dtype=torch.int32, device=device))
        return self.model.decode_step(
            tokens=torch.tensor(tokens, device=device),
            positions=torch.tensor(positions, device=device),
            self_cache=self.self_cache,
            self_slots=torch.tensor(slots, device=device),
            self_tables=self.self_cache.block_table([s.self_kv for s in seqs], device),
            self_lens=torch.tensor(self_lens, dtype=torch.int32, device=device),
            cross_cache=self.cross_cache,
            cross_tables=self.cross_cache.block_table([s.cross_kv for s in seqs], device),
            cross_lens=torch.tensor(cross_lens, dtype=torch.int32, device=device),
            lora=lora,
        )

    @staticmethod
    def argmax_batch(logits: torch.Tensor) -> list[int]:
        return logits.argmax(dim=-1).tolist()

    # -- running many sentences ----------------------------------------------------------------------

    def generate_beam_batch(self, requests: list[Request]) -> list[list[int]]:
        """Each request's winning hypothesis: `</s>`, language code, tokens, and `</s>` unless cut by max_length."""
        return [r.result for r in self.run(requests)]

    def run(self, requests: list[Request], should_stop: Callable[[], bool] | None = None) -> list[Request]:
        """Translate all requests to completion (each gets `.result`), admitting them as memory allows."""
        waiting = deque(sorted(requests, key=lambda r: r.priority))
        running: list[Running] = []
        while waiting or running:
            if should_stop is not None and should_stop():
                for item in running:
                    self._release(item)
                return requests
            self._admit(waiting, running)
            if not running:
                continue  # every waiting request failed (an unusable adapter)
            self._make_room(waiting, running)
            finished = self._step(running)
            for item in finished:
                running.remove(item)
                item.request.result = item.search.best()
                self._release(item)
        return requests

    def _admit(self, waiting: deque[Request], running: list[Running]) -> None:
        rows = sum(len(item.rows) for item in running)
        admitted: list[Request] = []
        free_self = self.self_cache.num_free_blocks() - rows  # one block of headroom per live row
        free_cross = self.cross_cache.num_free_blocks()
        adapter_slots: list[int] = []
        while waiting:
            request = waiting[0]
            grow = request.options.num_beams  # rows this sentence will reach after its first step
            cross_blocks = self.cross_cache.blocks_for(len(request.src_ids))
            if admitted or running:
                if rows + grow > self.max_rows or free_self < grow or free_cross < cross_blocks:
                    break
            elif cross_blocks > self.cross_cache.num_total_blocks():
                raise OutOfBlocks(f"a source of {len(request.src_ids)} tokens does not fit the source cache")
            try:
                adapter_slot = self._acquire_adapter(request)
            except AdapterError as e:
                waiting.popleft()
                request.error = str(e)
                continue
            if adapter_slot is None:
                break  # every adapter slot is held by running sentences: wait for one to finish
            waiting.popleft()
            admitted.append(request)
            adapter_slots.append(adapter_slot)
            rows += grow
            free_self -= grow
            free_cross -= cross_blocks
        if not admitted:
            return
        crosses = self.encode_sources([r.src_ids for r in admitted], adapter_slots)
        for request, cross, adapter_slot in zip(admitted, crosses, adapter_slots):
            search_class = BeamSearch if request.options.num_beams > 1 else GreedySearch
            search = search_class(request.prefix, request.options, self.eos_id)
            first = SequenceState(Sequence(), cross, adapter_slot)
            item = Running(request, search, cross, [first], next(self._admissions), adapter_slot)
            if search.done:  # max_length leaves no room to generate
                request.result = search.best()
                self._release(item)
            else:
                running.append(item)

    def _acquire_adapter(self, request: Request) -> int | None:
        """A reference on the slot of the request's adapter (-1 for the base model), promoting it
        from disk if needed; None when no slot can be had now."""
        name = request.adapter if request.adapter is not None else self.lora.active
        if name is None:
            return -1
        slot = self.lora.slot_for(name)
        return None if slot is None else self.lora.acquire_adapter_slot(slot)

    def _blocks_needed(self, running: list[Running]) -> int:
        needed = 0
        for item in running:
            for row in item.rows:
                seq = row.self_kv
                if seq.length % self.self_cache.block_size == 0:
                    needed += 1
                elif self.self_cache.ref_counts[seq.blocks[-1]] > 1:
                    needed += 1  # copy-on-write of a shared last block
        return needed

    def _make_room(self, waiting: deque[Request], running: list[Running]) -> None:
        while running and self._blocks_needed(running) > self.self_cache.num_free_blocks():
            if len(running) == 1:
                raise OutOfBlocks(
                    f"the KV cache ({self.self_cache.num_total_blocks()} blocks) is too small for one sentence"
                )
            victim = max(running, key=lambda item: item.order)
            running.remove(victim)
            self._release(victim)
            waiting.appendleft(victim.request)

    def _release(self, item: Running) -> None:
        for row in item.rows:
            self.self_cache.free_sequence(row.self_kv)
        item.rows = []
        self.cross_cache.free_sequence(item.cross_kv)
        self.lora.release_adapter_slot(item.adapter_slot)
        item.adapter_slot = -1

    def _step(self, running: list[Running]) -> list[Running]:
        """Feed every live row one token; advance the searches whose rows produced scores."""
        tokens, seqs, scoring = [], [], []
        for item in running:
            first = len(seqs)
            for hypothesis, row in zip(item.search.live, item.rows):
                tokens.append(hypothesis[row.self_kv.length])
                seqs.append(row)
            if item.rows[0].self_kv.length + 1 == len(item.search.live[0]):  # else still feeding its prefix
                scoring.append((item, range(first, len(seqs))))
        logits = self.decode_batch(tokens, seqs)  # (N, V)
        finished = []
        for item, survivors in self._choose(scoring, logits):
            if item.search.done:
                finished.append(item)
                continue
            item.rows = self._reorder(item, [parent for parent, _ in survivors])
            if item.request.on_partial is not None:
                item.request.on_partial(item.search.best())
        return finished

    def _reorder(self, item: Running, parents: list[int]) -> list[SequenceState]:
        """The survivors' rows: a parent's first child takes its blocks over, later children fork
        them (sharing blocks), and parents without children free theirs."""
        taken = [False] * len(item.rows)
        rows = []
        for parent in parents:
            if taken[parent]:
                rows.append(SequenceState(self.self_cache.fork(item.rows[parent].self_kv), item.cross_kv, item.adapter_slot))
            else:
                taken[parent] = True
                rows.append(item.rows[parent])
        for parent, row in enumerate(item.rows):
            if not taken[parent]:
                self.self_cache.free_sequence(row.self_kv)
        return rows

    def _choose(self, scoring: list[tuple[Running, range]], logits: torch.Tensor) -> list[tuple[Running, list]]:
        """Advance each scoring search; sentences sharing options are scored in one batch."""
        groups: dict[tuple, list[tuple[Running, range]]] = {}
        for item, rows in scoring:
            groups.setdefault((type(item.search), item.request.options), []).append((item, rows))
        results = []
        for (kind, options), members in groups.items():
            index = torch.tensor([r for _, rows in members for r in rows], device=logits.device)
            group_logits = logits.index_select(0, index)  # (R, V), the group's rows
            histories = [h for item, _ in members for h in item.search.live]
            if kind is GreedySearch:
                scores = process_scores(group_logits.float(), histories, options, self.eos_id)
                for (item, _), token in zip(members, scores.argmax(dim=-1).tolist()):
                    results.append((item, item.search.advance(token)))
                continue
            beam_scores = torch.tensor([b.score for item, _ in members for b in item.search.beams], device=logits.device)
            top_scores, top_tokens = self._beam_candidates(group_logits, histories, beam_scores, options)
            first = 0
            for item, rows in members:
                last = first + len(rows)
                results.append((item, item.search.advance(top_scores[first:last], top_tokens[first:last])))
                first = last
        return results

    def _beam_candidates(
        self, logits: torch.Tensor, histories: list[list[int]], beam_scores: torch.Tensor, options: DecodingOptions
    ) -> tuple[list[list[float]], list[list[int]]]:
        """Each row's top 2*num_beams of (processed log-prob + beam score), as host lists."""
        k = 2 * options.num_beams
        if bans_only_eos(options):
            # Fused log-softmax + top-k; one extra candidate stands in for `</s>` where it is banned.
            values, indices, _ = kernels.logsoftmax_topk(logits, k + 1)  # (R, k + 1)
            banned = torch.tensor([eos_banned(h, options) for h in histories], device=logits.device)
            values = values.masked_fill(banned[:, None] & (indices == self.eos_id), NEG_INF)
            values, order = values.topk(k, dim=-1)  # (R, k): drops the banned `</s>`, or the spare
            values = values + beam_scores[:, None]
            return values.tolist(), indices.gather(1, order).tolist()
        log_probs = process_scores(F.log_softmax(logits.float(), dim=-1), histories, options, self.eos_id)
        top_scores, top_tokens = (log_probs + beam_scores[:, None]).topk(k, dim=-1)  # (R, k)
        return top_scores.tolist(), top_tokens.tolist()
