"""`python -m bench.cli_start --checkpoint DIR [--device cuda] [--launches 3]`: `dragoman translate`
of one line from launch, the first launch on a fresh Triton cache (its kernels compiled), the
others warm.

Each launch is a new process with a new data folder and the cache folder of the launches before,
as an installed app keeps it (the CPU's int8 weights, written by the first launch); times from its
start to the translation's line on its output, and to its exit (a first launch on a GPU waits at
exit for the process that compiles its kernels: engine/kernel_build.py). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import add_out_argument, emit

SENTENCE = "The quick brown fox jumps over the lazy dog.\n"


def launch(checkpoint: Path, device: str, max_length: int, environment: dict, cache: Path) -> dict:
    command = [sys.executable, "-m", "dragoman.app.cli", "translate", "--from", "eng_Latn", "--to", "fra_Latn",
               "--model", str(checkpoint), "--device", device, "--max-length", str(max_length)]
    home = Path(tempfile.mkdtemp(prefix="dragoman-cli-start-"))
    (home / "cache").symlink_to(cache)  # AppPaths' cache folder under DRAGOMAN_HOME
    start = time.perf_counter()
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                               env={**environment, "DRAGOMAN_HOME": str(home)})
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(SENTENCE)
    process.stdin.close()
    line = process.stdout.readline()
    translated = time.perf_counter() - start
    process.stdout.read()
    code = process.wait()
    return {"to_translation_s": translated, "to_exit_s": time.perf_counter() - start, "exit_code": code,
            "translated": bool(line.strip())}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cli_start", description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, required=True, help="NLLB checkpoint folder")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--max-length", type=int, default=48, help="a random checkpoint writes every token it may")
    parser.add_argument("--launches", type=int, default=3, help="the first on a fresh Triton cache, the rest warm")
    add_out_argument(parser)
    args = parser.parse_args()
    environment = {**os.environ, "TRITON_CACHE_DIR": tempfile.mkdtemp(prefix="dragoman-triton-")}
    cache = Path(tempfile.mkdtemp(prefix="dragoman-cli-start-cache-"))
    launches = [launch(args.checkpoint, args.device, args.max_length, environment, cache) for _ in range(args.launches)]
    out = {"device": args.device, "max_length": args.max_length, "first": launches[0], "warm": launches[1:],
           "cache_folder": str(cache)}
    emit(out, "cli_start", None, args.out)


if __name__ == "__main__":
    main()
