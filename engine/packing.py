"""Sequences of different lengths packed one after another, as the encoder and the source cache take them."""

from __future__ import annotations

import torch

from dragoman.engine.device import to_device


def packed_positions(lengths: list[int], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """For sequences of these lengths packed one after another (T = sum(lengths) items): each
    item's sequence and its position in it, (T,) int64 each, made on the device (no loop per item)."""
    T = sum(lengths)
    counts = to_device(lengths, device)  # (B,)
    sequence = torch.repeat_interleave(torch.arange(len(lengths), device=device), counts, output_size=T)  # (T,)
    starts = torch.cumsum(counts, 0) - counts  # (B,) each sequence's first item
    return sequence, torch.arange(T, device=device) - starts[sequence]
