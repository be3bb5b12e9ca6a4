"""The benchmark harness (see __main__.py); `emit` is how each of its scripts reports."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Callable

import dragoman  # noqa: F401  first: the checkout's folders must not shadow installed packages (PyPI's `kernels`)


# A step key's first use runs eagerly and its second captures its graph (engine/cuda_graphs.py): two
# warm-up runs, so that no timed run captures.
GRAPH_WARM_UPS = 2


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
