"""GPU time of a typed sentence's pieces: `python -m bench.steps --size 600M`.

Runs the interactive workload (one 32-token sentence, beam 4, 32 tokens) to capture its graphs,
then replays each captured graph alone and prints its GPU time per replay: the decode step with
the search (what every step runs), the decode step with and without the output projection, and
the one-row prefix step. Also times admission's pieces with the device synchronised around them.
Replays advance the rows' lengths, so a replay reads a few more cached tokens than a real step.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from bench.__main__ import run, timed, typed_generator
from dragoman.engine import admission


def replay_us(graph: torch.cuda.CUDAGraph, replays: int = 40) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    graph.replay()
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / replays


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.steps")
    parser.add_argument("--size", default="600M")
    args = parser.parse_args()
    device = torch.device("cuda")
    generator, source = typed_generator(args.size)
    whole = statistics.median(timed(generator, device, source, 4, 32) for _ in range(7))

    # Admission's pieces, each with the device drained before and after it.
    spent: dict[str, list[float]] = {}
    for name in ("encode_sources", "admit_rows"):
        unwrapped = getattr(admission, name)

        def synchronised(*a, unwrapped=unwrapped, name=name, **k):
            torch.cuda.synchronize()
            start = time.perf_counter()
            out = unwrapped(*a, **k)
            torch.cuda.synchronize()
            spent.setdefault(name, []).append(time.perf_counter() - start)
            return out

        setattr(admission, name, synchronised)
    for _ in range(5):
        run(generator, source, 4, 32)
    print(f"{args.size} interactive {whole * 1e3:.1f} ms; admission (ms):",
          {name: round(statistics.median(times) * 1e3, 2) for name, times in spent.items()})

    # The decode step alone, with and without logits, for the four rows of a sentence in flight.
    rows = torch.arange(4, device=device)
    generator.rows.kv_len[:4] = 20
    generator.rows.cross_len[:4] = 32
    for with_logits in (True, False):
        generator.runner.run_rows(rows, with_lora=False, with_logits=with_logits, group=4)
    for key, (graph, _) in generator.runner.graphs.graphs.items():
        rows_in_graph, with_lora, *what = key
        label = "decode + search" if len(what) == 1 else ("decode" if what[0] else "decode, no logits") + f", group {what[1]}"
        print(f"  {rows_in_graph} rows, {label}: {replay_us(graph):.1f} us per replay")


if __name__ == "__main__":
    main()
