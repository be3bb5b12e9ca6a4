"""The host's time in the calls on a typed sentence's path to its first step, in place:
`python -m bench.host --size 600M` (CUDA).

Runs the interactive workload (one 32-token sentence, beam 4, 32 tokens) to capture its graphs,
then 20 more with a plain timer around each call below (no events, no sync), and prints each
call's median host µs and how often a run makes it. Why in place: code that runs once a request
finds the host's caches cold after the steps, and costs several times what it costs in a loop.
The host's work between the typed sentence's encoder launch and the first step's is what the first
step waits for once it takes longer than the encoder takes on the GPU.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import dragoman.engine.admission as admission
import dragoman.engine.cuda_graphs as cuda_graphs
import dragoman.engine.step_runner as step_runner
from dragoman import kernels
from bench.__main__ import run, typed_generator


def timed_calls(owner: object, name: str, label: str, spent: dict[str, list[float]]) -> None:
    """Wrap owner.name so that each call adds its host seconds to spent[label]."""
    call = getattr(owner, name)

    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            spent.setdefault(label, []).append(time.perf_counter() - start)

    setattr(owner, name, timed)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.host")
    parser.add_argument("--size", default="600M")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    generator, source = typed_generator(args.size)

    spent: dict[str, list[float]] = {}
    for owner, name, label in [
        (admission, "encode_sources", "encode_sources"),
        (admission, "admit_rows", "admit_rows"),
        (generator.runner, "launch", "launch"),
        (generator.runner, "finish", "finish (waits for the step)"),
        (kernels, "admit_rows", "  admit_rows' launch"),
        (admission, "to_device", "  to_device"),
        (admission, "to_device_many", "  to_device_many"),
        (step_runner, "to_device_many", "  to_device_many (steps)"),
        (cuda_graphs, "copy_to_device", "  copy_to_device"),
        (cuda_graphs, "copy_many_to_device", "  copy_many_to_device"),
    ]:
        timed_calls(owner, name, label, spent)
    firsts = []
    for _ in range(args.runs):
        launched = len(spent.get("launch", []))
        run(generator, source, 4, 32)
        torch.cuda.synchronize()
        firsts.append(spent["launch"][launched])
    print(f"{args.size} typed sentence, host us in place (median of {args.runs} runs; calls a run):")
    for label, times in spent.items():
        print(f"  {label:<30} {statistics.median(times) * 1e6:8.1f}   x{len(times) // args.runs}")
    print(f"  {'the first launch of a run':<30} {statistics.median(firsts) * 1e6:8.1f}")


if __name__ == "__main__":
    main()
