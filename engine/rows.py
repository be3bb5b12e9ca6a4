"""Every decoder row's state, on the device, indexed by row id.

A row is one hypothesis being decoded: a beam, or the one row of a greedy sentence. Rows keep their
id from admission to the end of their sentence; beam search reorders hypotheses by moving them
between the rows of a sentence (a gather of `hyp` and `kv_slots`), never by copying K/V.

`kv_slots[r, t]` is the self-attention cache slot that holds position t of row r's hypothesis.
Each row writes the K/V of its newest token into a block of its own (`write_block`), so a
hypothesis taken over from another beam keeps reading the positions it shares with that beam from
where that beam wrote them. Blocks belong to the sentence and are given back when it ends.

Beam search keeps a sentence's finished hypotheses (HF's BeamHypotheses) in its rows too: the
i-th best finished hypothesis of a sentence whose rows are `rows` sits at row `rows[i]` of the
`fin_*` tensors, and sentence-wide flags at its first row.

A sentence of several beams whose decoder prefix is `</s>` and the language code starts without a
step of its own for `</s>`: in its first step beam 1 feeds position 0 while the other beams feed
position 1 and read position 0 from beam 1's new K/V (`prior_offset`, from admission to that
step: the offset from a row's place in the step to beam 1's). Beam 1's scores of that step are
HF's -1e9 placeholders, so nothing it finds survives the search; after it, every row holds both.

The last row is the padding row: padding rows of a captured step are all this row, and so are, for one
step, the rows of a sentence that has just finished (`finished`: the host learns that a sentence is
done one step late, and meanwhile its rows must not move; kernels.step_inputs feeds the padding row
in their place).
"""

from __future__ import annotations

from typing import Any

import torch

from dragoman.engine.constraints import MAX_CONSTRAINTS
from dragoman.engine.decoding import NEG_INF
from dragoman.kernels import RowState


class DecoderRows:
    def __init__(self, capacity: int, max_length: int, max_source: int, device: torch.device):
        R, T = capacity + 1, max_length
        self.capacity = capacity
        self.max_length = max_length
        self.max_source = max_source
        self.padding_row = capacity
        i32: dict[str, Any] = dict(dtype=torch.int32, device=device)  # torch.zeros(..., **i32)
        i64: dict[str, Any] = dict(dtype=torch.int64, device=device)
        self.hyp = torch.zeros(R, T, **i64)  # decoder input so far: `</s>`, language code, tokens
        self.kv_slots = torch.zeros(R, T, **i32)  # self-attention slot of each position
        self.kv_len = torch.zeros(R, **i32)  # positions in the cache
        self.write_block = torch.zeros(R, **i32)  # the block the row's next positions go into
        self.prior_offset = torch.zeros(R, **i32)  # see above; 0: none
        self.cross_slots = torch.zeros(R, max_source, **i32)  # its source's cross-attention slots
        self.cross_len = torch.ones(R, **i32)
        self.limit = torch.full((R,), T, **i32)  # its sentence's max_length (HF's: the whole decoder input)
        self.adapter = torch.full((R,), -1, **i32)  # LoRA slot, -1 for the base model
        self.score = torch.zeros(R, dtype=torch.float32, device=device)  # sum of log-probabilities
        self.fin_score = torch.full((R,), NEG_INF, dtype=torch.float32, device=device)  # -inf: empty
        self.fin_hyp = torch.zeros(R, T, **i64)
        self.fin_len = torch.zeros(R, **i32)
        self.improvable = torch.ones(R, dtype=torch.bool, device=device)  # HF's early-stop heuristic, per sentence
        self.finished = torch.zeros(R, dtype=torch.bool, device=device)  # its sentence is done: it sits steps out
        # Per constraint of a constrained sentence, its tokens the row's hypothesis meets (engine/constrained_search.py).
        self.met = torch.zeros(R, MAX_CONSTRAINTS, **i32)
        self.free_rows = list(range(capacity - 1, -1, -1))  # pop() hands out low ids first
        # The same tensors as one object, as the kernels take them.
        self.tensors = RowState(self.hyp, self.kv_slots, self.kv_len, self.write_block, self.prior_offset,
                                self.cross_slots, self.cross_len, self.limit, self.adapter, self.score,
                                self.fin_score, self.fin_hyp, self.fin_len, self.improvable, self.finished)

    def mark_finished(self, rows: torch.Tensor, done: torch.Tensor) -> None:
        """Flag the rows (S, B) of the sentences whose `done` (S,) is true after a step."""
        self.finished[rows] = done[:, None].expand_as(rows)

    def num_free_rows(self) -> int:
        return len(self.free_rows)

    def take_rows(self, count: int) -> list[int]:
        if count > len(self.free_rows):
            raise RuntimeError(f"{count} decoder rows needed, {len(self.free_rows)} free")
        return [self.free_rows.pop() for _ in range(count)]

    def give_back(self, rows: list[int]) -> None:
        self.free_rows.extend(reversed(rows))
