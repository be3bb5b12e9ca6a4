"""Paged key/value cache: fixed-size blocks shared by reference count, handed out from a free list.

A sequence is a list of block ids plus a length. Beams fork by sharing every block; the first write
into a shared block copies it first (copy-on-write), so beams that agree on a prefix keep one copy.
The same class holds the decoder's self-attention K/V and the encoder's cross-attention K/V.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


class OutOfBlocks(RuntimeError):
    """The pool has no free block left; the scheduler admits work by `num_free_blocks` to avoid this."""


@dataclass
class Sequence:
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
        shape = (num_layers, num_blocks, block_size, heads, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)  # (L, blocks, block_size, H, D)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.block_size = block_size
        self.ref_counts = [0] * num_blocks
        self.reserved = 0  # blocks taken for good (scratch), not counted as capacity
        self.free_blocks = list(range(num_blocks - 1, -1, -1))  # pop() hands out low ids first

    # -- the contract's gauges ---------------------------------------------------------------------

    def num_free_blocks(self) -> int:
        return len(self.free_blocks)

    def num_total_blocks(self) -> int:
        return len(self.ref_counts) - self.reserved

    def kv_block_size(self) -> int:
        return self.block_size

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    # -- sequences ---------------------------------------------------------------------------------

    def _take_block(self) -> int:
        if not self.free_blocks:
            raise OutOfBlocks(f"all {self.num_total_blocks()} KV blocks are in use")
        block = self.free_blocks.pop()
        self.ref_counts[block] = 1
        return block

    def _drop_block(self, block: int) -> None:
        self.ref_counts[block] -= 1
        if self.ref_counts[block] == 0:
            self.free_blocks.append(block)

    def reserve_scratch_block(self) -> int:
        """A block no sequence will ever own: padding rows of a captured step write and read it."""
        self.reserved += 1
        return self._take_block()

    def free_sequence(self, seq: Sequence) -> None:
        for block in seq.blocks:
            self._drop_block(block)
        seq.blocks, seq.length = [], 0

    def fork(self, seq: Sequence) -> Sequence:
        for block in seq.blocks:
            self.ref_counts[block] += 1
        return Sequence(list(seq.blocks), seq.length)

    def extend(self, seq: Sequence, tokens: int) -> list[int]:
        """Room for `tokens` more tokens at the end of `seq`; returns their flat slot indices.

        A shared last block that is about to be written is copied first (copy-on-write).
        """
        copies: list[tuple[int, int]] = []
        slots = self._extend(seq, tokens, copies)
        self.copy_blocks(copies)
        return slots

    def extend_each(self, seqs: list[Sequence]) -> list[int]:
        """One more token for every sequence, with all copy-on-write copies done in one batched copy."""
        copies: list[tuple[int, int]] = []
        slots = [self._extend(seq, 1, copies)[0] for seq in seqs]
        self.copy_blocks(copies)
        return slots

    def _extend(self, seq: Sequence, tokens: int, copies: list[tuple[int, int]]) -> list[int]:
        offset = seq.length % self.block_size
        if offset and self.ref_counts[seq.blocks[-1]] > 1:
            shared = seq.blocks[-1]
            seq.blocks[-1] = self._take_block()
            self.ref_counts[shared] -= 1  # still held by another sequence: never freed here
            copies.append((shared, seq.blocks[-1]))
        slots = []
        for position in range(seq.length, seq.length + tokens):
            if position % self.block_size == 0:
                seq.blocks.append(self._take_block())
            slots.append(seq.blocks[-1] * self.block_size + position % self.block_size)
        seq.length += tokens
        return slots

    def copy_blocks(self, copies: list[tuple[int, int]]) -> None:
        if not copies:
            return
        src = torch.tensor([s for s, _ in copies], device=self.k.device)
        dst = torch.tensor([d for _, d in copies], device=self.k.device)
        self.k[:, dst] = self.k[:, src]
        self.v[:, dst] = self.v[:, src]

    # -- tensors -----------------------------------------------------------------------------------

    def write(self, layer: int, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store k, v (T, H, D) of one layer at flat slots (T,)."""
        L, blocks, block_size, H, D = self.k.shape
        self.k[layer].view(blocks * block_size, H, D).index_copy_(0, slots, k)  # flat (slots, H, D) view
        self.v[layer].view(blocks * block_size, H, D).index_copy_(0, slots, v)

    def block_table(self, seqs: list[Sequence], device: torch.device) -> torch.Tensor:
        """(N, max blocks) int32, rows padded with 0 (never read past a row's length)."""
        width = max(1, max(len(s.blocks) for s in seqs))
        table = [s.blocks + [0] * (width - len(s.blocks)) for s in seqs]
        return torch.tensor(table, dtype=torch.int32, device=device)
