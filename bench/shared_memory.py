"""The shared memory of every Triton kernel compiled so far in this process, against the GPU's profile
(kernels/gpu_profile.py): what a card of that profile would refuse to launch. The GPU tests check
it after their runs (tests/engine/test_cuda.py), and `python -m bench` reports it with its figures.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Compiled:
    kernel: str  # module.function
    shared: int  # bytes of shared memory a block takes
    num_warps: int
    num_stages: int


def compiled_kernels() -> list[Compiled]:
    """Every variant of every kernel of the `kernels` package compiled in this process."""
    from triton.runtime.jit import JITFunction

    found = []
    for name, module in list(sys.modules.items()):
        if not (name == "dragoman.kernels" or name.startswith("dragoman.kernels.")) or module is None:
            continue
        for attribute, fn in vars(module).items():
            if not isinstance(fn, JITFunction) or getattr(fn, "module", None) != name:
                continue
            for caches in fn.device_caches.values():
                for kernel in caches[0].values():  # (compiled kernels by key, target, backend, binder...)
                    md = kernel.metadata
                    found.append(Compiled(f"{name}.{attribute}", md.shared, md.num_warps, md.num_stages))
    return found


def over_limit(limit: int) -> list[Compiled]:
    return [c for c in compiled_kernels() if c.shared > limit]


def report(limit: int) -> str:
    """One line per kernel: its variants' largest shared memory, and how many variants exceed `limit`."""
    largest: dict[str, list[Compiled]] = {}
    for c in compiled_kernels():
        largest.setdefault(c.kernel, []).append(c)
    lines = []
    for kernel, variants in sorted(largest.items()):
        top = max(variants, key=lambda c: c.shared)
        over = sum(c.shared > limit for c in variants)
        lines.append(f"{kernel:58s} {len(variants):3d} variants, largest {top.shared:7d} B "
                     f"(warps {top.num_warps}, stages {top.num_stages}){f', {over} OVER' if over else ''}")
    return "\n".join(lines)
