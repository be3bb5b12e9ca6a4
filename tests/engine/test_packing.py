import torch

from dragoman.engine.packing import packed_positions


def test_each_item_knows_its_sequence_and_position():
    sequence, position = packed_positions([3, 1, 0, 2], torch.device("cpu"))
    assert sequence.tolist() == [0, 0, 0, 1, 3, 3]
    assert position.tolist() == [0, 1, 2, 0, 0, 1]
