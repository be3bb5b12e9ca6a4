"""`python -m bench.startup_trace [--out DIR] -- translate --from eng_Latn --to fra_Latn --model CK
--device cuda --max-length 48 < line.txt`: where a `dragoman` command's start-up goes, in its own order.

The command runs in this process. Each function of TRACED is wrapped as its module finishes being
imported, so that nothing is imported sooner than the command imports it (the tokenizer is read,
and the GPU's context made, while torch is imported: an import made early would hide that).
Prints to the error output, as they happen, each module's import and each traced function's first
call and return, with the thread and the time since this module started; then one JSON object:
when the command first wrote its output (its translation) and returned, each module's import, and
each function's calls and total seconds (inclusive; the calls of several threads add up). The
command's own output is kept, not printed. docs/performance.md, "Start-up", reads one.
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()

import argparse  # noqa: E402  (after the clock starts)
import functools  # noqa: E402
import importlib.abc  # noqa: E402
import importlib.util  # noqa: E402
import io  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from collections import defaultdict  # noqa: E402
from types import ModuleType  # noqa: E402

from bench import add_out_argument, emit  # noqa: E402

# module -> functions ("name" or "Class.name") timed in it; modules without any: only their import.
TRACED: dict[str, list[str]] = {
    "torch": [],
    "triton": [],
    "dragoman.app.cli": ["open_engine", "run_translate"],
    "dragoman.app.session.session": ["TranslationSession.open", "TranslationSession.translate",
                                     "TranslationSession.doubts_of"],
    "dragoman.engine.translator": ["Translator.__init__", "Translator.submit", "build_generator", "resolve_device"],
    "dragoman.engine.gpu_ahead": ["_upload_file", "take_upload"],  # the weights copied while torch is imported
    "dragoman.engine.weights": ["load_weights"],
    "dragoman.engine.quantize": ["quantize_int8"],
    "dragoman.engine.generator": ["Generator.build", "Generator.run"],
    "dragoman.engine.step_runner": ["StepRunner.admit", "StepRunner.launch"],
    "dragoman.engine.admission": ["encode_sources"],
    "triton.runtime.cache": ["triton_key"],  # Triton's key of its own files (engine/gpu_ahead.py)
    "triton.runtime.jit": ["JITFunction._do_compile"],  # a kernel loaded (from the disk cache, warm)
}


class Trace:
    """The timeline: events as they happen, and each traced function's calls and seconds."""

    def __init__(self, first_calls: int):
        self.first_calls = first_calls
        self.imports: dict[str, list[float]] = {}  # module -> [started, done] (s)
        self.totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])  # name -> [calls, seconds]
        self.first_output: float | None = None

    @staticmethod
    def now() -> float:
        return time.perf_counter() - STARTED

    def say(self, what: str) -> None:
        print(f"[{self.now() * 1e3:8.1f} ms] {threading.current_thread().name:20s} {what}", file=sys.stderr, flush=True)

    def wrap(self, module: ModuleType, name: str) -> None:
        """Time `module.name` ("Class.method" too) from now on."""
        owner: object = module
        attribute = name
        if "." in name:
            class_name, attribute = name.split(".")
            owner = getattr(module, class_name)
        raw = vars(owner)[attribute] if isinstance(owner, type) else getattr(owner, attribute)
        kind = type(raw) if isinstance(raw, (staticmethod, classmethod)) else None
        function = raw.__func__ if kind is not None else raw
        key = f"{module.__name__}.{name}"
        totals = self.totals[key]

        @functools.wraps(function)
        def traced(*args, **kwargs):
            totals[0] += 1
            said = totals[0] <= self.first_calls
            if said:
                self.say(f"> {name}")
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                seconds = time.perf_counter() - start
                totals[1] += seconds
                if said:
                    self.say(f"< {name} {seconds * 1e3:.1f} ms")

        setattr(owner, attribute, kind(traced) if kind is not None else traced)


class TracingFinder(importlib.abc.MetaPathFinder):
    """Finds TRACED's modules as the other finders do, and wraps their functions once imported."""

    def __init__(self, trace: Trace):
        self.trace = trace

    def find_spec(self, name, path, target=None):
        if name not in TRACED:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        execute = loader.exec_module
        trace = self.trace

        def exec_module(module: ModuleType) -> None:
            trace.say(f"import {name}")
            started = trace.now()
            execute(module)
            trace.imports[name] = [started, trace.now()]
            trace.say(f"imported {name} ({(trace.now() - started) * 1e3:.0f} ms)")
            for function in TRACED[name]:
                try:
                    trace.wrap(module, function)
                except (AttributeError, KeyError):  # another version of the library: not traced
                    trace.say(f"({name}.{function} not found)")

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


class Output(io.TextIOBase):
    """The command's standard output, kept, and when it was first written."""

    def __init__(self, trace: Trace):
        self.trace, self.text = trace, io.StringIO()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if text and self.trace.first_output is None:
            self.trace.first_output = self.trace.now()
            self.trace.say("the command's first output")
        return self.text.write(text)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.startup_trace", description=__doc__.splitlines()[0])
    parser.add_argument("--first-calls", type=int, default=1, help="calls of each function said as they happen")
    add_out_argument(parser)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- and the `dragoman` command's arguments")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --, e.g. -- translate --from eng_Latn --to fra_Latn --model CK")
    trace = Trace(args.first_calls)
    sys.meta_path.insert(0, TracingFinder(trace))
    output, stdout = Output(trace), sys.stdout
    sys.stdout = output
    trace.say("the command starts")
    try:
        from dragoman.app import cli

        code = cli.main(command)
    finally:
        sys.stdout = stdout
    returned = trace.now()
    emit({"command": command, "exit_code": code, "first_output_s": trace.first_output, "returned_s": returned,
          "imports_s": {name: [round(t, 4) for t in times] for name, times in trace.imports.items()},
          "functions": {name: {"calls": calls, "seconds": round(seconds, 4)}
                        for name, (calls, seconds) in sorted(trace.totals.items(), key=lambda kv: -kv[1][1])}},
         "startup_trace", None, args.out)


if __name__ == "__main__":
    main()
