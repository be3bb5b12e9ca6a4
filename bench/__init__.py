"""The benchmark harness (see __main__.py); `emit` is how each of its scripts reports."""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Callable

import dragoman  # noqa: F401  first: the checkout's folders must not shadow installed packages (PyPI's `kernels`)


# Warm-up runs at most: until a run meets no step key it had not met (`warm_up`).
MOST_WARM_UPS = 6


def graph_keys(runner) -> int:
    """The step keys a StepRunner's CUDA graphs have met: run eagerly once, or captured (a key's
    first use runs eagerly and its second captures, engine/cuda_graphs.py). 0 without graphs."""
    sets = (runner.graphs, runner.encoder_graphs, runner.admission_graphs)
    return sum(len(s.seen) + len(s.graphs) for s in sets if s is not None)


def warm_up(runner, work: Callable[[], object]) -> int:
    """Run `work` until a run meets no new step key, so that no timed run runs a step eagerly for
    a key's first use or captures its graph (a capture costs more than many steps): a key holds
    the step's parity, which a run of an odd number of steps turns for the next. Returns the runs."""
    for runs in range(1, MOST_WARM_UPS + 1):
        before = graph_keys(runner)
        work()
        if graph_keys(runner) == before:
            break
    return runs


def keys_met_in(runner, work: Callable[[], float]) -> tuple[float, int]:
    """`work()`'s result, and the step keys it met first (each a step run eagerly or a capture)."""
    before = graph_keys(runner)
    result = work()
    return result, graph_keys(runner) - before


def median_of_runs(runner, work: Callable[[], float], runs: int) -> tuple[float, int]:
    """The median of `runs` runs of `work` (each returning its seconds), and the step keys they
    met first: 0 where no timed run ran a step eagerly or captured one."""
    timings = [keys_met_in(runner, work) for _ in range(runs)]
    return statistics.median(seconds for seconds, _ in timings), sum(keys for _, keys in timings)


def add_out_argument(parser: argparse.ArgumentParser) -> None:
    """`--out DIR`: where a script keeps its results as JSON, besides printing them."""
    parser.add_argument("--out", type=Path, metavar="DIR", help="also write the results as JSON into this folder")


def seconds_of(work: Callable[[], object], device) -> float:
    """Seconds `work()` takes, what it queued on `device` (a torch.device) included."""
    start = time.perf_counter()
    work()
    if device.type == "cuda":
        import torch

        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def emit(out: dict, name: str, device, out_dir: Path | None) -> None:
    """Print the results as one JSON object (with the GPU's peak memory) and, with an `out_dir`,
    keep them as out_dir/NAME.json. `device`: a torch.device, or None where no engine ran."""
    if device is not None and device.type == "cuda":
        import torch  # here, so that scripts that only write files do without it

        out["max_mem_GB"] = torch.cuda.max_memory_allocated(device) / 1e9
        out["max_reserved_GB"] = torch.cuda.max_memory_reserved(device) / 1e9  # what the process held at most
    print(json.dumps(out, indent=1))
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / f"{name}.json").write_text(json.dumps(out, indent=1))
