"""Documents whose sentences end at different lengths, as real translations do:
`python -m bench.natural [--size 600M] [--beams 4] [--sentences 2048] [--shares 0 0.25 1] [--rounds 3]`.

The workloads of `python -m bench` force every output to 40 tokens, so a batch's sentences finish
together and the next ones are admitted all at once. Real sentences finish a few at a time, and
the engine then chooses between admitting new sentences at once (an encoder pass, and for greedy a
prefix step, for a few sentences) and letting rows idle until more are free
(`Generator.admit_share`). Random weights never stop on their own, so here each sentence is capped
at its own length (`Request.max_length`, `</s>` banned before it): its source's length times a
ratio drawn from 0.8-1.25 (sources of 10-60 tokens, as the document workloads). Prints one JSON
object: sentences a second and steps for each share, timed in turn in one process.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch

from bench import add_out_argument, emit
from bench.__main__ import EOS, SHAPES, TARGET_LANG, random_model, sentence
from dragoman.engine.decoding import DecodingOptions
from dragoman.engine.generator import Generator, Request

BANNED = 1000  # min_new_tokens past every cap: `</s>` never ends a sentence before its cap


def natural_length(source: list[int], rng: random.Random) -> int:
    """New tokens of a sentence's translation: its source's length times 0.8-1.25 (from `rng`), at least 3."""
    return max(3, round(len(source) * rng.uniform(0.8, 1.25)))


def natural_lengths(sources: list[list[int]], rng: random.Random) -> list[int]:
    return [natural_length(source, rng) for source in sources]


def requests(sources: list[list[int]], lengths: list[int], beams: int) -> list[Request]:
    options = DecodingOptions(num_beams=beams, min_new_tokens=BANNED, max_new_tokens=max(lengths))
    return [Request(source, [EOS, TARGET_LANG], options, max_length=1 + n) for source, n in zip(sources, lengths)]


def measure(generator: Generator, sources: list[list[int]], lengths: list[int], beams: int, shares: list[float],
            rounds: int) -> dict[float, tuple[float, int]]:
    """Each share's (median seconds, steps) over `rounds` runs of the sentences, shares in turn."""
    device = generator.model.device
    launch = generator.runner.launch
    steps = [0]

    def counted(groups):
        steps[0] += 1
        return launch(groups)

    generator.runner.launch = counted  # one more Python call a step: the same for every share

    def timed(share: float) -> tuple[float, int]:
        generator.admit_share = share
        steps[0] = 0
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        batch = requests(sources, lengths, beams)
        generator.run(batch)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        assert all(len(r.result) == 1 + n for r, n in zip(batch, lengths)), "a sentence ended before its cap"
        return time.perf_counter() - start, steps[0]

    try:
        for share in shares:  # warm-up: kernels compiled, graphs captured
            timed(share)
        runs = {share: [] for share in shares}
        for _ in range(rounds):  # alternating, so that every share sees the same machine
            for share in shares:
                runs[share].append(timed(share))
    finally:
        del generator.runner.launch  # the class's again
    return {share: (statistics.median(t for t, _ in times), times[0][1]) for share, times in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.natural")
    parser.add_argument("--size", choices=SHAPES, default="600M")
    parser.add_argument("--beams", type=int, default=4)
    parser.add_argument("--sentences", type=int, default=2048)
    parser.add_argument("--shares", type=float, nargs="+", default=[0.0, 0.25, 1.0],
                        help="admit_share values to compare (0: admit as soon as a sentence fits; 1: drain)")
    parser.add_argument("--rounds", type=int, default=3, help="timed runs of each share (median)")
    add_out_argument(parser)
    args = parser.parse_args()

    device = torch.device("cuda")
    generator = Generator.build(random_model(args.size, device, torch.bfloat16))
    rng = random.Random(1)
    sources = [sentence(rng.randint(10, 60), rng) for _ in range(args.sentences)]
    lengths = natural_lengths(sources, rng)
    results = measure(generator, sources, lengths, args.beams, args.shares, args.rounds)
    out = {"size": args.size, "device": torch.cuda.get_device_name(device), "beams": args.beams,
           "sentences": len(sources), "max_rows": generator.max_rows,
           "new_tokens_mean": statistics.mean(lengths), "new_tokens_max": max(lengths)}
    for share, (seconds, steps) in results.items():
        out[f"share_{share:g}_sent_per_s"] = len(sources) / seconds
        out[f"share_{share:g}_steps"] = steps
    emit(out, f"natural_{args.size}_beam{args.beams}", device, args.out)


if __name__ == "__main__":
    main()
