"""The benchmark harness (see __main__.py); `emit` is how each of its scripts reports."""

from __future__ import annotations

import json
import os

import torch


def emit(out: dict, name: str, device: torch.device) -> None:
    """Print the results as one JSON object (with the GPU's peak memory) and keep them as $OUT/NAME.json
    when $OUT is set, as on the device machine."""
    if device.type == "cuda":
        out["max_mem_GB"] = torch.cuda.max_memory_allocated(device) / 1e9
        out["max_reserved_GB"] = torch.cuda.max_memory_reserved(device) / 1e9  # what the process held at most
    print(json.dumps(out, indent=1))
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], f"{name}.json"), "w") as f:
            json.dump(out, f, indent=1)
