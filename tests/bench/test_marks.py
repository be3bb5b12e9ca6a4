import random

import torch

from bench.__main__ import VOCAB, random_weights, run, sentence
from bench.marks import Marks, generator_parts
from dragoman.engine.config import NllbConfig
from dragoman.engine.generator import Generator
from dragoman.engine.model import NllbModel


def tiny_generator() -> Generator:
    """A tiny random model with the published vocabulary: `run` feeds its language codes."""
    config = NllbConfig(vocab_size=VOCAB, d_model=16, encoder_layers=1, decoder_layers=1, encoder_heads=2,
                        decoder_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16, max_position_embeddings=64)
    model = NllbModel(config, random_weights(config, torch.device("cpu"), torch.float32), max_positions=64)
    return Generator.build(model)


def test_each_part_of_a_run_is_marked_in_order_and_the_methods_come_back():
    generator = tiny_generator()
    sources = [sentence(n, random.Random(n)) for n in (5, 9, 7)]
    with Marks(generator_parts(generator)) as marks:
        run(generator, sources, 1, 6)
    timeline = marks.timeline()
    labels = [label for label, _, _ in timeline]
    assert labels[0] == "_admit in" and labels[-1].endswith(" out")
    assert labels.index("encode_sources in") < labels.index("encode in") < labels.index("write_cross_kv in")
    assert labels.index("admit_rows in") < labels.index("run_rows in") < labels.index("admit_rows out") < labels.index("launch in")
    assert labels.count("launch in") == labels.count("launch out") == 5  # 6 new tokens: the language code, 5 steps
    hosts = [host for _, host, _ in timeline]
    assert hosts == sorted(hosts) and hosts[0] == 0.0
    assert all(gpu is None for _, _, gpu in timeline)  # no GPU here: host times only
    assert "_admit" not in vars(generator) and "launch" not in vars(generator.runner) and "encode" not in vars(generator.model)
    with Marks(generator_parts(generator)) as again:
        pass
    assert again.timeline() == []


def test_nothing_is_marked_outside_the_block():
    generator = tiny_generator()
    marks = Marks(generator_parts(generator))
    with marks:
        pass
    run(generator, [sentence(4, random.Random(0))], 1, 3)
    assert marks.records == []
