"""Paged key/value cache: token slots handed out in fixed-size blocks from a free list.

Each layer's K/V is a flat array of token slots; a block is `block_size` consecutive slots. Whoever
takes a block (the beams of a sentence, a source) owns it until it gives it back, and readers find
their tokens through lists of slots (kernels/slot_attention.py). Beams therefore never copy or
share blocks: each beam writes its own, and a reordered beam takes over its parent's slot list
(engine/rows.py). The same class holds the decoder's self-attention K/V and the encoder's
cross-attention K/V.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from dragoman import kernels
from dragoman.engine.device import to_device, zeroed
from dragoman.engine.packing import packed_positions
from dragoman.engine.scheduler import OutOfBlocks


@dataclass
class Sequence:
    """Tokens written one after another into blocks of one owner (a source's cross K/V)."""

    blocks: list[int] = field(default_factory=list)
    length: int = 0


class PagedKVCache:
    def __init__(
        self,
        num_layers: int,
        num_blocks: int,
        block_size: int,
        heads: int,
        head_dim: int,
        dtype: torch.dtype,
        device: torch.device,
    ):
        shape = (num_layers, num_blocks * block_size, heads, head_dim)
        # Zeroed: padding rows attend over slots no sentence may have written yet, and must read
        # numbers there (a NaN ends a padding sentence's search; engine/constrained_search.py keeps
        # the padding row's length at 0 all the same).
        self.k = zeroed(shape, dtype, device)  # (L, slots, H, D)
        self.v = zeroed(shape, dtype, device)
        self.block_size = block_size
        self.num_blocks = num_blocks
        self.reserved = 0  # blocks taken for good (padding), not counted as capacity
        self.free_blocks = list(range(num_blocks - 1, -1, -1))  # pop() hands out low ids first

    # -- gauges ------------------------------------------------------------------------------------

    def num_free_blocks(self) -> int:
        return len(self.free_blocks)

    def num_total_blocks(self) -> int:
        return self.num_blocks - self.reserved

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    # -- blocks ------------------------------------------------------------------------------------

    def take_blocks(self, count: int) -> list[int]:
        if count > len(self.free_blocks):
            raise OutOfBlocks(f"{count} KV blocks needed, {len(self.free_blocks)} of {self.num_total_blocks()} free")
        taken = self.free_blocks[len(self.free_blocks) - count :][::-1]
        del self.free_blocks[len(self.free_blocks) - count :]
        return taken

    def give_back(self, blocks: list[int]) -> None:
        self.free_blocks.extend(reversed(blocks))

    def reserve_padding_block(self) -> int:
        """A block no one will ever own: padding rows of a captured step write and read it."""
        self.reserved += 1
        return self.take_blocks(1)[0]

    # -- sequences ---------------------------------------------------------------------------------

    def extend(self, seq: Sequence, tokens: int) -> None:
        """Room for `tokens` more tokens at the end of `seq`."""
        seq.blocks += self.take_blocks(self.blocks_for(seq.length + tokens) - len(seq.blocks))
        seq.length += tokens

    def slot(self, block, position):
        """The flat slot of the token at `position` of a sequence whose block for it is `block`
        (ints or tensors alike; kernels/step_inputs.py computes it the same way)."""
        return block * self.block_size + position % self.block_size

    def slot_list(self, seq: Sequence) -> list[int]:
        """The flat slot of every token of `seq`, on the host (for a short sequence)."""
        return [self.slot(seq.blocks[p // self.block_size], p) for p in range(seq.length)]

    def slots_of(self, seqs: list[Sequence], device: torch.device) -> torch.Tensor:
        """The flat slot of every token of `seqs`, sequence after sequence: (sum of lengths,) int64."""
        blocks = to_device([b for seq in seqs for b in seq.blocks], device)  # (all blocks,)
        counts = to_device([len(seq.blocks) for seq in seqs], device)
        first_block = torch.cumsum(counts, 0) - counts  # (S,) each sequence's first entry in `blocks`
        seq, position = packed_positions([seq.length for seq in seqs], device)  # (T,) each
        return self.slot(blocks[first_block[seq] + position // self.block_size], position)

    def free_sequence(self, seq: Sequence) -> None:
        self.give_back(seq.blocks)
        seq.blocks, seq.length = [], 0

    # -- tensors -----------------------------------------------------------------------------------

    def write(self, slots: torch.Tensor, kv: torch.Tensor) -> None:
        """Store kv (T, L, 2, H, D), every layer's K and V of T tokens, at flat slots (T,): one launch."""
        kernels.store_kv(kv, slots, self.k, self.v)
