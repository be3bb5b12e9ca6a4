"""What lexically constrained decoding costs beside plain decoding:
`python -m bench.constraints --checkpoint DIR --device cuda --out DIR`.

On a checkpoint folder (a real one, or `python -m bench.checkpoint --size 600M DIR`'s random one),
with the output length forced as in `python -m bench` (min = max new tokens, so that random
weights do the same work as real ones), measures:

- the document workload (sentences of 10-60 random source tokens, beam 4, 40 new tokens) with 0
  (plain decoding), 1 and 3 constraints a sentence, each of 2 random target tokens, and with 1
  constraint in every tenth sentence only (a document's few numbers, links and tags):
  sentences/s, the median of `--doc-repeats` runs after a warm-up;
- the interactive workload (one typed sentence of 32 source tokens, beam 4, 32 new tokens) plain
  and with a 2-term glossary (terms of 2 and 3 tokens): the median latency of `--repeats` runs.

Prints one JSON object and, with `--out DIR`, writes it to DIR/constraints.json.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

import torch

from bench import add_out_argument, emit, warm_up
from dragoman.engine import scheduler, step_runner
from dragoman.engine.decoding import DecodingOptions
from dragoman.engine.generator import Request
from dragoman.engine.translator import Translator

DOCUMENT = (4, 40)  # beams, new tokens
INTERACTIVE = (4, 32)
DOCUMENT_CONSTRAINTS = (0, 1, 3)  # a sentence
MIXED_EVERY = 10  # the mixed document: one constrained sentence in so many
GLOSSARY = (2, 3)  # the typed sentence's terms, in tokens
FIRST_LANGUAGE = "ace_Arab"  # the first language code's id follows the pieces': random tokens are below it


def workload_requests(translator: Translator, sources: list[list[int]], beams: int, new_tokens: int,
                      term_lengths: tuple[int, ...], priority: int, seed: int, every: int = 1) -> list[Request]:
    """One request per source, every `every`-th constrained by random target tokens of `term_lengths`."""
    rng = random.Random(seed)
    tok = translator.tokenizer
    first_language = tok.lang_id(FIRST_LANGUAGE)
    options = DecodingOptions(num_beams=beams, min_new_tokens=new_tokens, max_new_tokens=new_tokens)
    prefix = tok.decoder_prefix("fra_Latn")
    return [Request(source, prefix, options, priority,
                    constraints=[[rng.randrange(4, first_language) for _ in range(n)] for n in term_lengths]
                    if i % every == 0 and term_lengths else None)
            for i, source in enumerate(sources)]


def timed(translator: Translator, requests: list[Request]) -> float:
    device = translator.device
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    translator.generator.run(requests)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - start
    for r in requests:  # every constraint met, whatever the precision
        assert all(any(r.result[i : i + len(c)] == c for i in range(len(r.result))) for c in r.constraints or [])
    return seconds


def source(length: int, rng: random.Random, translator: Translator) -> list[int]:
    """[src_lang] random pieces </s>."""
    tok = translator.tokenizer
    first_language = tok.lang_id(FIRST_LANGUAGE)
    return [tok.lang_id("eng_Latn")] + [rng.randrange(4, first_language) for _ in range(length - 2)] + [tok.eos_id]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.constraints")
    parser.add_argument("--checkpoint", required=True, help="an NLLB checkpoint folder")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--sentences", type=int, default=512, help="sentences of the document workload")
    parser.add_argument("--doc-repeats", type=int, default=3, help="timed runs of each document workload (median)")
    parser.add_argument("--repeats", type=int, default=10, help="timed runs of the interactive workload (median)")
    parser.add_argument("--new-tokens", type=int, default=None,
                        help="new tokens of both workloads instead of DESIGN.md's (for a small model's positions)")
    parser.add_argument("--graphed-constrained-rows", type=int, default=step_runner.GRAPHED_CONSTRAINED_ROWS,
                        help="the most rows of a constrained group whose steps are CUDA graphs (step_runner's)")
    parser.add_argument("--kinds-together", action="store_true",
                        help="documents' plain and constrained sentences may share steps (scheduler.KINDS_APART off)")
    add_out_argument(parser)
    args = parser.parse_args(argv)
    step_runner.GRAPHED_CONSTRAINED_ROWS = args.graphed_constrained_rows
    scheduler.KINDS_APART = not args.kinds_together

    translator = Translator(args.checkpoint, device=args.device, dtype=args.dtype)
    rng = random.Random(1)
    document = [source(rng.randint(10, 60), rng, translator) for _ in range(args.sentences)]
    typed = [source(32, rng, translator)]
    doc_beams, doc_tokens = DOCUMENT
    typed_beams, typed_tokens = INTERACTIVE
    if args.new_tokens is not None:
        doc_tokens = typed_tokens = args.new_tokens
    out = {"checkpoint": Path(args.checkpoint).name, "device": translator.describe(), "torch": torch.__version__,
           "sentences": args.sentences, "document_runs": args.doc_repeats, "interactive_runs": args.repeats,
           "rows": translator.generator.max_rows, "graphed_constrained_rows": args.graphed_constrained_rows,
           "kinds_apart": scheduler.KINDS_APART}

    workloads = [(f"{count}_constraints", count, 1) for count in DOCUMENT_CONSTRAINTS]
    workloads.append((f"1_constraint_every_{MIXED_EVERY}th_sentence", 1, MIXED_EVERY))
    for name, count, every in workloads:
        def make(seed: int) -> list[Request]:
            return workload_requests(translator, document, doc_beams, doc_tokens, (2,) * count, 1, seed, every)

        warm_up(translator.generator.runner, lambda: timed(translator, make(0)))  # kernels compiled, graphs captured
        seconds = statistics.median(timed(translator, make(seed)) for seed in range(1, args.doc_repeats + 1))
        out[f"document_beam{doc_beams}_{name}_sent_per_s"] = len(document) / seconds
    plain = out[f"document_beam{doc_beams}_0_constraints_sent_per_s"]
    for name, _, _ in workloads[1:]:
        out[f"document_{name}_vs_plain"] = out[f"document_beam{doc_beams}_{name}_sent_per_s"] / plain

    for name, terms in (("plain", ()), ("glossary_2_terms", GLOSSARY)):
        def make(seed: int) -> list[Request]:
            return workload_requests(translator, typed, typed_beams, typed_tokens, terms, 0, seed)

        for seed in range(3):
            timed(translator, make(seed))  # warm-up
        times = [timed(translator, make(seed)) for seed in range(args.repeats)]
        out[f"interactive_beam{typed_beams}_{name}_ms_median"] = statistics.median(times) * 1e3
    out["interactive_glossary_vs_plain"] = (out[f"interactive_beam{typed_beams}_glossary_2_terms_ms_median"]
                                           / out[f"interactive_beam{typed_beams}_plain_ms_median"])

    emit(out, "constraints", translator.device, args.out)
    return out


if __name__ == "__main__":
    main()
