"""Where a workload's time goes on the GPU: `python -m bench.profile --size 600M --workload document --batch 256`.

Runs the workload once to warm up (graphs captured, kernels compiled), then once under
torch.profiler, and prints the wall time, the GPU's busy time and the top operations by GPU time.
"""

from __future__ import annotations

import argparse
import random
import time

import torch
from torch.profiler import ProfilerActivity, profile

from bench.__main__ import random_model, run, sentence
from engine.generator import Generator


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.profile")
    parser.add_argument("--size", default="600M")
    parser.add_argument("--workload", choices=["interactive", "document", "greedy"], default="document")
    parser.add_argument("--batch", type=int, default=256, help="sentences of the document workloads")
    parser.add_argument("--rows", type=int, default=20, help="operations to list")
    args = parser.parse_args()

    device = torch.device("cuda")
    generator = Generator.build(random_model(args.size, device, torch.bfloat16))
    rng = random.Random(1)
    if args.workload == "interactive":
        sources, beams, new_tokens = [sentence(32, rng)], 4, 32
    else:
        sources = [sentence(rng.randint(10, 60), rng) for _ in range(args.batch)]
        beams, new_tokens = (4 if args.workload == "document" else 1), 40
    run(generator, sources, beams, new_tokens)  # warm-up
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        start = time.perf_counter()
        run(generator, sources, beams, new_tokens)
        torch.cuda.synchronize()
        wall = time.perf_counter() - start
    events = prof.key_averages()
    busy = sum(e.self_device_time_total for e in events) / 1e3
    print(f"{args.workload} {args.size} batch {len(sources)}: wall {wall * 1e3:.1f} ms (under the profiler), "
          f"GPU busy {busy:.1f} ms, {len(sources) / wall:.0f} sentences/s")
    print(events.table(sort_by="self_device_time_total", row_limit=args.rows, max_name_column_width=60))
    print(events.table(sort_by="self_cpu_time_total", row_limit=args.rows, max_name_column_width=60))


if __name__ == "__main__":
    main()
