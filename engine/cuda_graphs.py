"""The decoder step as CUDA graphs, one per bucketed batch size.

Launching a decoder step op by op costs ~180 kernel launches from Python, far more than the GPU
work of a small batch. A graph replays them in one call. Its inputs live in static buffers: a
step copies its rows in, pads them to the bucket's size, and replays. Padding rows write their
K/V into a scratch block that no sequence owns and attend over one token of it, so they cannot
disturb real rows. Block tables have a fixed width (enough blocks for the longest decoder and
source lengths), so a graph stays valid however the tables change from step to step.

Rows' LoRA slots live in a static buffer too, and the adapters' weights in the pool's slot stacks,
which promotion copies into: a graph captured with adapters serves any mix of them. A batch of
base-model rows replays a graph captured without LoRA work. When the pool reallocates its stacks
(its `layout` changes), the graphs are captured again.

On the CPU the same padded path runs eagerly: that is how CI tests the padding.
"""

from __future__ import annotations

import torch

from engine.kv_cache import PagedKVCache
from engine.lora import LoraPool, LoraRows
from engine.model import NllbModel


def bucket_for(rows: int) -> int:
    return 1 << max(0, rows - 1).bit_length()


class DecodeGraphs:
    def __init__(
        self, model: NllbModel, self_cache: PagedKVCache, cross_cache: PagedKVCache, max_rows: int, lora: LoraPool
    ):
        self.model = model
        self.lora = lora
        self.self_cache = self_cache
        self.cross_cache = cross_cache
        self.capture = model.device.type == "cuda"
        self.max_rows = bucket_for(max_rows)
        self.self_width = self_cache.blocks_for(model.positions.shape[0])
        self.cross_width = cross_cache.blocks_for(model.positions.shape[0])
        self.self_scratch = self_cache.reserve_scratch_block()
        self.cross_scratch = cross_cache.reserve_scratch_block()
        R, device = self.max_rows, model.device
        self.tokens = torch.zeros(R, dtype=torch.int64, device=device)
        self.positions = torch.zeros(R, dtype=torch.int64, device=device)
        self.self_slots = torch.zeros(R, dtype=torch.int64, device=device)
        self.self_tables = torch.zeros(R, self.self_width, dtype=torch.int32, device=device)
        self.self_lens = torch.zeros(R, dtype=torch.int32, device=device)
        self.cross_tables = torch.zeros(R, self.cross_width, dtype=torch.int32, device=device)
        self.cross_lens = torch.zeros(R, dtype=torch.int32, device=device)
        self.adapter_slots = torch.full((R,), -1, dtype=torch.int32, device=device)
        self.graphs: dict[tuple[int, bool], tuple[torch.cuda.CUDAGraph, torch.Tensor]] = {}  # (size, with LoRA)
        self.pool = torch.cuda.graph_pool_handle() if self.capture else None
        self.positions_ptr = model.positions.data_ptr()
        self.lora_layout = lora.layout

    def fits(self, rows: int, self_blocks: int, cross_blocks: int) -> bool:
        return rows <= self.max_rows and self_blocks <= self.self_width and cross_blocks <= self.cross_width

    def run(
        self,
        tokens: list[int],
        positions: list[int],
        self_slots: list[int],
        self_tables: list[list[int]],
        self_lens: list[int],
        cross_tables: list[list[int]],
        cross_lens: list[int],
        adapter_slots: list[int] | None = None,
    ) -> torch.Tensor:
        """The step's logits (N, V) for N real rows; the view is valid until the next run.

        `adapter_slots`: each row's LoRA slot (-1 for none); None when no row has an adapter.
        """
        n = len(tokens)
        size = bucket_for(n)
        pad = size - n
        scratch_slot = self.self_scratch * self.self_cache.block_size
        host = torch.tensor(
            [tokens + [0] * pad, positions + [self.model.config.pad_id + 1] * pad, self_slots + [scratch_slot] * pad],
            dtype=torch.int64,
        )  # (3, size)
        self.tokens[:size].copy_(host[0], non_blocking=True)
        self.positions[:size].copy_(host[1], non_blocking=True)
        self.self_slots[:size].copy_(host[2], non_blocking=True)
        self.self_tables[:size].copy_(self._table(self_tables, pad, self.self_width, self.self_scratch), non_blocking=True)
        self.cross_tables[:size].copy_(self._table(cross_tables, pad, self.cross_width, self.cross_scratch), non_blocking=True)
        lens = torch.tensor([self_lens + [1] * pad, cross_lens + [1] * pad], dtype=torch.int32)  # (2, size)
        self.self_lens[:size].copy_(lens[0], non_blocking=True)
        self.cross_lens[:size].copy_(lens[1], non_blocking=True)
        with_lora = adapter_slots is not None
        if with_lora:
            host_slots = torch.tensor(adapter_slots + [-1] * pad, dtype=torch.int32)  # padding rows: no adapter
            self.adapter_slots[:size].copy_(host_slots, non_blocking=True)
        if not self.capture:
            return self._step(size, with_lora)[:n]
        if self.model.positions.data_ptr() != self.positions_ptr:  # the position table grew: recapture
            self.graphs.clear()
            self.positions_ptr = self.model.positions.data_ptr()
        if self.lora.layout != self.lora_layout:  # the adapter stacks were reallocated: recapture
            self.graphs = {key: value for key, value in self.graphs.items() if not key[1]}
            self.lora_layout = self.lora.layout
        key = (size, with_lora)
        if key not in self.graphs:
            self.graphs[key] = self._capture(size, with_lora)
        graph, logits = self.graphs[key]
        graph.replay()
        return logits[:n]

    @staticmethod
    def _table(rows: list[list[int]], pad: int, width: int, scratch: int) -> torch.Tensor:
        """(size, width) int32: each row's blocks, then the scratch block (never read past a row's length)."""
        lengths = torch.tensor([len(row) for row in rows])
        table = torch.full((len(rows) + pad, width), scratch, dtype=torch.int32)
        filled = torch.arange(width)[None, :] < lengths[:, None]  # (N, width), row-major like `flat`
        table[: len(rows)][filled] = torch.tensor([block for row in rows for block in row], dtype=torch.int32)
        return table

    def _step(self, size: int, with_lora: bool) -> torch.Tensor:
        return self.model.decode_step(
            tokens=self.tokens[:size],
            positions=self.positions[:size],
            self_cache=self.self_cache,
            self_slots=self.self_slots[:size],
            self_tables=self.self_tables[:size],
            self_lens=self.self_lens[:size],
            cross_cache=self.cross_cache,
            cross_tables=self.cross_tables[:size],
            cross_lens=self.cross_lens[:size],
            lora=LoraRows(self.lora, self.adapter_slots[:size]) if with_lora else None,
        )

    def _capture(self, size: int, with_lora: bool) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
        # Warm up on a side stream (Triton compiles, cuBLAS picks its kernels), then capture.
        side = torch.cuda.Stream(self.model.device)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self._step(size, with_lora)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            logits = self._step(size, with_lora)
        return graph, logits
