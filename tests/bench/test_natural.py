import random

import torch

from bench.__main__ import VOCAB, random_weights, sentence
from bench.natural import measure, natural_lengths
from dragoman.engine.config import NllbConfig
from dragoman.engine.generator import Generator
from dragoman.engine.model import NllbModel


def tiny_generator(max_rows):
    """A one-layer random model with the bench's vocabulary (its sentences' ids), on the CPU."""
    config = NllbConfig(vocab_size=VOCAB, d_model=16, encoder_layers=1, decoder_layers=1, encoder_heads=2,
                        decoder_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=1024)
    weights = random_weights(config, torch.device("cpu"), torch.float32)
    return Generator.build(NllbModel(config, weights, max_positions=1024), max_rows=max_rows)


def test_translations_end_at_lengths_that_follow_their_sources():
    rng = random.Random(2)
    sources = [sentence(rng.randint(10, 60), rng) for _ in range(500)]
    lengths = natural_lengths(sources, rng)
    assert all(0.8 * len(s) - 1 <= n <= 1.25 * len(s) + 1 for s, n in zip(sources, lengths))
    assert len(set(lengths)) > 30  # spread, so sentences of a batch finish at different steps


def test_draining_the_batch_takes_more_steps_than_admitting_at_once():
    generator = tiny_generator(max_rows=8)
    rng = random.Random(1)
    sources = [sentence(rng.randint(10, 60), rng) for _ in range(16)]
    lengths = natural_lengths(sources, rng)
    results = measure(generator, sources, lengths, beams=1, shares=[0.0, 0.5, 1.0], rounds=1)  # asserts the lengths
    steps = [results[share][1] for share in (0.0, 0.5, 1.0)]
    assert steps[0] <= steps[1] <= steps[2] and steps[0] < steps[2]
    assert steps[0] >= max(lengths)  # one token a step
