"""The tensors the decoder-row kernels read and write, passed as one object each.

`RowState` is every decoder row's state, indexed by row id (R rows, T positions); the engine's
`DecoderRows` (engine/rows.py) owns it and says what each field means. The other tuples are the
inputs and outputs of one kernel each. Kernel wrappers unpack them into their launch.
"""

from typing import NamedTuple

import torch


class RowState(NamedTuple):
    hyp: torch.Tensor  # (R, T) int64: decoder input so far
    kv_slots: torch.Tensor  # (R, T) int32: self-attention slot of each position
    kv_len: torch.Tensor  # (R,) int32: positions in the cache
    write_block: torch.Tensor  # (R,) int32: the block the row's next positions go into
    prior_offset: torch.Tensor  # (R,) int32: offset to the row feeding its position 0 in its first step; 0: none
    cross_slots: torch.Tensor  # (R, P) int32: its source's cross-attention slots
    cross_len: torch.Tensor  # (R,) int32: its source's length
    limit: torch.Tensor  # (R,) int32: its sentence's max_length
    adapter: torch.Tensor  # (R,) int32: LoRA slot, -1 for the base model
    score: torch.Tensor  # (R,) float32: sum of log-probabilities
    fin_score: torch.Tensor  # (R,) float32: finished hypotheses' scores, -inf: empty
    fin_hyp: torch.Tensor  # (R, T) int64: finished hypotheses
    fin_len: torch.Tensor  # (R,) int32: their lengths
    improvable: torch.Tensor  # (R,) bool, at a sentence's first row: HF's early-stop heuristic
    finished: torch.Tensor  # (R,) bool: its sentence is done, it sits steps out


class AdmittedRows(NamedTuple):
    """Per row of newly admitted sentences (n rows), all int32 (kernels.admit_rows)."""

    rows: torch.Tensor  # (n,) row ids, distinct
    prefixes: torch.Tensor  # (n, W) decoder prefixes, padded to the widest
    beams: torch.Tensor  # (n,) the row's beam in its sentence
    adapters: torch.Tensor  # (n,) LoRA slot
    first_blocks: torch.Tensor  # (n,) its first block, -1: none
    prior_offsets: torch.Tensor  # (n,) offset to the row feeding its position 0, 0: none
    source_blocks: torch.Tensor  # (n, P) its source's blocks, padded to the widest
    source_lengths: torch.Tensor  # (n,)
    limits: torch.Tensor  # (n,) its sentence's max_length


class StepInputs(NamedTuple):
    """What each of N rows feeds into a decode step (kernels.step_inputs)."""

    rows: torch.Tensor  # (N,) int64: the rows fed, padding_row for those of finished sentences
    tokens: torch.Tensor  # (N,) int64
    positions: torch.Tensor  # (N,) int64
    write_slots: torch.Tensor  # (N,) int64: where the new token's K/V go
    self_lens: torch.Tensor  # (N,) int32: positions attended, the new one included
    cross_lens: torch.Tensor  # (N,) int32
    priors: torch.Tensor  # (N,) int32: the row of the step feeding its position before last, -1: none


class NewTokens(NamedTuple):
    """The new token of each of N rows, which kernels.slot_attention stores in the cache as it reads it."""

    k: torch.Tensor  # (N, H, D): its key, in the cache's dtype
    v: torch.Tensor  # (N, H, D): its value
    write_slots: torch.Tensor  # (N,) int32 or int64: the cache slot it goes into, the row's last
    # (N,) int32: the row of the same call whose new token is this row's position before last, -1: none
    priors: torch.Tensor | None = None


class StepReport(NamedTuple):
    """Host memory (pinned on a GPU) a step reports into, for S sentences (kernels.step_report)."""

    done: torch.Tensor  # (S,) bool
    best: torch.Tensor  # (S, T') int64: best hypotheses
    lengths: torch.Tensor  # (S,) int32: their lengths
    scores: torch.Tensor  # (S,) float32: their scores (fin_score of a finished one, else the score sum)

    def first(self, count: int) -> "StepReport":
        """The report of the first `count` sentences."""
        return self.part(0, count)

    def part(self, start: int, count: int) -> "StepReport":
        """The report of sentences start .. start + count - 1."""
        return StepReport(*(t[start : start + count] for t in self))
