"""What judging doubts on a thread of their own (app/session/confidence.py `DoubtsAlongside`) costs
the engine's thread: `python -m bench.doubts_alongside`.

The engine's thread is stood in for by a loop of `--steps` steps, each a little Python (~15 µs)
and a wait that lets go of the interpreter as a wait on the device does (`--wait-ms`, a document
step's few milliseconds). It runs alone, then beside a `DoubtsAlongside` judging `--sentences`
translations; a thread that holds the interpreter makes the loop wait up to Python's switch
interval each time it comes back from waiting (`--switch-interval-ms`: 0.5, as the engine's loop
sets it, engine/translator.py GIL_SWITCH_S; Python's own is 5). Prints both times and their ratio,
the median of `--repeats` runs each, alternated. No model and no GPU: the contention is the host's.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import threading
import time

import dragoman  # noqa: F401  (the checkout guard)
from bench import add_out_argument, emit
from dragoman.app.session.confidence import DoubtsAlongside, doubts

WORDS = "the quick brown fox jumps over a lazy dog while numbers 12 and 1999 appear in the text".split()


def loop_seconds(steps: int, wait: float, judged: list[tuple[str, str]] | None) -> float:
    """The stand-in loop's seconds, with `judged` judged alongside meanwhile (None: alone)."""
    took: list[float] = []

    def engine() -> None:
        start = time.perf_counter()
        for _ in range(steps):
            sum(range(300))  # the step's own Python
            time.sleep(wait)  # waiting on the device, the interpreter let go
        took.append(time.perf_counter() - start)

    thread = threading.Thread(target=engine)
    thread.start()
    if judged is not None:
        judge = DoubtsAlongside("eng_Latn", "fra_Latn")
        for sentence, translation in judged:
            judge.add(sentence, translation, -0.5)
        judge.close()
    thread.join()
    return took[0]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.doubts_alongside")
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--wait-ms", type=float, default=3.0)
    parser.add_argument("--sentences", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--switch-interval-ms", type=float, default=0.5)
    add_out_argument(parser)
    args = parser.parse_args()
    sys.setswitchinterval(args.switch_interval_ms / 1e3)
    rng = random.Random(1)
    judged = [(" ".join(rng.choices(WORDS, k=20)) + ".", " ".join(rng.choices(WORDS, k=22)) + ".")
              for _ in range(args.sentences)]
    doubts(*judged[0], "eng_Latn", "fra_Latn", -0.5)  # the language detector's model read
    alone, beside = [], []
    for _ in range(args.repeats):
        alone.append(loop_seconds(args.steps, args.wait_ms / 1e3, None))
        beside.append(loop_seconds(args.steps, args.wait_ms / 1e3, judged))
    out = {"steps": args.steps, "wait_ms": args.wait_ms, "sentences": args.sentences,
           "switch_interval_ms": args.switch_interval_ms,
           "alone_s": statistics.median(alone), "beside_doubts_s": statistics.median(beside)}
    out["ratio"] = out["beside_doubts_s"] / out["alone_s"]
    emit(out, "doubts_alongside", None, args.out)


if __name__ == "__main__":
    main()
