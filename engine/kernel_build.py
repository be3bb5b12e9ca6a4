"""A first launch's kernels compiled in another process, while the references serve.

On a machine whose Triton disk cache lacks the engine's kernels, the first sentences would wait
for their compilation: seconds a kernel, most of a first launch (docs/performance.md,
"Start-up"). Instead `KernelBuild.start` spawns a process that runs a stand-in of the same shapes
(the checkpoint with two layers a stack, or sixteen where sixteen divide its count; the same rows,
caches and precision) through the warm-up of typed text and short documents, plain and
constrained: compiling its kernels fills Triton's disk cache. Meanwhile
`kernels.set_building(True)` has the references serve and the steps run uncaptured; once the
process ends, each kernel loads from the cache at its next use and graphs are captured from then
on. A kernel the stand-in did not meet compiles where it is first used, as before.

A marker file beside Triton's cache, named by what makes the kernels (their sources and the
engine's, Triton, torch, the GPU, the model's shapes, rows, caches, precision), says the build
was done: later launches start none. An app that quits first waits for the
process at exit (Python joins a process's children then), so that the next launch finds the
cache whole; a killed build leaves what it compiled so far for the next launch's build.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import multiprocessing
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dragoman import kernels

if TYPE_CHECKING:
    from dragoman.engine.translator import Translator

log = logging.getLogger(__name__)

# The stand-in's documents: sentences of a few lengths, so that the encoder's packed attention,
# steps of many rows and constrained searches are compiled besides typed text's. Triton
# specialises an integer on being 1 and on 16 dividing it, so a document's counts (sentences,
# rows, tokens) meet each class: 4 sentences and 32, plain, with one term and with three.
STAND_IN_SENTENCES = ["Hello.", "Hello, how are you today?", "The quick brown fox jumps over the lazy dog. " * 3,
                      "One more sentence, of middling length, for the batch."]
STAND_IN_DOCUMENTS = (4, 32)
STAND_IN_TERMS: tuple[list[str], ...] = ([], ["Bonjour"], ["oui", "non", "le"])

_running: set["KernelBuild"] = set()  # builds of this process not yet ended
_lock = threading.Lock()


def stand_in_layers(layers: int) -> int:
    """The layers a stack of the stand-in keeps: as few as compile the same kernels. Triton
    specialises an integer argument on whether it is 1 and whether 16 divides it, so a count
    keeps its class."""
    if layers <= 2:
        return layers
    return 16 if layers % 16 == 0 else 2


@dataclass(frozen=True)
class BuildSpec:
    """What the spawned process builds (picklable)."""

    model_dir: str
    device: str  # "cuda:0"
    dtype: str  # a key of engine.device.DTYPES
    encoder_layers: int
    decoder_layers: int
    max_rows: int
    cache_tokens: int
    marker: str  # written once the build is done


def triton_cache_dir() -> Path:
    try:
        from triton import knobs  # Triton 3.4 and later

        return Path(knobs.cache.dir)
    except (ImportError, AttributeError):
        return Path(os.environ.get("TRITON_CACHE_DIR") or Path.home() / ".triton" / "cache")


def _sources_digest() -> str:
    """The kernels' sources and the engine's (an installed bundle keeps only the kernels'):
    they decide which kernels run, and on what shapes."""
    digest = hashlib.sha256()
    for package in ("kernels", "engine"):
        folder = Path(__file__).resolve().parent.parent / package
        for path in sorted(folder.glob("*.py")):
            digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


def cache_tokens(translator: "Translator") -> int:
    """The tokens of the translator's decoder cache, which its stand-in's has too."""
    cache = translator.generator.runner.self_cache
    return cache.num_blocks * cache.block_size


def marker_path(translator: "Translator") -> Path:
    """The marker of a build for `translator` (see the module's docstring), beside Triton's cache."""
    import torch
    import triton

    device = translator.device
    described = {
        "sources": _sources_digest(),
        "triton": triton.__version__,
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(device),
        "capability": torch.cuda.get_device_capability(device),
        "config": dataclasses.asdict(translator.config),
        "dtype": str(translator.dtype),
        "rows": translator.generator.max_rows,
        "cache_tokens": cache_tokens(translator),
    }
    name = hashlib.sha256(json.dumps(described, sort_keys=True, default=str).encode()).hexdigest()[:32]
    return triton_cache_dir() / f"dragoman-kernels-{name}.built"


class KernelBuild:
    """A spawned process compiling the engine's kernels into Triton's disk cache (module docstring)."""

    def __init__(self, spec: BuildSpec):
        self.spec = spec
        self.done = threading.Event()
        self.succeeded = False
        context = multiprocessing.get_context("spawn")  # not forked: the app's threads hold locks
        self.reasons, reporting = context.Pipe(duplex=False)  # why the build failed, one line
        self.process = context.Process(target=build_reporting, args=(spec, reporting), name="dragoman-kernel-build")

    @classmethod
    def start(cls, translator: "Translator") -> "KernelBuild | None":
        """A build for `translator`, started, with the references serving until it ends; None
        where none is needed: no Triton, a kernel already failed, or the marker says it was done."""
        if translator.device.type != "cuda" or not kernels.HAVE_TRITON or kernels.triton_failed():
            return None
        marker = marker_path(translator)
        if marker.exists():
            return None
        from dragoman.engine.device import DTYPES

        config = translator.config
        spec = BuildSpec(
            str(translator.model_dir), str(translator.device),
            next(name for name, dtype in DTYPES.items() if dtype == translator.dtype),
            stand_in_layers(config.encoder_layers), stand_in_layers(config.decoder_layers),
            translator.generator.max_rows, cache_tokens(translator), str(marker),
        )
        return cls(spec).launch()

    def launch(self) -> "KernelBuild | None":
        """Start the process, the references serving until it ends; None if it could not start."""
        with _lock:
            _running.add(self)
            kernels.set_building(True)
        try:
            self.process.start()
        except Exception as e:  # no process could start: the kernels compile where they are used
            log.warning("the GPU kernels could not be built apart (%s); they compile on first use", e)
            self._ended(False)
            return None
        threading.Thread(target=self._watch, name="dragoman-kernel-build-watch", daemon=True).start()
        return self

    def _watch(self) -> None:
        self.process.join()
        self._ended(self.process.exitcode == 0)

    def _ended(self, succeeded: bool) -> None:
        if not succeeded and self.process.exitcode is not None:
            reason = self.reasons.recv() if self.reasons.poll() else f"exit code {self.process.exitcode}"
            log.warning("building the GPU kernels apart failed (%s); they compile on first use", reason)
        self.succeeded = succeeded
        with _lock:
            _running.discard(self)
            kernels.set_building(bool(_running))
        self.done.set()

    @property
    def running(self) -> bool:
        return not self.done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Whether the build ended within `timeout` seconds."""
        return self.done.wait(timeout)


def build_reporting(spec: BuildSpec, reasons) -> None:
    """`build` in the spawned process; what fails it goes back through `reasons` as one line (the
    app says it), not as a traceback on the app's error output."""
    try:
        build(spec)
    except Exception as e:
        reasons.send(kernels.error_line(e))
        raise SystemExit(1) from None


def build(spec: BuildSpec) -> None:
    """The spawned process: the stand-in's warm-up and short documents, then the marker."""
    marker = Path(spec.marker)
    if marker.exists():  # another launch's build finished meanwhile
        return
    from dragoman.engine.translator import Translator

    translator = Translator(spec.model_dir, spec.device, spec.dtype, max_rows=spec.max_rows,
                            cache_tokens=spec.cache_tokens,
                            layers=(spec.encoder_layers, spec.decoder_layers))
    try:
        translator.warm_up()  # typed text with the default options
        options = translator.default_options(max_new_tokens=16)  # the stand-in's words need not end
        for count in STAND_IN_DOCUMENTS:
            texts = [STAND_IN_SENTENCES[i % len(STAND_IN_SENTENCES)] for i in range(count)]
            for terms in STAND_IN_TERMS:
                translator.translate(texts, "eng_Latn", "fra_Latn", options, terms=[terms] * count)
    finally:
        translator.teardown()
    if kernels.triton_failed():
        raise RuntimeError(kernels.unavailable_message())
    marker.parent.mkdir(parents=True, exist_ok=True)
    written = marker.with_name(f"{marker.name}.{os.getpid()}")
    written.write_text(json.dumps(dataclasses.asdict(spec)) + "\n")
    os.replace(written, marker)
