"""Where a workload's time goes on the GPU: `python -m bench.profile --size 600M --workload document --batch 256`.

Runs the workload once to warm up (graphs captured, kernels compiled), then once under
torch.profiler (with `--constraints C`, every `--every`-th sentence constrained by C random
two-token terms, as bench.constraints: where a constrained step's time goes), and prints the wall time, the GPU's busy time and the top operations by GPU time;
then each kernel's share of the device's time line (`incremental_costs`), which is what to read
for chained kernels: a chained kernel starts while the one before runs and waits for it, so its
own duration counts that wait too.
"""

from __future__ import annotations

import argparse
import random
import time

import torch
from torch.profiler import ProfilerActivity, profile

from bench.__main__ import EOS, TARGET_LANG, add_workload_arguments, prepared
from dragoman.engine.decoding import DecodingOptions
from dragoman.engine.generator import Generator, Request


def incremental_costs(kernels: list[tuple[str, float, float]]) -> tuple[dict[str, tuple[float, int]], float]:
    """kernels: (name, start, end) of every kernel of one stream. Charges each kernel, in order of
    their ends, with its end minus the later of its start and the end of the kernel before: what
    it adds to the time line. Returns {name: (charged time, count)} and the idle time between
    kernels (none of them running), both in the unit of the times given."""
    costs: dict[str, tuple[float, int]] = {}
    idle = 0.0
    ordered = sorted(kernels, key=lambda kernel: kernel[2])
    last_end = ordered[0][1] if ordered else 0.0
    for name, start, end in ordered:
        if start > last_end:
            idle += start - last_end
        added = end - max(start, last_end)
        total, count = costs.get(name, (0.0, 0))
        costs[name] = (total + added, count + 1)
        last_end = end
    return costs, idle


def constrained_run(generator: Generator, sources: list[list[int]], beams: int, new_tokens: int, constraints: int,
                    every: int) -> None:
    """bench's `run`, every `every`-th sentence constrained by `constraints` random two-token terms."""
    rng = random.Random(2)
    options = DecodingOptions(num_beams=beams, min_new_tokens=new_tokens, max_new_tokens=new_tokens)
    generator.run([Request(source, [EOS, TARGET_LANG], options,
                           constraints=[[rng.randrange(4, 256000) for _ in range(2)] for _ in range(constraints)]
                           if constraints and i % every == 0 else None)
                   for i, source in enumerate(sources)])


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.profile")
    add_workload_arguments(parser, workload="document", batch=256)
    parser.add_argument("--rows", type=int, default=20, help="operations to list")
    parser.add_argument("--constraints", type=int, default=0, help="random two-token terms of a constrained sentence")
    parser.add_argument("--every", type=int, default=1, help="every this many sentences one is constrained")
    args = parser.parse_args()

    generator, sources, beams, new_tokens = prepared(args, warm_ups=0)
    for _ in range(2):  # kernels compiled, then graphs captured (a key's second use)
        constrained_run(generator, sources, beams, new_tokens, args.constraints, args.every)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        start = time.perf_counter()
        constrained_run(generator, sources, beams, new_tokens, args.constraints, args.every)
        torch.cuda.synchronize()
        wall = time.perf_counter() - start
    events = prof.key_averages()
    busy = sum(e.self_device_time_total for e in events) / 1e3
    constrained = f", {args.constraints} terms in every {args.every}" if args.constraints else ""
    print(f"{args.workload} {args.size} batch {len(sources)}{constrained}: wall {wall * 1e3:.1f} ms (under the profiler), "
          f"GPU busy {busy:.1f} ms, {len(sources) / wall:.0f} sentences/s")
    print(events.table(sort_by="self_device_time_total", row_limit=args.rows, max_name_column_width=60))
    print(events.table(sort_by="self_cpu_time_total", row_limit=args.rows, max_name_column_width=60))
    kernels = [(e.name, e.time_range.start, e.time_range.end) for e in prof.events()
               if e.device_type == torch.autograd.DeviceType.CUDA]  # times in us
    costs, idle = incremental_costs(kernels)
    print(f"Each kernel's share of the time line (us): idle between kernels {idle / 1e3:.2f} ms")
    for name, (total, count) in sorted(costs.items(), key=lambda item: -item[1][0])[: args.rows]:
        print(f"{total / 1e3:9.3f} ms {count:7d} x {total / count:8.2f} us  {name[:90]}")


if __name__ == "__main__":
    main()
