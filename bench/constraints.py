"""What lexically constrained decoding costs beside plain decoding:
`python -m bench.constraints --checkpoint DIR --device cuda --out DIR`.

On a checkpoint folder (a real one, or `python -m bench.checkpoint --size 600M DIR`'s random one),
with the output length forced as in `python -m bench` (min = max new tokens, so that random
weights do the same work as real ones), measures:

- the document workload (sentences of 10-60 random source tokens, beam 4, 40 new tokens) with 0
  (plain decoding), 1 and 3 constraints a sentence, each of 2 random target tokens: sentences/s,
  the median of `--doc-repeats` runs after a warm-up;
- the interactive workload (one typed sentence of 32 source tokens, beam 4, 32 new tokens) plain
  and with a 2-term glossary (terms of 2 and 3 tokens): the median latency of `--repeats` runs.

Prints one JSON object and writes it to OUT/constraints.json.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path

import torch

from dragoman.engine.decoding import DecodingOptions
from dragoman.engine.generator import Request
from dragoman.engine.translator import Translator

DOCUMENT = (4, 40)  # beams, new tokens
INTERACTIVE = (4, 32)
DOCUMENT_CONSTRAINTS = (0, 1, 3)  # a sentence
GLOSSARY = (2, 3)  # the typed sentence's terms, in tokens
FIRST_LANGUAGE = "ace_Arab"  # the first language code's id follows the pieces': random tokens are below it


def workload_requests(translator: Translator, sources: list[list[int]], beams: int, new_tokens: int,
                      term_lengths: tuple[int, ...], priority: int, seed: int) -> list[Request]:
    """One request per source, each constrained by random target tokens of `term_lengths`."""
    rng = random.Random(seed)
    tok = translator.tokenizer
    first_language = tok.lang_id(FIRST_LANGUAGE)
    options = DecodingOptions(num_beams=beams, min_new_tokens=new_tokens, max_new_tokens=new_tokens)
    prefix = tok.decoder_prefix("fra_Latn")
    return [Request(source, prefix, options, priority,
                    constraints=[[rng.randrange(4, first_language) for _ in range(n)] for n in term_lengths] or None)
            for source in sources]


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
    parser.add_argument("--out", default=None, help="folder to write constraints.json into")
    parser.add_argument("--sentences", type=int, default=512, help="sentences of the document workload")
    parser.add_argument("--doc-repeats", type=int, default=3, help="timed runs of each document workload (median)")
    parser.add_argument("--repeats", type=int, default=10, help="timed runs of the interactive workload (median)")
    parser.add_argument("--new-tokens", type=int, default=None,
                        help="new tokens of both workloads instead of DESIGN.md's (for a small model's positions)")
    args = parser.parse_args(argv)

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
           "rows": translator.generator.max_rows}

    for count in DOCUMENT_CONSTRAINTS:
        def make(seed: int) -> list[Request]:
            return workload_requests(translator, document, doc_beams, doc_tokens, (2,) * count, 1, seed)

        timed(translator, make(0))  # warm-up: kernels compiled, every batch size's graphs captured
        seconds = statistics.median(timed(translator, make(seed)) for seed in range(1, args.doc_repeats + 1))
        out[f"document_beam{doc_beams}_{count}_constraints_sent_per_s"] = len(document) / seconds
    plain = out[f"document_beam{doc_beams}_0_constraints_sent_per_s"]
    for count in DOCUMENT_CONSTRAINTS[1:]:
        constrained = out[f"document_beam{doc_beams}_{count}_constraints_sent_per_s"]
        out[f"document_{count}_constraints_vs_plain"] = constrained / plain

    for name, terms in (("plain", ()), ("glossary_2_terms", GLOSSARY)):
        def make(seed: int) -> list[Request]:
            return workload_requests(translator, typed, typed_beams, typed_tokens, terms, 0, seed)

        for seed in range(3):
            timed(translator, make(seed))  # warm-up
        times = [timed(translator, make(seed)) for seed in range(args.repeats)]
        out[f"interactive_beam{typed_beams}_{name}_ms_median"] = statistics.median(times) * 1e3
    out["interactive_glossary_vs_plain"] = (out[f"interactive_beam{typed_beams}_glossary_2_terms_ms_median"]
                                           / out[f"interactive_beam{typed_beams}_plain_ms_median"])

    if translator.device.type == "cuda":
        out["max_mem_GB"] = torch.cuda.max_memory_allocated(translator.device) / 1e9
    print(json.dumps(out, indent=1))
    if args.out:
        folder = Path(args.out)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "constraints.json").write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
