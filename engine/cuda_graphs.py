"""The decoder step as CUDA graphs, one per bucketed batch size.

Launching a decoder step op by op costs ~180 kernel launches from Python, far more than the GPU
work of a small batch. A graph replays them in one call. The step reads and writes only tensors
that live as long as the generator (`DecoderRows`, the caches, the LoRA pool's slot stacks), so
its one input is the list of rows to feed: a step copies its row ids into a static buffer, pads
them to the bucket's size with the scratch row, and replays. Padding rows write their K/V into a
scratch block that no sentence owns and attend over one slot of another, so they cannot disturb
real rows.

A graph holds whatever step the generator hands it: the decoder step alone (with or without the
output projection: prefix feeding needs no logits), or the decoder step and the search of one
options group, so that a whole step of a document or a typed sentence is one replay. A batch of
base-model rows replays graphs captured without LoRA work. When the LoRA pool reallocates its
stacks (its `layout` changes), the graphs that read them are captured again.

On the CPU the same padded path runs eagerly: that is how CI tests the padding.
"""

from __future__ import annotations

from typing import Callable

import torch

from engine.lora import LoraPool

Step = Callable[[torch.Tensor], "torch.Tensor | None"]  # padded rows (size,) -> output


def bucket_for(rows: int) -> int:
    return 1 << max(0, rows - 1).bit_length()


class DecodeGraphs:
    def __init__(self, max_rows: int, scratch_row: int, device: torch.device, lora: LoraPool):
        self.lora = lora
        self.capture = device.type == "cuda"
        self.max_rows = bucket_for(max_rows)
        self.scratch_row = scratch_row
        self.rows = torch.full((self.max_rows,), scratch_row, dtype=torch.int64, device=device)
        self.graphs: dict[tuple, tuple[torch.cuda.CUDAGraph, torch.Tensor | None]] = {}  # (size, with_lora, ...)
        self.pool = torch.cuda.graph_pool_handle() if self.capture else None
        self.lora_layout = lora.layout

    def fits(self, rows: int) -> bool:
        return rows <= self.max_rows

    def run(self, rows: torch.Tensor, key: tuple, step: Step) -> torch.Tensor | None:
        """`step` over the rows (N,) padded to their bucket with the scratch row, replayed from the
        graph captured for (bucket, *key) on its first use; returns its output for the padded batch,
        valid until the next run. `key[0]` says whether the step reads the LoRA pool's stacks."""
        n = rows.numel()
        size = bucket_for(n)
        self.rows[:n].copy_(rows)
        self.rows[n:size].fill_(self.scratch_row)
        if not self.capture:
            return step(self.rows[:size])
        if self.lora.layout != self.lora_layout:  # the adapter stacks were reallocated: recapture
            self._keep(lambda key: not key[1])
            self.lora_layout = self.lora.layout
        full_key = (size, *key)
        if full_key not in self.graphs:
            self.graphs[full_key] = self._capture(size, step)
        graph, out = self.graphs[full_key]
        graph.replay()
        return out

    def drop_larger_than(self, rows: int) -> None:
        """Forget the graphs of buckets above `rows` (their memory goes back to the pool's allocator)."""
        self._keep(lambda key: key[0] <= bucket_for(rows))

    def _keep(self, wanted: Callable[[tuple], bool]) -> None:
        self.graphs = {key: value for key, value in self.graphs.items() if wanted(key)}
        if not self.graphs and self.capture:  # a pool whose graphs are all gone takes no new captures
            self.pool = torch.cuda.graph_pool_handle()

    def _capture(self, size: int, step: Step) -> tuple[torch.cuda.CUDAGraph, torch.Tensor | None]:
        # Warm up on a side stream (Triton compiles, cuBLAS picks its kernels), then capture. The
        # warm-up step runs for real, so it feeds the scratch row alone: real rows must not advance.
        rows = self.rows[:size]
        real = rows.clone()
        rows.fill_(self.scratch_row)
        side = torch.cuda.Stream(rows.device)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            step(rows)
        torch.cuda.current_stream().wait_stream(side)
        rows.copy_(real)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            out = step(rows)
        return graph, out
