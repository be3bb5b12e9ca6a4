"""What scores and alternatives cost beside plain decoding: `python -m bench.scores --size 600M`.

The workloads of DESIGN.md on the random bf16 model, each run with every sentence asking for
nothing (alternatives 0: `translate`), for its score (1: `translate_full`) and, with beams, for 4
hypotheses; prints the interactive latency and the documents' sentences/s of each, the median of
`--repeats` timed runs after two warm-ups. Every run must give the plain run's tokens.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch

from bench import add_out_argument, emit
from bench.__main__ import EOS, SHAPES, TARGET_LANG, random_model, sentence, workload
from dragoman.engine.decoding import DecodingOptions
from dragoman.engine.generator import Generator, Request


def run(generator: Generator, sources: list[list[int]], beams: int, new_tokens: int, alternatives: int) -> list[Request]:
    options = DecodingOptions(num_beams=beams, min_new_tokens=new_tokens, max_new_tokens=new_tokens)
    priority = 0 if len(sources) == 1 else 1  # one sentence: typed text
    requests = [Request(src, [EOS, TARGET_LANG], options, priority, alternatives=alternatives) for src in sources]
    generator.run(requests)
    return requests


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.scores")
    parser.add_argument("--size", choices=SHAPES, default="600M")
    parser.add_argument("--sentences", type=int, default=512, help="sentences of the document workloads")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each (median; 10 for interactive)")
    add_out_argument(parser)
    args = parser.parse_args()
    device = torch.device("cuda")
    generator = Generator.build(random_model(args.size, device, torch.bfloat16))
    rng = random.Random(1)
    typed = [sentence(32, rng)]
    document, _, _ = workload("document", args.sentences, rng)
    out = {"size": args.size}
    for name, sources, beams, new_tokens, asked, repeats in [
        ("interactive_beam4", typed, 4, 32, (0, 1, 4), max(10, args.repeats)),
        ("document_beam4", document, 4, 40, (0, 1, 4), args.repeats),
        ("document_greedy", document, 1, 40, (0, 1), args.repeats),
    ]:
        plain = [r.result for r in run(generator, sources, beams, new_tokens, 0)]
        for alternatives in asked:
            requests = run(generator, sources, beams, new_tokens, alternatives)  # warm-up
            assert [r.result for r in requests] == plain, (name, alternatives)
            assert all(len(r.hypotheses or []) == alternatives for r in requests), (name, alternatives)
            times = []
            for _ in range(repeats):
                torch.cuda.synchronize(device)
                start = time.perf_counter()
                run(generator, sources, beams, new_tokens, alternatives)
                torch.cuda.synchronize(device)
                times.append(time.perf_counter() - start)
            seconds = statistics.median(times)
            if len(sources) == 1:
                out[f"{name}_alternatives{alternatives}_ms"] = seconds * 1e3
            else:
                out[f"{name}_alternatives{alternatives}_sent_per_s"] = len(sources) / seconds
    emit(out, f"scores_{args.size}", device, args.out)


if __name__ == "__main__":
    main()
