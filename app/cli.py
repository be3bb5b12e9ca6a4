"""`dragoman`: with no subcommand it opens the window; `dragoman translate` translates from the command line.

Errors are one line on stderr: exit code 1, or 2 for a usage error (bad option, unknown language).
"""

from __future__ import annotations

import argparse
import sys
from typing import Iterator, TextIO

from app import __version__

# Lines translated together: big enough to fill a batch, small enough to print progressively.
CHUNK_LINES = 256


class UsageError(Exception):
    pass


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dragoman", description="Offline translation between 200 languages (NLLB-200).")
    parser.add_argument("--version", action="version", version=f"dragoman {__version__}")
    parser.add_argument("--model", metavar="DIR", help="NLLB checkpoint folder")
    parser.add_argument("--adapters", metavar="DIR", help="folder of LoRA adapters")
    parser.add_argument("--from", dest="src", metavar="LANG", help="source language (FLORES-200 code, e.g. eng_Latn)")
    parser.add_argument("--to", dest="tgt", metavar="LANG", help="target language (e.g. fra_Latn)")
    parser.add_argument("--device", metavar="D", help="auto, cpu, cuda or cuda:N")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    translate = commands.add_parser(
        "translate",
        help="translate lines from stdin (one segment per line) to stdout",
        description="Translate stdin, one segment per line, to stdout, one translation per line.",
    )
    translate.add_argument("--model", metavar="DIR", required=True, help="NLLB checkpoint folder")
    translate.add_argument("--from", dest="src", metavar="LANG", required=True, help="source language, e.g. eng_Latn")
    translate.add_argument("--to", dest="tgt", metavar="LANG", required=True, help="target language, e.g. fra_Latn")
    translate.add_argument("--beams", type=int, metavar="N", help="beam size (1 = greedy; default 4)")
    translate.add_argument("--length-penalty", type=float, metavar="F", help="beam length penalty (default 1.0)")
    translate.add_argument("--max-length", type=int, metavar="N", help="max decoder length (default: the model's, 200)")
    translate.add_argument("--no-repeat-ngram-size", type=int, metavar="N", help="forbid repeating n-grams of this size")
    translate.add_argument("--repetition-penalty", type=float, metavar="F", help="penalise repeated tokens (> 1)")
    translate.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default auto)")
    translate.add_argument(
        "--dtype", default="auto", help="auto, float32, bfloat16, float16, or int8 (CPU) (default: bfloat16 on a GPU, int8 on the CPU)"
    )
    translate.add_argument("files", nargs="*", metavar="FILE", help="documents to translate (not yet supported)")
    return parser


def read_lines(stream: TextIO) -> Iterator[str]:
    """Lines of stdin without their line ends; a clear error for bytes that are not UTF-8."""
    for number, raw in enumerate(stream.buffer if hasattr(stream, "buffer") else stream, start=1):
        if isinstance(raw, bytes):
            try:
                raw = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ValueError(f"stdin line {number} is not valid UTF-8 (byte {raw[e.start]:#04x})") from None
        yield raw.rstrip("\r\n")


def chunks(lines: Iterator[str], size: int) -> Iterator[list[str]]:
    chunk: list[str] = []
    for line in lines:
        chunk.append(line)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def run_translate(args: argparse.Namespace, stdin: TextIO, stdout: TextIO) -> int:
    from engine.decoding import DecodingOptions
    from engine.languages import resolve_language

    if args.files:
        raise UsageError("translating document files is not supported yet: pipe text on stdin instead")
    src, tgt = resolve_language(args.src), resolve_language(args.tgt)
    overrides = {
        "num_beams": args.beams,
        "length_penalty": args.length_penalty,
        "max_length": args.max_length,
        "no_repeat_ngram_size": args.no_repeat_ngram_size,
        "repetition_penalty": args.repetition_penalty,
    }
    overrides = {name: value for name, value in overrides.items() if value is not None}
    try:  # checked before the model loads, so a typo costs nothing
        DecodingOptions(**overrides)
    except ValueError as e:
        raise UsageError(str(e)) from None

    from engine.translator import Translator

    translator = Translator(args.model, device=args.device, dtype=args.dtype)
    options = translator.default_options(**overrides)
    for chunk in chunks(read_lines(stdin), CHUNK_LINES):
        for translation in translator.translate(chunk, src, tgt, options):
            stdout.write(translation + "\n")
        stdout.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "translate":
            return run_translate(args, sys.stdin, sys.stdout)
        from app.gui import run_window

        return run_window(model=args.model, adapters=args.adapters, src=args.src, tgt=args.tgt, device=args.device)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 1  # the reader went away (e.g. `| head`): nothing left to say
    except Exception as e:  # one clear line, never a traceback
        from engine.languages import UnknownLanguageError

        code = 2 if isinstance(e, (UsageError, UnknownLanguageError)) else 1
        message = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"dragoman: error: {message}", file=sys.stderr)
        return code


if __name__ == "__main__":
    sys.exit(main())
