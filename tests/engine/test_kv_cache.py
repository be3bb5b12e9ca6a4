import pytest
import torch

from engine.kv_cache import OutOfBlocks, PagedKVCache, Sequence


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
    slots = [seq.blocks[p // cache.block_size] * cache.block_size + p % cache.block_size for p in range(seq.length)]
    return [cache.k[1, s, 0, 0].item() for s in slots]


def test_blocks_are_counted_and_returned():
    cache = make_cache()
    seq = Sequence()
    write_tokens(cache, seq, range(9))  # 3 blocks of 4
    assert cache.num_total_blocks() == 8
    assert cache.num_free_blocks() == 5
    assert read_tokens(cache, seq) == list(range(9))
    cache.free_sequence(seq)
    assert cache.num_free_blocks() == 8


def test_sequences_written_in_turns_keep_their_own_tokens():
    cache = make_cache()
    a, b = Sequence(), Sequence()
    for i in range(6):
        write_tokens(cache, a, [i])
        write_tokens(cache, b, [100 + i])
    assert not set(a.blocks) & set(b.blocks)
    assert read_tokens(cache, a) == list(range(6))
    assert read_tokens(cache, b) == [100 + i for i in range(6)]


def test_extend_returns_consecutive_slots_across_blocks():
    cache = make_cache()
    seq = Sequence()
    slots = cache.extend(seq, 6)
    assert slots == [seq.blocks[0] * 4 + i for i in range(4)] + [seq.blocks[1] * 4, seq.blocks[1] * 4 + 1]


def test_scratch_blocks_are_not_capacity():
    cache = make_cache()
    scratch = cache.reserve_scratch_block()
    assert cache.num_total_blocks() == cache.num_free_blocks() == 7
    assert scratch not in cache.take_blocks(7)


def test_running_out_of_blocks_is_an_error_not_corruption():
    cache = make_cache(blocks=2)
    seq = Sequence()
    write_tokens(cache, seq, range(8))
    with pytest.raises(OutOfBlocks):
        cache.extend(seq, 1)
    assert seq.length == 8 and len(seq.blocks) == 2
