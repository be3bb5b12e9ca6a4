"""How much of the device the engine takes: rows a step may have, and tokens of the KV caches."""

from __future__ import annotations

from dataclasses import dataclass

# What the engine takes of a GPU's memory beyond the model's weights, unless told otherwise (the
# app's setting "GPU memory for translation"): enough for an 8 GB card beside the display.
DEFAULT_GPU_MEMORY = 2 << 30
GPU_ROWS = 2048  # the most rows a step may have on a GPU
# On the CPU a step costs a fixed overhead (a hundred-odd eager operations) plus its matrix work: a
# step has CPU_ROWS rows, or as many more (up to CPU_MAX_ROWS) as keep its weight reads per step
# near CPU_STEP_WEIGHTS, so that a small model's steps are not all overhead (a published model's
# are not: its rows stay CPU_ROWS).
CPU_ROWS = 32
CPU_MAX_ROWS = 256
CPU_STEP_WEIGHTS = 16 << 20
# The self-attention cache: 4,096 tokens of the 600M model's float32 cache (a few sentences with 4
# beams at full length; the scheduler preempts beyond that), never more than the rows can fill.
CPU_CACHE_BYTES = 384 << 20
BLOCK_SIZE = 16  # tokens a KV cache block holds


@dataclass(frozen=True)
class MemoryPlan:
    """How much a generator takes: rows a step may have, and tokens of the self-attention cache (the
    source cache holds a quarter of that, at least 2,048)."""

    rows: int
    cache_tokens: int

    def cache_bytes(self, bytes_per_token: int) -> int:
        return (self.cache_tokens + max(self.cache_tokens // 4, 2048)) * bytes_per_token


def plan_cpu(step_weights: int, bytes_per_token: int, max_positions: int) -> MemoryPlan:
    """Rows and cache tokens on the CPU for a model whose decoder step reads `step_weights` weights a
    row (its layers and output projection) and whose cache takes `bytes_per_token`."""
    rows = max(1, CPU_STEP_WEIGHTS // max(1, step_weights))
    rows = min(CPU_MAX_ROWS, max(CPU_ROWS, 1 << rows.bit_length() - 1))
    tokens = min(CPU_CACHE_BYTES // bytes_per_token, rows * max_positions)
    return MemoryPlan(rows, max(tokens, 4 * BLOCK_SIZE))


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
