"""The decoder step as CUDA graphs, one per bucketed batch size.

Launching a decoder step op by op costs ~180 kernel launches from Python, far more than the GPU
work of a small batch. A graph replays them in one call. The step reads and writes only tensors
that live as long as the generator (`DecoderRows`, the caches, the LoRA pool's slot stacks), so
its one input is the list of rows to feed: a step copies its row ids into a static buffer, pads
them to the bucket's size with the scratch row, and replays. Padding rows write their K/V into a
scratch block that no sentence owns and attend over one slot of another, so they cannot disturb
real rows.

A batch of base-model rows replays a graph captured without LoRA work; a step that only feeds
prefixes replays one captured without the output projection. When the LoRA pool reallocates its
stacks (its `layout` changes), the graphs that read them are captured again.

On the CPU the same padded path runs eagerly: that is how CI tests the padding.
"""

from __future__ import annotations

from typing import Callable

import torch

from engine.lora import LoraPool

Forward = Callable[[torch.Tensor, bool, bool], "torch.Tensor | None"]  # (rows, with_lora, with_logits) -> logits


def bucket_for(rows: int) -> int:
    return 1 << max(0, rows - 1).bit_length()


class DecodeGraphs:
    def __init__(self, forward: Forward, max_rows: int, scratch_row: int, device: torch.device, lora: LoraPool):
        self.forward = forward
        self.lora = lora
        self.capture = device.type == "cuda"
        self.max_rows = bucket_for(max_rows)
        self.scratch_row = scratch_row
        self.rows = torch.full((self.max_rows,), scratch_row, dtype=torch.int64, device=device)
        self.graphs: dict[tuple[int, bool, bool], tuple[torch.cuda.CUDAGraph, torch.Tensor | None]] = {}
        self.pool = torch.cuda.graph_pool_handle() if self.capture else None
        self.lora_layout = lora.layout

    def fits(self, rows: int) -> bool:
        return rows <= self.max_rows

    def run(self, rows: torch.Tensor, with_lora: bool, with_logits: bool) -> torch.Tensor | None:
        """The step's logits (N, V) for the N rows (or None without logits); valid until the next run."""
        n = rows.numel()
        size = bucket_for(n)
        self.rows[:n].copy_(rows)
        self.rows[n:size].fill_(self.scratch_row)
        if not self.capture:
            logits = self.forward(self.rows[:size], with_lora, with_logits)
        else:
            if self.lora.layout != self.lora_layout:  # the adapter stacks were reallocated: recapture
                self.graphs = {key: value for key, value in self.graphs.items() if not key[1]}
                self.lora_layout = self.lora.layout
            key = (size, with_lora, with_logits)
            if key not in self.graphs:
                self.graphs[key] = self._capture(*key)
            graph, logits = self.graphs[key]
            graph.replay()
        return None if logits is None else logits[:n]

    def _capture(self, size: int, with_lora: bool, with_logits: bool) -> tuple[torch.cuda.CUDAGraph, torch.Tensor | None]:
        # Warm up on a side stream (Triton compiles, cuBLAS picks its kernels), then capture. The
        # warm-up step runs for real, so it feeds the scratch row alone: real rows must not advance.
        rows = self.rows[:size]
        real = rows.clone()
        rows.fill_(self.scratch_row)
        side = torch.cuda.Stream(rows.device)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self.forward(rows, with_lora, with_logits)
        torch.cuda.current_stream().wait_stream(side)
        rows.copy_(real)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            logits = self.forward(rows, with_lora, with_logits)
        return graph, logits
