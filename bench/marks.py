"""When each part of a run starts and ends, on the host and on the GPU:
`python -m bench.marks --size 600M --workload greedy|document|interactive [--batch 512]`.

Wraps the generator's parts (admission, encoder, row set-up, each step's launch and finish) so
that every call records the host's clock and, on the GPU, an event on the current stream, at its
entry and exit. The GPU column says when the device got there; where it trails the host, the host
is ahead; where it equals the host's, the device had caught up and was waiting for the host.

Caveat: each mark costs the host an event created and recorded, so marks inflate the host's share
of a part that makes many calls; confirm a host-side saving by timing unmarked runs of both before
claiming it.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field

import torch

from bench.__main__ import add_workload_arguments, prepared, run
from dragoman.engine import admission
from dragoman.engine.generator import Generator


@dataclass
class Marks:
    """Records each call of the given methods (an object and a method name each) while active."""

    targets: list[tuple[object, str]]
    records: list[tuple[str, float, torch.cuda.Event | None]] = field(default_factory=list)
    _saved: list[tuple[object, str, object]] = field(default_factory=list)

    def mark(self, label: str) -> None:
        event = None
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            event = torch.cuda.Event(enable_timing=True)
            event.record()
        self.records.append((label, time.perf_counter(), event))

    def __enter__(self) -> "Marks":
        for owner, name in self.targets:
            method = getattr(owner, name)
            self._saved.append((owner, name, owner.__dict__.get(name)))
            setattr(owner, name, self._marked(name, method))
        return self

    def __exit__(self, *exc) -> None:
        for owner, name, before in reversed(self._saved):
            if before is None:
                delattr(owner, name)  # the class's method shows through again
            else:
                setattr(owner, name, before)
        self._saved.clear()

    def _marked(self, name: str, method):
        def marked(*args, **kwargs):
            self.mark(f"{name} in")
            try:
                return method(*args, **kwargs)
            finally:
                self.mark(f"{name} out")

        return marked

    def timeline(self) -> list[tuple[str, float, float | None]]:
        """(label, host ms, GPU ms) of each record, from the first; the GPU's None off the GPU.
        Call it once the device has finished (the events must have passed)."""
        if not self.records:
            return []
        _, host0, event0 = self.records[0]
        return [
            (label, (host - host0) * 1e3, event0.elapsed_time(event) if event0 is not None and event is not None else None)
            for label, host, event in self.records
        ]


def generator_parts(generator: Generator) -> list[tuple[object, str]]:
    """The parts worth marking in a run: admission and its pieces, and each step's launch and finish."""
    parts = [(generator, "_admit"), (admission, "encode_sources"), (admission, "admit_rows")]
    parts += [(generator.runner, name) for name in ("run_rows", "launch", "finish")]
    parts += [(generator.model, name) for name in ("encode", "write_cross_kv")]
    return parts


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.marks")
    add_workload_arguments(parser, workload="greedy", batch=512)
    parser.add_argument("--steps", type=int, default=6, help="steps to print after admission (and the last few)")
    args = parser.parse_args()

    generator, sources, beams, new_tokens = prepared(args, warm_ups=2)
    with Marks(generator_parts(generator)) as marks:
        run(generator, sources, beams, new_tokens)
    torch.cuda.synchronize()
    timeline = marks.timeline()
    first_launch = next(i for i, (label, _, _) in enumerate(timeline) if label == "launch in")
    per_step = 6 * args.steps  # records: _admit, launch and finish, in and out
    shown = timeline[: first_launch + per_step] + [("...", float("nan"), None)] + timeline[-per_step:]
    print(f"{args.workload} {args.size}: host and GPU ms from the run's first mark")
    for label, host, gpu in shown:
        print(f"  host {host:8.2f}  gpu {'' if gpu is None else f'{gpu:8.2f}':>8}  {label}")


if __name__ == "__main__":
    main()
