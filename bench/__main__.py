"""Dragoman's side of the speed comparison: `python -m bench --size 600M --workload all --device cuda`.

Builds a random-weight NLLB of the given shape (the peers' scripts in shared/bench use the same
shapes and workloads), runs the workloads of DESIGN.md with the output length forced, and prints
one JSON object. Run it in the same call as the peers' scripts and report ratios.
"""

from __future__ import annotations

import argparse
import os
import random
import time

import torch

from bench import add_out_argument, emit, median_of_runs, warm_up
from bench.shared_memory import compiled_kernels, over_limit, report
from dragoman.engine.config import NllbConfig
from dragoman.engine.decoding import DecodingOptions
from dragoman.engine.device import describe, gpu_profile, resolve_device, resolve_dtype
from dragoman.engine.generator import DEFAULT_GPU_MEMORY, Generator, Request
from dragoman.engine.model import NllbModel
from dragoman.engine.quantize import int8_supported, quantize_int8
from dragoman.engine.weights import expected_shapes

SHAPES = {
    "600M": dict(d_model=1024, layers=12, ffn=4096),
    "1.3B": dict(d_model=1024, layers=24, ffn=8192),
    "3.3B": dict(d_model=2048, layers=24, ffn=8192),
}
VOCAB = 256206
TARGET_LANG = 256047  # fra_Latn in the published vocabulary
EOS = 2


def shape_config(size: str) -> NllbConfig:
    shape = SHAPES[size]
    return NllbConfig(
        vocab_size=VOCAB,
        d_model=shape["d_model"],
        encoder_layers=shape["layers"],
        decoder_layers=shape["layers"],
        encoder_heads=16,
        decoder_heads=16,
        encoder_ffn_dim=shape["ffn"],
        decoder_ffn_dim=shape["ffn"],
        max_position_embeddings=1024,
    )


def random_weights(config: NllbConfig, device: torch.device, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """HF's initialisation (normal(0, 0.02), layer norms at 1); names as in engine.weights."""
    torch.manual_seed(0)
    weights = {}
    for name, dims in expected_shapes(config).items():
        if name.endswith("norm.weight"):
            weights[name] = torch.ones(dims, device=device, dtype=dtype)
        else:
            weights[name] = torch.randn(dims, device=device, dtype=dtype) * 0.02
    embedding = torch.randn(config.vocab_size, config.d_model, device=device, dtype=dtype) * 0.02
    weights["embed_tokens.weight"] = weights["lm_head.weight"] = embedding
    return weights


def random_model(size: str, device: torch.device, dtype: torch.dtype) -> NllbModel:
    config = shape_config(size)
    return NllbModel(config, random_weights(config, device, dtype), max_positions=1024)


def sentence(length: int, rng: random.Random) -> list[int]:
    """[src_lang] random pieces </s>, like the peers' inputs."""
    return [256047] + [rng.randrange(4, 256000) for _ in range(length - 2)] + [EOS]


WORKLOADS = {"interactive": (4, 32), "document": (4, 40), "greedy": (1, 40)}  # DESIGN.md's: (beams, new tokens)


def workload(name: str, sentences: int, rng: random.Random) -> tuple[list[list[int]], int, int]:
    """(sources, beams, new tokens) of a workload of DESIGN.md: `interactive` (one 32-token
    sentence), `document` and `greedy` (`sentences` of 10-60 tokens)."""
    beams, new_tokens = WORKLOADS[name]
    if name == "interactive":
        return [sentence(32, rng)], beams, new_tokens
    return [sentence(rng.randint(10, 60), rng) for _ in range(sentences)], beams, new_tokens


def add_workload_arguments(parser: argparse.ArgumentParser, workload: str, batch: int) -> None:
    """--size, --workload and --batch (sentences of the document workloads), as bench's GPU tools
    (bench.profile, bench.marks) take them; `prepared` builds what they name."""
    parser.add_argument("--size", default="600M")
    parser.add_argument("--workload", choices=list(WORKLOADS), default=workload)
    parser.add_argument("--batch", type=int, default=batch, help="sentences of the document workloads")


def prepared(args: argparse.Namespace, warm_ups: int) -> tuple[Generator, list[list[int]], int, int]:
    """A generator of the random bf16 model of args.size on the GPU, and args' workload run
    `warm_ups` times on it (graphs captured, kernels compiled): (generator, sources, beams, new tokens)."""
    generator = Generator.build(random_model(args.size, torch.device("cuda"), torch.bfloat16))
    sources, beams, new_tokens = workload(args.workload, args.batch, random.Random(1))
    for _ in range(warm_ups):
        run(generator, sources, beams, new_tokens)
    torch.cuda.synchronize()
    return generator, sources, beams, new_tokens


def typed_generator(size: str, warm_ups: int = 3) -> tuple[Generator, list[list[int]]]:
    """A generator of the random bf16 model of `size` on the GPU and the interactive workload's one
    32-token sentence, translated `warm_ups` times (kernels compiled, graphs captured), as the
    tools that take a typed sentence apart use them (bench.steps, bench.host)."""
    device = torch.device("cuda")
    generator = Generator.build(random_model(size, device, torch.bfloat16), cache_tokens=1 << 15)
    source = [sentence(32, random.Random(1))]
    for _ in range(warm_ups):
        run(generator, source, 4, 32)
    torch.cuda.synchronize()
    return generator, source


def run(generator: Generator, sources: list[list[int]], beams: int, new_tokens: int) -> None:
    options = DecodingOptions(num_beams=beams, min_new_tokens=new_tokens, max_new_tokens=new_tokens)
    generator.run([Request(src, [EOS, TARGET_LANG], options) for src in sources])


def timed(generator: Generator, device: torch.device, *args) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    run(generator, *args)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--size", choices=SHAPES, default="600M")
    parser.add_argument("--workload", choices=["interactive", "document", "greedy", "all"], default="all")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--repeats", type=int, default=10, help="timed runs of the interactive workload")
    parser.add_argument("--doc-repeats", type=int, default=3, help="timed runs of each document workload (median)")
    parser.add_argument("--batches", default="", help="sentences per batch to sweep for the document workloads, e.g. 64,128,512")
    parser.add_argument("--sentences", type=int, default=512, help="sentences of the document workloads (fewer on a CPU)")
    parser.add_argument("--gpu-memory", type=float, default=DEFAULT_GPU_MEMORY / 2**30,
                        help="GB of GPU memory for rows and caches beyond the weights (the app's default)")
    add_out_argument(parser)
    args = parser.parse_args()

    device = resolve_device(args.device)
    dtype = resolve_dtype(args.dtype, device)
    int8 = args.dtype == "int8" or (args.dtype == "auto" and device.type == "cpu" and int8_supported())
    if device.type == "cpu":
        torch.set_num_threads(os.cpu_count() or 1)
    model = random_model(args.size, device, dtype)
    if int8:
        quantize_int8(model)
    generator = Generator.build(model, gpu_memory=int(args.gpu_memory * 2**30))
    out = {"size": args.size, "device": describe(device, dtype, int8), "torch": torch.__version__,
           "document_runs": args.doc_repeats,  # each document figure: the median of that many timed runs
           "rows": generator.max_rows, "cache_tokens": generator.num_total_blocks() * generator.self_cache.block_size}
    if device.type == "cuda":
        out["gpu_memory_GB"] = args.gpu_memory
    rng = random.Random(1)

    if args.workload in ("interactive", "all"):
        typed = workload("interactive", 1, rng)  # (sources, beams, new tokens)
        out["interactive_warm_ups"] = warm_up(generator.runner, lambda: run(generator, *typed))
        seconds, keys = median_of_runs(generator.runner, lambda: timed(generator, device, *typed), args.repeats)
        out["interactive_beam4_ms_median"] = seconds * 1e3
        out["interactive_keys_met_while_timed"] = keys

    document, _, _ = workload("document", args.sentences, rng)  # the greedy workload decodes the same sentences
    for key in ("document", "greedy"):
        if args.workload not in (key, "all"):
            continue
        beams, new_tokens = WORKLOADS[key]
        all_rows = generator.max_rows
        for batch in [0] + [int(b) for b in args.batches.split(",") if b]:
            # At most `batch` sentences decode together (within the rows the generator has: 32 on the
            # CPU), every one that fits with 0.
            generator.max_rows = min(batch * beams, generator.rows.capacity) if batch else all_rows
            name = f"document_beam{beams}" + (f"_bs{batch}" if batch else "")
            out[f"{name}_warm_ups"] = warm_up(generator.runner, lambda: run(generator, document, beams, new_tokens))
            seconds, keys = median_of_runs(
                generator.runner, lambda: timed(generator, device, document, beams, new_tokens), args.doc_repeats)
            out[f"{name}_sent_per_s"] = len(document) / seconds
            out[f"{name}_keys_met_while_timed"] = keys
        generator.max_rows = all_rows
    if device.type == "cuda":
        limit = gpu_profile(device).shared_memory
        out["kernel_shared_memory_max_B"] = max((c.shared for c in compiled_kernels()), default=0)
        out["kernels_over_shared_memory"] = len(over_limit(limit))
        print(report(limit))
    emit(out, f"dragoman_{args.size}", device, args.out)

if __name__ == "__main__":
    main()
