import pytest
import torch

from dragoman.engine.kv_cache import OutOfBlocks, PagedKVCache, Sequence


def make_cache(blocks=8, block_size=4):
    return PagedKVCache(2, blocks, block_size, 2, 3, torch.float32, torch.device("cpu"))


def write_tokens(cache, seq, values):
    """Append one token per value; K and V of every layer hold that value."""
    for value in values:
        cache.extend(seq, 1)
        slot = cache.slots_of([seq], torch.device("cpu"))[-1:]  # (1,) the new token's
        filled = torch.full((1, cache.k.shape[0], 1, 2, 3), float(value))  # (1, L, 1, H, D)
        cache.write(slot, torch.cat([filled, -filled], dim=2))  # (1, L, 2, H, D): K, then V


def read_tokens(cache, seq):
    return [cache.k[1, s, 0, 0].item() for s in cache.slot_list(seq)]


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


def test_slots_of_lists_each_sequence_s_tokens_across_its_blocks():
    cache = make_cache()
    a, b = Sequence(), Sequence()
    cache.extend(a, 6)
    cache.extend(b, 3)
    cache.extend(a, 3)  # a's third block comes after b's
    slots = cache.slots_of([a, b], torch.device("cpu")).tolist()
    in_block = [[block * 4 + i for i in range(4)] for block in a.blocks]
    assert slots[:9] == in_block[0] + in_block[1] + in_block[2][:1]
    assert slots[9:] == [b.blocks[0] * 4 + i for i in range(3)]
    assert slots == cache.slot_list(a) + cache.slot_list(b)


def test_padding_blocks_are_not_capacity():
    cache = make_cache()
    padding_block = cache.reserve_padding_block()
    assert cache.num_total_blocks() == cache.num_free_blocks() == 7
    assert padding_block not in cache.take_blocks(7)


def test_running_out_of_blocks_is_an_error_not_corruption():
    cache = make_cache(blocks=2)
    seq = Sequence()
    write_tokens(cache, seq, range(8))
    with pytest.raises(OutOfBlocks):
        cache.extend(seq, 1)
    assert seq.length == 8 and len(seq.blocks) == 2
