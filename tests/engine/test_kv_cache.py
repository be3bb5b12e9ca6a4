import torch

from engine.kv_cache import OutOfBlocks, PagedKVCache, Sequence

import pytest


def make_cache(blocks=8, block_size=4):
    return PagedKVCache(2, blocks, block_size, 2, 3, torch.float32, torch.device("cpu"))


def write_tokens(cache, seq, values):
    """Append one token per value; K and V of every layer hold that value."""
    for value in values:
        slot = cache.extend(seq, 1)
        for layer in range(cache.k.shape[0]):
            filled = torch.full((1, 2, 3), float(value))
            cache.write(layer, torch.tensor(slot), filled, -filled)


def read_tokens(cache, seq):
    flat = cache.k[0].view(-1, 2, 3)
    slots = [seq.blocks[p // cache.block_size] * cache.block_size + p % cache.block_size for p in range(seq.length)]
    return [flat[s, 0, 0].item() for s in slots]


def test_blocks_are_counted_and_returned():
    cache = make_cache()
    seq = Sequence()
    write_tokens(cache, seq, range(9))  # 3 blocks of 4
    assert cache.num_total_blocks() == 8
    assert cache.num_free_blocks() == 5
    assert read_tokens(cache, seq) == list(range(9))
    cache.free_sequence(seq)
    assert cache.num_free_blocks() == 8


def test_fork_shares_full_blocks_and_copies_the_partial_one_on_write():
    cache = make_cache()
    parent = Sequence()
    write_tokens(cache, parent, [1, 2, 3, 4, 5, 6])  # one full block, one half-full
    child = cache.fork(parent)
    assert cache.num_free_blocks() == 6  # nothing copied yet
    write_tokens(cache, child, [70])
    write_tokens(cache, parent, [80])
    assert child.blocks[0] == parent.blocks[0]  # the full block stays shared
    assert child.blocks[1] != parent.blocks[1]  # the written one was copied first
    assert read_tokens(cache, child) == [1, 2, 3, 4, 5, 6, 70]
    assert read_tokens(cache, parent) == [1, 2, 3, 4, 5, 6, 80]
    cache.free_sequence(parent)
    assert read_tokens(cache, child) == [1, 2, 3, 4, 5, 6, 70]
    cache.free_sequence(child)
    assert cache.num_free_blocks() == 8


def test_running_out_of_blocks_is_an_error_not_corruption():
    cache = make_cache(blocks=2)
    seq = Sequence()
    write_tokens(cache, seq, range(8))
    with pytest.raises(OutOfBlocks):
        cache.extend(seq, 1)
