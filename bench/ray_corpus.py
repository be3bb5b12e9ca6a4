"""One engine through Ray against the same engine without it, on one corpus, in one run:
`python -m bench.ray_corpus [--checkpoint DIR] [--size 600M] [--device cuda] [--sentences 8192]
[--beams 4] [--shard-size 1024] [--rounds 2]`.

A JSON Lines corpus of distinct sentences of made-up words (bench.documents') is translated by
`app.corpus.run.run_corpus` twice a round: on this process's engine (`LocalShards`), and on one Ray
actor of a local cluster started here (`app.cluster.WorkerPool`, --workers 1) holding an engine of
the same checkpoint on the same device. Both write every shard, through the same translation pipeline,
each with translation memory of its own (empty). Every translation is forced to 40 tokens. The
engines load, and warm up with one untimed run each, before the timed rounds (alternating, the
median kept). Prints one JSON object: both rates and Ray's overhead in percent.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch

from bench import add_out_argument, emit
from bench.__main__ import SHAPES
from bench.checkpoint import checkpoint_in
from bench.documents import NEW_TOKENS, document_sentences


class Quiet:
    """Where RunProgress writes: nowhere (not a terminal)."""

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> None:
        pass

    def flush(self) -> None:
        pass


def main() -> None:
    import ray

    from dragoman.app.cluster import WorkerPool, WorkerSpec
    from dragoman.app.corpus.progress import RunProgress
    from dragoman.app.corpus.run import CorpusFile, CorpusRequest, LocalShards, run_corpus
    from dragoman.app.session.session import TranslationSession
    from dragoman.app.settings import AppPaths
    from dragoman.engine import Translator

    parser = argparse.ArgumentParser(prog="python -m bench.ray_corpus")
    parser.add_argument("--size", choices=SHAPES, default="600M")
    parser.add_argument("--checkpoint", type=Path, help="a bench.checkpoint folder to reuse (written if missing)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--sentences", type=int, default=8192)
    parser.add_argument("--beams", type=int, default=4)
    parser.add_argument("--shard-size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=2, help="timed runs of each path (median)")
    add_out_argument(parser)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="dragoman-bench-"))
    checkpoint = checkpoint_in(args.checkpoint, work, args.size)
    corpus = work / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": s}) + "\n" for s in document_sentences(args.sentences)),
                      encoding="utf-8")
    forced = {"num_beams": args.beams, "min_new_tokens": NEW_TOKENS, "max_new_tokens": NEW_TOKENS}
    request = CorpusRequest("eng_Latn", ("fra_Latn",), forced)

    def stores(name: str) -> AppPaths:
        return AppPaths.under(work / name)

    translator = Translator(checkpoint, device=args.device)
    pipeline = TranslationSession.open(translator, stores("local"))
    ray.init(include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    pool = WorkerPool(WorkerSpec(str(checkpoint), paths=stores("ray")), args.device, None, workers=1)

    def timed(shards, name: str) -> float:
        files = [CorpusFile(corpus, "text", request, args.shard_size, work / name)]
        if translator.device.type == "cuda":
            torch.cuda.synchronize(translator.device)
        start = time.perf_counter()
        run_corpus(files, shards, RunProgress(Quiet()), overwrite=True)  # the actor's work ends with its results
        if translator.device.type == "cuda":
            torch.cuda.synchronize(translator.device)
        return time.perf_counter() - start

    paths = {"local": LocalShards(pipeline), "ray": pool}
    try:
        for name, shards in paths.items():  # warm-up: kernels compiled, graphs captured
            timed(shards, name)
        seconds: dict[str, list[float]] = {name: [] for name in paths}
        for _ in range(args.rounds):  # alternating, so that both see the same machine
            for name, shards in paths.items():
                seconds[name].append(timed(shards, name))
    finally:
        pool.close()
        pipeline.close()
    out = {"checkpoint": str(args.checkpoint) if args.checkpoint else f"random {args.size}", "device": translator.describe(), "beams": args.beams, "sentences": args.sentences,
           "shard_size": args.shard_size, "new_tokens": NEW_TOKENS}
    for name, times in seconds.items():
        out[f"{name}_sent_per_s"] = args.sentences / statistics.median(times)
    out["ray_overhead_percent"] = 100 * (1 - out["ray_sent_per_s"] / out["local_sent_per_s"])
    emit(out, f"ray_corpus_{checkpoint.name}_beam{args.beams}", translator.device, args.out)


if __name__ == "__main__":
    main()
