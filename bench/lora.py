"""What LoRA adapters cost: `python -m bench.lora --size 600M --rank 16` (on the GPU machine).

Writes 4 random PEFT-format adapters (every linear layer of encoder and decoder, cross-attention
included, float32 as PEFT saves them) for a random-weight NLLB of the given shape, then measures,
with the output length forced as in `python -m bench`:

- the document workloads (beam 4 and greedy) with the base model alone, every sentence on one
  adapter, and the sentences spread over the 4 adapters in the same batches;
- interactive latency (1 sentence, beam 4) with the base model, a resident adapter, and an adapter
  read from disk for the request itself;
- promotion from disk into a slot on the calling thread: the first one (which allocates the slot
  stacks), then into existing stacks, with the files in the page cache and after dropping them from it;
- what a running document feels of an adapter's arrival: while a document decodes on the base
  model, a typed sentence arrives on an adapter; the steps' times, read between the document's
  partial results, in the step loop's ordinary steps and at the worst step from the arrival until
  the sentence's first step, for a resident adapter and one that is not (read from the page cache,
  and after dropping it from there). The difference is the stall a disk read puts on the batch.

Prints one JSON object (and writes it into `--out DIR` when given).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch
from safetensors.torch import save_file

from bench.__main__ import EOS, SHAPES, TARGET_LANG, random_weights, sentence, shape_config
from bench import add_out_argument, emit
from dragoman.engine.config import NllbConfig
from dragoman.engine.decoding import DecodingOptions
from dragoman.engine.device import describe, resolve_device, resolve_dtype
from dragoman.engine.generator import Generator, Request
from dragoman.engine.adapters import CONFIG_FILE, WEIGHTS_FILE
from dragoman.engine.model import NllbModel
from dragoman.engine.peft_adapter import linear_modules

ADAPTERS = ["a0", "a1", "a2", "a3"]
# For a smoke run on the CPU: the real vocabulary, a small body.
TINY = dict(d_model=256, layers=2, ffn=512)


def config_for(size: str) -> NllbConfig:
    if size != "tiny":
        return shape_config(size)
    return NllbConfig(vocab_size=256206, d_model=TINY["d_model"], encoder_layers=TINY["layers"],
                      decoder_layers=TINY["layers"], encoder_heads=4, decoder_heads=4, encoder_ffn_dim=TINY["ffn"],
                      decoder_ffn_dim=TINY["ffn"], max_position_embeddings=1024)


def write_adapter(folder: Path, config: NllbConfig, rank: int, seed: int) -> int:
    """A PEFT LoRA adapter on every linear layer, as save_pretrained writes it; returns its file size."""
    folder.mkdir(parents=True, exist_ok=True)
    generator = torch.Generator().manual_seed(seed)
    tensors = {}
    for module, (out, inp) in linear_modules(config).items():
        prefix = f"base_model.model.model.{module}"
        tensors[f"{prefix}.lora_A.weight"] = torch.randn(rank, inp, generator=generator) / inp**0.5
        tensors[f"{prefix}.lora_B.weight"] = torch.randn(out, rank, generator=generator) * 0.01
    save_file(tensors, folder / WEIGHTS_FILE, metadata={"format": "pt"})
    peft_config = {"peft_type": "LORA", "task_type": "SEQ_2_SEQ_LM", "r": rank, "lora_alpha": 2 * rank,
                   "target_modules": ["q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"], "lora_dropout": 0.0,
                   "bias": "none", "use_rslora": False, "inference_mode": True}
    (folder / CONFIG_FILE).write_text(json.dumps(peft_config, indent=2))
    return (folder / WEIGHTS_FILE).stat().st_size


def drop_from_page_cache(folder: Path) -> None:
    """Ask the kernel to forget the files' cached pages, so the next read comes from the disk."""
    for name in (CONFIG_FILE, WEIGHTS_FILE):
        fd = os.open(folder / name, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(device: torch.device, fn) -> float:
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


def requests(sources: list[list[int]], beams: int, new_tokens: int, adapters: list[str | None]) -> list[Request]:
    """Sentence i on adapters[i % len(adapters)]."""
    options = DecodingOptions(num_beams=beams, min_new_tokens=new_tokens, max_new_tokens=new_tokens)
    return [Request(src, [EOS, TARGET_LANG], options, adapter=adapters[i % len(adapters)]) for i, src in enumerate(sources)]


def arrival(generator: Generator, document: list[list[int]], source: list[int], adapter: str,
            at_step: int = 8) -> dict:
    """Decode `document` (beam 4, 48 tokens, base model) and, once `at_step` steps have run, let a
    typed sentence on `adapter` arrive (beam 4, 16 tokens). Step times are read between the
    document's first sentence's partial results (one a step, each after its step has run)."""
    stamps: list[float] = []
    running = requests(document, 4, 48, [None])
    running[0].on_partial = lambda tokens: stamps.append(time.perf_counter())
    [typed] = requests([source], 4, 16, [adapter])
    typed.priority = 0
    seen: dict[str, int] = {}
    typed.on_partial = lambda tokens: seen.setdefault("first_step", len(stamps))

    def feed(idle: bool) -> list[Request] | None:
        """Nothing until `at_step` steps have run, then the typed sentence, then no more."""
        if "arrived" in seen:
            return None
        if len(stamps) < at_step:
            return []
        seen["arrived"] = len(stamps)
        return [typed]

    generator.run(running, feed=feed)
    steps = [(b - a) * 1e3 for a, b in zip(stamps, stamps[1:])]  # steps[i]: from partial i to i + 1
    # The typed sentence's first step is the one that ended at stamps[first - 1].
    arrived, first = seen["arrived"], seen["first_step"]
    return {"step_ms": statistics.median(steps[: arrived - 1]),
            "worst_step_until_it_runs_ms": max(steps[arrived - 1 : first - 1]),
            "steps_until_it_runs": first - arrived}


def arrivals(generator: Generator, folder: Path, rng: random.Random, repeats: int) -> dict:
    """`arrival` for a resident adapter and for one read from disk, median of `repeats` each."""
    # A document that runs whole from the start, beside room for the typed sentence (`feed` is
    # asked for more only while fewer than max_rows wait).
    document = [sentence(rng.randint(10, 60), rng) for _ in range(min(64, generator.max_rows // 4 - 1))]
    source = sentence(32, rng)
    arrival(generator, document, source, ADAPTERS[0])  # warm-up: graphs of the mixed steps
    out = {}
    for label in ("resident", "read_from_page_cache", "read_after_dropping_page_cache"):
        runs = []
        for i in range(repeats):
            name = ADAPTERS[0]
            if label != "resident":  # a copy under a new name: not resident, its files in the page cache
                name = f"arriving{i}-{label}"
                shutil.copytree(folder / ADAPTERS[1], folder / name)
                if label == "read_after_dropping_page_cache":
                    drop_from_page_cache(folder / name)
            runs.append(arrival(generator, document, source, name))
        out[label] = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    resident = out["resident"]["worst_step_until_it_runs_ms"]
    out["stall_ms"] = {label: out[label]["worst_step_until_it_runs_ms"] - resident
                       for label in ("read_from_page_cache", "read_after_dropping_page_cache")}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.lora")
    parser.add_argument("--size", choices=[*SHAPES, "tiny"], default="600M")
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--sentences", type=int, default=512, help="sentences of the document workloads")
    parser.add_argument("--repeats", type=int, default=10, help="timed runs of the interactive workload")
    add_out_argument(parser)
    args = parser.parse_args()

    device = resolve_device(args.device)
    dtype = resolve_dtype(args.dtype, device)
    config = config_for(args.size)
    torch.manual_seed(0)
    model = NllbModel(config, random_weights(config, device, dtype), max_positions=1024)
    folder = Path(tempfile.mkdtemp(prefix="dragoman-lora-bench-"))
    sizes = [write_adapter(folder / name, config, args.rank, seed) for seed, name in enumerate(ADAPTERS)]
    generator = Generator.build(model, adapters_dir=folder, adapter_slots=len(ADAPTERS))
    pool = generator.lora
    out = {
        "size": args.size, "device": describe(device, dtype), "torch": torch.__version__,
        "adapter": {"rank": args.rank, "targets": "every linear layer (q k v out fc1 fc2, self and cross)",
                    "file_MB": sizes[0] / 1e6, "slots": len(ADAPTERS)},
    }

    # Promotion from disk. The first allocates the stacks (and is what a request's first use pays).
    out["promote_first_ms"] = timed(device, lambda: pool.promote_lora_from_disk(folder / "a0", "a0")) * 1e3
    warm, cold = [], []
    for i in range(6):
        name = ADAPTERS[1 + i % 3]
        warm.append(timed(device, lambda: pool.promote_lora_from_disk(folder / name, name)) * 1e3)
        drop_from_page_cache(folder / name)
        cold.append(timed(device, lambda: pool.promote_lora_from_disk(folder / name, name)) * 1e3)
    out["promote_ms_median"] = {"page_cache": statistics.median(warm), "after_dropping_page_cache": statistics.median(cold)}
    out["stacks_MB"] = sum(s.a.numel() + s.b.numel() for s in pool.layers.stacks.values()) * model.dtype.itemsize / 1e6
    for name in ADAPTERS:  # all four resident
        if name not in pool.resident():
            pool.promote_lora_from_disk(folder / name, name)

    rng = random.Random(1)
    source = [sentence(32, rng)]
    interactive = {}
    for label, adapter in (("base", None), ("adapter", "a0")):
        for _ in range(3):
            generator.run(requests(source, 4, 32, [adapter]))
        times = [timed(device, lambda: generator.run(requests(source, 4, 32, [adapter]))) for _ in range(args.repeats)]
        interactive[label] = statistics.median(times) * 1e3
    first_use = []
    for i in range(3):  # a non-resident adapter: read for the request (evicting the LRU one)
        (folder / ADAPTERS[i]).rename(folder / f"b{i}")
        first_use.append(timed(device, lambda: generator.run(requests(source, 4, 32, [f"b{i}"]))) * 1e3)
        (folder / f"b{i}").rename(folder / ADAPTERS[i])
    interactive["adapter_read_for_the_request"] = statistics.median(first_use)
    out["interactive_beam4_32tok_ms_median"] = interactive
    out["adapter_arriving_beside_a_document"] = arrivals(generator, folder, rng, 3)
    for name in ADAPTERS:  # the arrivals evicted some
        if name not in pool.resident():
            pool.promote_lora_from_disk(folder / name, name)

    document = [sentence(rng.randint(10, 60), rng) for _ in range(args.sentences)]
    for beams, key in ((4, "document_beam4_sent_per_s"), (1, "document_greedy_sent_per_s")):
        results = {}
        for label, adapters in (("base", [None]), ("1_adapter", ["a0"]), ("4_adapters_mixed", ADAPTERS)):
            generator.run(requests(document[:16], beams, 40, adapters))  # warm-up: kernels, graphs, promotion
            seconds = timed(device, lambda: generator.run(requests(document, beams, 40, adapters)))
            results[label] = len(document) / seconds
        results["4_adapters_vs_base"] = results["4_adapters_mixed"] / results["base"]
        out[key] = results
    emit(out, f"dragoman_lora_{args.size}", device, args.out)

if __name__ == "__main__":
    main()
