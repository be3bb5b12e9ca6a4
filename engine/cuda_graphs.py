"""The decoder step as CUDA graphs, one per bucketed batch size.

Launching a decoder step op by op costs ~180 kernel launches from Python, far more than the GPU
work of a small batch. A graph replays them in one call. The step reads and writes only tensors
that live as long as the step runner (`DecoderRows`, the caches, the LoRA pool's slot stacks), so
its one input is the list of rows to feed: a step copies its row ids into a static buffer, pads
them to the bucket's size with the padding row, and replays. Padding rows write their K/V into a
padding block that no sentence owns and attend over one slot of another, so they cannot disturb
real rows.

A graph holds whatever step the runner hands it: the decoder step alone (with or without the
output projection: prefix feeding needs no logits), or the decoder step and the search of one
options group, so that a whole step of a document or a typed sentence is one replay. A batch of
base-model rows replays graphs captured without LoRA work. When the LoRA pool reallocates its
stacks (its `layout` changes), the graphs that read them are captured again.

On the CPU the same padded path runs eagerly: that is how CI tests the padding.

`EncoderGraphs` does the same for the admission of one short source (a typed sentence): its
encoder, the store of its cross-attention K/V and, where asked, their fold into the cross-attention
(`FoldedSources`), ~100 kernels launched from Python otherwise.
"""

from __future__ import annotations

import array
from typing import Callable

import torch

from dragoman import kernels
from dragoman.engine.device import copy_many_to_device, copy_to_device
from dragoman.engine.kv_cache import PagedKVCache
from dragoman.engine.lora_layers import LoraLayers, LoraRows
from dragoman.engine.model import FoldedSources, NllbModel

Step = Callable[[torch.Tensor], object]  # padded rows (size,) -> output: tensors, in any structure


def bucket_for(rows: int) -> int:
    """The power of two a batch of `rows` is padded to."""
    return 1 << max(0, rows - 1).bit_length()


# Above this many rows a step whose logits die inside its graph (`step_bucket_for`) pads to a
# quarter of a power of two: a .docx book's steps of 257-320 rows ran as 512, 18% longer on the
# device (docs/performance.md). A bucket's sentence count need not be a multiple of 16: Triton's
# kernels for such counts are those that steps of fewer than 16 sentences compile anyway.
FINE_BUCKETS_FROM = 64


def step_bucket_for(rows: int) -> int:
    """The size a step of `rows` is padded to where its graph keeps no logits (the decoder step and
    its search, `StepRunner._search_in_graph`): a power of two up to FINE_BUCKETS_FROM, then the
    next multiple of a quarter of the power of two below `rows` (80, 96, 112, 128, 160, ...).
    Graphs whose logits outlive them keep power-of-two buckets (`bucket_for`): each bucket's
    logits are memory of their own, which the memory plan counts for powers of two."""
    if rows <= FINE_BUCKETS_FROM:
        return bucket_for(rows)
    quarter = bucket_for(rows) // 8  # rows are over half of their power of two: a quarter of the one below
    return -(-rows // quarter) * quarter


class _GraphSet:
    """Captured graphs by key, (bucket, reads the LoRA stacks, ...), sharing one memory pool. The
    graphs that read the LoRA pool's stacks are captured again once it reallocates them."""

    def __init__(self, lora: LoraLayers, device: torch.device):
        self.lora = lora
        self.device = device
        self.capture = device.type == "cuda"
        self.graphs: dict[tuple, tuple[torch.cuda.CUDAGraph, object]] = {}
        # Keys run once eagerly with the kernels in place: their next use captures. `met` holds
        # those run at all, uncaptured ones too (a step of one may be in flight).
        self.seen: set[tuple] = set()
        self.met: set[tuple] = set()
        self.pool = torch.cuda.graph_pool_handle() if self.capture else None
        self.lora_layout = lora.layout

    def _replay(self, key: tuple, step: Callable[[], object]) -> object:
        """Replay the graph of `key` and return what its step returned when captured. The key's
        first use runs `step` eagerly: that warms up what a capture needs ready (Triton's kernels
        loaded, cuBLAS set up), and a key used once (a lone sentence's encoder, a one-line
        command's admission) is never captured, which would cost more than it saves. The second
        use captures. Once the Triton kernels have failed, or while another process compiles
        them (the references serve, and some wait for the host), `step` runs uncaptured."""
        self.met.add(key)
        if not self.capture or kernels.building():
            return step()
        if self.lora.layout != self.lora_layout:  # the adapter stacks were reallocated: recapture
            self._keep(lambda key: not key[1])
            self.lora_layout = self.lora.layout
        if key not in self.graphs:
            if key not in self.seen:
                self.seen.add(key)
                out = step()
                if kernels.triton_failed():
                    # The kernels' references run instead, and some wait for the host, which a capture
                    # forbids: from now on steps run as on the CPU.
                    self.capture = False
                return out
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self.pool):
                out = step()
            self.graphs[key] = (graph, out)
        graph, out = self.graphs[key]
        graph.replay()
        return out

    def _keep(self, wanted: Callable[[tuple], bool]) -> None:
        self.graphs = {key: value for key, value in self.graphs.items() if wanted(key)}
        if not self.graphs and self.capture:  # a pool whose graphs are all gone takes no new captures
            self.pool = torch.cuda.graph_pool_handle()


class DecodeGraphs(_GraphSet):
    def __init__(self, max_rows: int, padding_row: int, device: torch.device, lora: LoraLayers):
        super().__init__(lora, device)
        self.max_rows = bucket_for(max_rows)
        self.padding_row = padding_row
        self.rows = torch.full((self.max_rows,), padding_row, dtype=torch.int64, device=device)
        self._held: tuple[torch.Tensor, int, int] | None = None  # the rows `self.rows` holds, their version, bucket

    def fits(self, rows: int) -> bool:
        return rows <= self.max_rows

    def run(self, rows: torch.Tensor, key: tuple, step: Step, size: int | None = None) -> object:
        """`step` over the rows (N,) padded to `size` (their power-of-two bucket unless given) with
        the padding row, replayed from the graph captured for (size, *key) at its second use
        (`_replay`); returns its output for the padded batch, valid until the next run. `key[0]`
        says whether the step reads the LoRA pool's stacks."""
        n = rows.numel()
        size = size or bucket_for(n)
        padded = self.rows[:size]
        if not self._holds(rows, size):
            # A step whose rows are those of the last one copies nothing: between two graphs every
            # copy leaves the device idle.
            self.rows[:n].copy_(rows)
            self.rows[n:size].fill_(self.padding_row)
            self._held = (rows, rows._version, size)  # the reference keeps their memory from reuse
        return self._replay((size, *key), lambda: step(padded))

    def _holds(self, rows: torch.Tensor, size: int) -> bool:
        """Whether `self.rows[:size]` already holds `rows` (N,) and its padding: the same memory,
        unchanged since it was copied (tensors' version counts their in-place writes)."""
        if self._held is None:
            return False
        held, version, held_size = self._held
        return (rows.data_ptr() == held.data_ptr() and rows.shape == held.shape and rows.stride() == held.stride()
                and rows.dtype == held.dtype and rows._version == version and size == held_size)

    def drop_larger_than(self, rows: int) -> None:
        """Forget the graphs of buckets above `rows` (their memory goes back to the pool's allocator)."""
        self._keep(lambda key: key[0] <= bucket_for(rows))


class AdmissionGraphs(_GraphSet):
    """The set-up of one admitted sentence's rows (kernels.admit_rows) as CUDA graphs, one per shape of
    its inputs, which one copy puts in a static buffer. Why: between a typed sentence's encoder
    launch and its first step's, the host's work is what the GPU waits for at 600M, and Triton's
    Python launcher takes far longer than a replay (docs/performance.md)."""

    def __init__(self, lora: LoraLayers, device: torch.device, capacity: int):
        super().__init__(lora, device)  # graphs by (rows, False, the inputs' shapes)
        self.staged = torch.zeros(capacity, dtype=torch.int32, device=device)

    def run(self, lists: list[list], set_up: Callable[..., None]) -> list[torch.Tensor]:
        """Copies `lists` (as `engine.device.to_device_many` takes them) to the device in one copy and
        runs `set_up(*their views)`, replayed from the graph of their shapes; returns the views,
        valid until the next run (a later copy into the buffer is queued after what reads them)."""
        views = copy_many_to_device(self.staged, lists)
        key = (views[0].shape[0], False, tuple(v.shape for v in views))
        self._replay(key, lambda: set_up(*views))
        return views


ENCODER_BUCKET = 16  # a graph per 16 tokens of source length
ENCODER_GRAPH_MAX_TOKENS = 256  # longer sources, and several at once, are bound by the GPU, not by launches


class EncoderGraphs(_GraphSet):
    """The encoder and the store of the cross K/V of one short source, as CUDA graphs, one per bucket
    of ENCODER_BUCKET tokens: launched from Python, a typed sentence's encoder at 600M is bound by
    its ~100 launches, not by the GPU.

    A source of n tokens fills the first n places of its bucket; the other places form a second
    source of padding, which the encoder's attention keeps apart (so the bucket is always longer
    than n), and whose K/V are stored in the padding slot. Only for models whose encoder attends
    over packed sources (`NllbModel.attends_packed`).
    """

    def __init__(
        self, model: NllbModel, cross_cache: PagedKVCache, lora: LoraLayers, padding_slot: int,
        folded: FoldedSources | None = None,
    ):
        super().__init__(lora, model.device)  # graphs by (bucket, with LoRA, S of the fold)
        self.model, self.cross_cache, self.folded = model, cross_cache, folded
        self.padding_slot = padding_slot
        places = ENCODER_GRAPH_MAX_TOKENS + ENCODER_BUCKET
        # A bucket of `size` places reads its inputs from the front of one buffer, filled by one copy
        # (`_inputs`): each copy costs the host as much as a kernel's launch, and one into a strided
        # slice a kernel too.
        self.staged = torch.zeros(4 * places + 2, dtype=torch.int64, device=self.device)

    def fits(self, tokens: int) -> bool:
        return tokens <= ENCODER_GRAPH_MAX_TOKENS

    def run(self, tokens: list[int], slots: list[int], adapter_slot: int, fold: int = 0) -> None:
        """Encode one source and store its cross K/V at `slots` (one per token), with the LoRA
        adapter in `adapter_slot` (-1: the base model); `fold` > 0: and fold them into `folded`
        at S = fold."""
        n = len(tokens)
        size = (n // ENCODER_BUCKET + 1) * ENCODER_BUCKET
        padding = size - n
        host = array.array("q", tokens + [self.model.config.pad_id] * padding)
        host.extend([*range(n), *range(padding)])
        host.extend(slots + [self.padding_slot] * padding)
        host.extend([adapter_slot] * size)
        host.frombytes(array.array("i", [0, n, size, 0]).tobytes())  # the bounds, int32, in two int64 places
        copy_to_device(self.staged[: len(host)], torch.frombuffer(host, dtype=torch.int64))
        with_lora = adapter_slot >= 0

        def step() -> None:
            self._step(size, with_lora, fold)

        self._replay((size, with_lora, fold), step)
        if fold:
            assert self.folded is not None  # a fold asks for them
            self.folded.slots = fold  # as `fold` sets it, on the host, which a replay does not run

    def _inputs(self, size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """A bucket's inputs as `run` copies them: (4, size) int64 (tokens, positions, slots, adapter
        slot) and the bounds (3,) int32 (the source's, then the padding's)."""
        inputs = self.staged[: 4 * size].view(4, size)  # (4 * size,) -> (4, size)
        starts = self.staged[4 * size : 4 * size + 2].view(torch.int32)[:3]  # (2,) int64 -> (4,) int32 -> (3,)
        return inputs, starts

    def _step(self, size: int, with_lora: bool, fold: int) -> None:
        inputs, starts = self._inputs(size)
        tokens, positions, slots, adapter = inputs  # (size,) each
        lora = LoraRows(self.lora, adapter.int()) if with_lora else None
        attend = self.model.packed_attention(starts)
        hidden = self.model.encode_packed(tokens, positions, attend, lora)
        kv = self.model.write_cross_kv(hidden, self.cross_cache, slots, lora)  # (size, L, 2, H, D)
        if fold:  # (a bucket holds more places than the source's S: see `FoldedSources.slots_for`)
            assert self.folded is not None  # a fold asks for them
            self.folded.fold(kv[:fold, :, 0].transpose(0, 1), kv[:fold, :, 1].transpose(0, 1), starts[1:2], fold)
