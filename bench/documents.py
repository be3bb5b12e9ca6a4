"""A document through the app's whole path against the engine alone on the same sentences:
`python -m bench.documents [--size 600M] [--beams 4] [--sentences 8192] [--rounds 2]
[--checkpoint DIR] [--cache] [--natural]`.

`python -m bench` times the engine on sentences tokenized beforehand; a user's document also goes
through reading and splitting, the translation cache, tokenizing, decoding and writing on the
host. This writes a .txt of distinct sentences of made-up words, translates it with
`app.session.session.TranslationSession.translate_document` (with --cache through a new translation cache each round, as the app's
jobs are; without, none: every round translates every sentence either way) and with
`Generator.run` over the same sentences, and prints one JSON object with both rates. Every
translation is forced to 40 tokens, or with --natural capped at its own length as in
`bench.natural` (the source's length times 0.8-1.25, `</s>` banned before it), so that sentences
finish a few at a time as real ones do. The checkpoint is `bench.checkpoint`'s random one of that
shape (NLLB's 256,206-row vocabulary), written to a temporary folder unless --checkpoint names one
to reuse.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import random
import statistics
import tempfile
import time
from pathlib import Path

import torch

from bench import add_out_argument, emit, natural, warm_up
from bench.__main__ import SHAPES
from bench.checkpoint import checkpoint_in

NEW_TOKENS = 40  # as the document workloads of DESIGN.md


def natural_length(source: list[int]) -> int:
    """New tokens of a sentence's translation with --natural: bench.natural's, the ratio drawn from
    the source itself so that the app's path and the engine's agree."""
    return natural.natural_length(source, random.Random(hash(tuple(source))))


def document_sentences(count: int, seed: int = 0) -> list[str]:
    """`count` distinct sentences of 4-10 made-up lowercase words (~29 tokens each with the
    checkpoint's sentencepiece model), capitalised and ending with a full stop."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 9))) for _ in range(5000)]
    sentences: dict[str, None] = {}
    while len(sentences) < count:
        sentences[" ".join(rng.choice(words) for _ in range(rng.randint(4, 10))).capitalize() + "."] = None
    return list(sentences)


def capped_request(request_type, source: list[int], *args, **kwargs):
    """request_type(source, ...) capped at the source's natural length (1 + new tokens: the prefix's `</s>`)."""
    return request_type(source, *args, max_length=1 + natural_length(source), **kwargs)


def main() -> None:
    from dragoman.app.session.jobs import DocumentJob  # the app's side, only where it is measured
    from dragoman.app.session.session import TranslationSession
    import dragoman.engine.translator as translator_module
    from dragoman.engine.generator import Request
    from dragoman.engine.translation_cache import TranslationCache
    from dragoman.engine.translator import Translator

    parser = argparse.ArgumentParser(prog="python -m bench.documents")
    parser.add_argument("--size", choices=SHAPES, default="600M")
    parser.add_argument("--beams", type=int, default=4)
    parser.add_argument("--sentences", type=int, default=8192)
    parser.add_argument("--rounds", type=int, default=2, help="timed runs of each path (median)")
    parser.add_argument("--checkpoint", type=Path, help="a bench.checkpoint folder to reuse (written if missing)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--cache", action="store_true", help="store translations in a new translation cache each round")
    parser.add_argument("--natural", action="store_true", help="each translation capped at its own length, not 40")
    add_out_argument(parser)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="dragoman-bench-"))
    checkpoint = checkpoint_in(args.checkpoint, work, args.size)
    sentences = document_sentences(args.sentences)
    document = work / "document.txt"
    document.write_text("\n".join(sentences) + "\n", encoding="utf-8")

    translator = Translator(checkpoint, device=args.device)
    sources = [translator.tokenizer.encode_source(s, "eng_Latn") for s in sentences]
    forced = {"num_beams": args.beams, "min_new_tokens": NEW_TOKENS, "max_new_tokens": NEW_TOKENS}
    make_request = Request
    if args.natural:
        # `</s>` banned throughout, each request capped: the requests the app's translator makes too.
        forced.update(min_new_tokens=natural.BANNED, max_new_tokens=max(natural_length(s) for s in sources))
        make_request = translator_module.Request = functools.partial(capped_request, Request)
    job = DocumentJob(document, work / "translated.txt", "eng_Latn", "fra_Latn", options=forced, overwrite=True)
    options = translator.default_options(**forced)
    prefix = translator.tokenizer.decoder_prefix("fra_Latn")
    device = translator.device

    rounds = itertools.count()

    def app() -> None:
        cache = TranslationCache(work / f"cache-{next(rounds)}.sqlite3") if args.cache else None
        TranslationSession(translator, cache).translate_document(job)
        if cache is not None:
            cache.close()

    def engine() -> None:
        translator.generator.run([make_request(source, prefix, options) for source in sources])

    def timed(path) -> float:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        path()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter() - start

    warm_up(translator.generator.runner, lambda: (app(), engine()))  # kernels compiled, graphs captured
    seconds = {"app": [], "engine": []}
    for _ in range(args.rounds):  # alternating, so that both see the same machine
        seconds["app"].append(timed(app))
        seconds["engine"].append(timed(engine))
    out = {"size": args.size, "device": translator.describe(), "beams": args.beams, "sentences": len(sentences),
           "cache": args.cache,
           "source_tokens_mean": statistics.mean(len(s) for s in sources),
           "new_tokens": "natural" if args.natural else NEW_TOKENS}
    for path, times in seconds.items():
        out[f"{path}_sent_per_s"] = len(sentences) / statistics.median(times)
    emit(out, f"documents_{args.size}_beam{args.beams}", device, args.out)


if __name__ == "__main__":
    main()
