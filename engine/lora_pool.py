"""The pool of adapter slots: which adapter each slot holds, who uses it, and adapters read off the step loop.

The pool keeps `num_slots` adapters of the adapters folder resident on the device
(engine/lora_layers.py holds their weights). A request holds its slot by reference count from
admission to its end; an adapter goes into an empty slot or the least recently used idle one,
never one that a running request holds. When an adapter's files change on disk, requests
admitted afterwards get the new version in another slot, while running requests finish on the
old one, whose slot is freed when they are done.

Reading an adapter (its files, their checks, a conversion to the slots' dtype) takes a while: a
step loop that did it in place would stall every running sentence. So `slot_for` only says
whether the adapter is ready; one that is not is read on a thread of the pool's own, which
touches neither the device nor the pool's tables: it hands a checked copy in host memory
(pinned for a GPU) back through a future. The generator calls `install_staged` at the top of each
step, which copies what has been read into slots, queued on the device behind the steps already
queued; the requests that waited for it are admitted in that step. A broken adapter's error is
kept until its files change, and fails every request that names it.
"""

from __future__ import annotations

import itertools
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from dragoman.engine.config import NllbConfig
from dragoman.engine.lora_layers import LoraLayers
from dragoman.engine.peft_adapter import Adapter, AdapterError, LoraModule, check_adapter_name, load_adapter, signature

DEFAULT_SLOTS = 4


class NoFreeSlot(RuntimeError):
    """Every adapter slot is held by a running request."""


@dataclass(frozen=True)
class _Read:
    """What the staging thread hands back for one adapter: a copy ready for a slot, or why it is unusable."""

    signature: tuple | None  # the files' identity when the read began (None: one was missing)
    adapter: Adapter | None
    error: str | None


def staged(adapter: Adapter, dtype: torch.dtype, pin: bool) -> Adapter:
    """`adapter` with its LoRA matrices in the slots' `dtype` and its norms in float32, each kind in
    one block of host memory, pinned where `pin`: the copies into a slot then queue without waiting."""
    matrices = [t for lora in adapter.lora.values() for t in (lora.a, lora.b)]
    norms = [t for pair in adapter.norms.values() for t in pair]
    matrices, norms = _packed(matrices, dtype, pin), _packed(norms, torch.float32, pin)
    lora = {module: LoraModule(matrices[2 * i], matrices[2 * i + 1], old.scale)
            for i, (module, old) in enumerate(adapter.lora.items())}
    return replace(adapter, lora=lora, norms={module: (norms[2 * i], norms[2 * i + 1])
                                              for i, module in enumerate(adapter.norms)})


def _packed(tensors: list[torch.Tensor], dtype: torch.dtype, pin: bool) -> list[torch.Tensor]:
    """Copies of `tensors` in `dtype`, views of one host buffer (one pinned allocation, not hundreds)."""
    flat = torch.empty(sum(t.numel() for t in tensors), dtype=dtype, pin_memory=pin and bool(tensors))
    out, start = [], 0
    for t in tensors:
        view = flat[start : start + t.numel()].view(t.shape)
        view.copy_(t)
        out.append(view)
        start += t.numel()
    return out


def _current_signature(path: Path) -> tuple | None:
    """`signature(path)`, None while a file is missing."""
    try:
        return signature(path)
    except OSError:
        return None


def read_adapter(path: Path, name: str, config: NllbConfig, dtype: torch.dtype, pin: bool) -> _Read:
    """The staging thread's work for one adapter: files and host tensors only."""
    before = _current_signature(path)
    try:
        return _Read(before, staged(load_adapter(path, config, name), dtype, pin), None)
    except AdapterError as e:
        return _Read(before, None, str(e))
    except OSError as e:  # a file removed or replaced between two of its checks: this adapter's failure alone
        return _Read(before, None, f"{path}: unreadable ({e})")


class LoraPool:
    """`num_slots` resident adapters on the device, reference-counted by the requests using them.

    The method names are the engine contract's (`acquire_adapter_slot`, `release_adapter_slot`,
    `swap_lora_from_disk`, `promote_lora_from_disk`); slot -1 is the base model.
    """

    def __init__(self, config: NllbConfig, num_slots: int, device: torch.device, dtype: torch.dtype,
                 folder: str | Path | None = None):
        if num_slots < 1:
            raise ValueError("an adapter pool needs at least one slot")
        self.config = config
        self.num_slots = num_slots
        self.device = device
        self.dtype = dtype
        self.folder = Path(folder) if folder else None
        self.layers = LoraLayers(config, num_slots, device, dtype)
        self.names: list[str | None] = [None] * num_slots  # None: empty, or retired (files changed)
        self.refs = [0] * num_slots
        self.identities = [0] * num_slots
        self.signatures: list[tuple | None] = [None] * num_slots
        self.last_used = [0] * num_slots
        self._clock = itertools.count(1)
        # Adapters off the step loop: reads under way, copies read and waiting for a free slot, and
        # the errors of broken ones with the signature of the files they were read from.
        self._staging: ThreadPoolExecutor | None = None  # started on the first read
        self._reads: dict[str, Future] = {}
        self._staged: dict[str, Adapter] = {}
        self._failed: dict[str, tuple[tuple | None, str]] = {}

    # -- finding adapters ----------------------------------------------------------------------

    def path_of(self, name: str) -> Path:
        check_adapter_name(name)
        if self.folder is None:
            raise AdapterError(f"adapter {name!r}: no adapters folder is set")
        path = self.folder / name
        if not path.is_dir():
            raise AdapterError(f"adapter {name!r}: no such folder in {self.folder}")
        return path

    def resident(self) -> dict[str, int]:
        """Adapter name -> slot, for the current version of each resident adapter."""
        return {name: slot for slot, name in enumerate(self.names) if name is not None}

    def slot_for(self, name: str) -> int | None:
        """The slot holding the current version of `name`; None while it is not ready (being read, or
        read and waiting for a slot no running request holds), which starts its read if none is
        under way. AdapterError if it is unusable: a bad name, no such folder, or files a read
        found broken (until they change). Costs a few file stats, never a read."""
        path = self.path_of(name)
        current = _current_signature(path)
        slot = self.resident().get(name)
        if slot is not None:
            if current is not None and current == self.signatures[slot]:
                return slot
            self.names[slot] = None  # changed on disk: its running requests finish on this copy
        failed = self._failed.get(name)
        if failed is not None:
            if failed[0] == current:
                raise AdapterError(failed[1])
            del self._failed[name]  # the files changed since: read them again
        ready = self._staged.get(name)
        if ready is not None:
            if ready.signature == current:
                return None  # read, waiting for a free slot
            del self._staged[name]
        if name not in self._reads:
            if self._staging is None:
                self._staging = ThreadPoolExecutor(1, thread_name_prefix="adapter-staging")
            pin = self.device.type == "cuda"
            self._reads[name] = self._staging.submit(read_adapter, path, name, self.config, self.dtype, pin)
        return None

    def install_staged(self, timeout: float = 0.0) -> list[str]:
        """Copy the adapters read since the last call into slots, while slots no running request
        holds allow; returns their names. Called at a step boundary. `timeout`: when no read has
        finished yet, wait up to that many seconds for one (a run with nothing else to do)."""
        if timeout and self._reads and not any(read.done() for read in self._reads.values()):
            wait(self._reads.values(), timeout, return_when=FIRST_COMPLETED)
        for name, read in list(self._reads.items()):
            if read.done():
                del self._reads[name]
                result: _Read = read.result()
                if result.adapter is not None:
                    self._staged[name] = result.adapter
                else:
                    self._failed[name] = (result.signature, result.error or f"{name}: unusable")
        installed = []
        for name in list(self._staged):
            victim = self._victim()
            if victim is None:
                break
            self._write(victim, self._staged.pop(name))
            installed.append(name)
        return installed

    def identity_of(self, name: str) -> int:
        """The identity of `name`'s current files: what a
        cache of translations keys on. Waits for the adapter's read, so it is for callers outside
        the step loop (between runs). AdapterError if it is unusable."""
        while (slot := self.slot_for(name)) is None:
            if name in self._staged:  # read, waiting for a free slot
                return self._staged[name].identity
            wait([self._reads[name]])
            self.install_staged()
        return self.identities[slot]

    # -- the contract --------------------------------------------------------------------------

    def acquire_adapter_slot(self, slot: int) -> int:
        """Take a reference on `slot` for a sentence; returns the slot taken, to be released exactly
        once, or -1 when nothing was taken (the base model)."""
        if slot >= 0:
            self.refs[slot] += 1
            self.last_used[slot] = next(self._clock)
        return slot

    def release_adapter_slot(self, resolved: int) -> None:
        if resolved >= 0:
            assert self.refs[resolved] > 0, f"adapter slot {resolved} released more often than acquired"
            self.refs[resolved] -= 1

    def promote_lora_from_disk(self, adapter_dir: str | Path, name: str) -> tuple[int, str | None]:
        """Read the adapter in `adapter_dir` now, on this thread, into an empty slot or the least
        recently used idle one; returns (slot, the evicted adapter's name or None). NoFreeSlot if
        every slot is held. (`slot_for` reads off the calling thread.)"""
        victim = self._victim()
        if victim is None:
            raise NoFreeSlot(f"all {self.num_slots} adapter slots are held by running requests")
        adapter = self._load(adapter_dir, name)
        evicted = self.names[victim]
        self._write(victim, adapter)
        return victim, evicted

    def swap_lora_from_disk(self, adapter_dir: str | Path, name: str, slot: int) -> None:
        """Read the adapter in `adapter_dir` now into `slot`, which no running request may hold."""
        if self.refs[slot]:
            raise RuntimeError(f"adapter slot {slot} is held by {self.refs[slot]} running request(s)")
        self._write(slot, self._load(adapter_dir, name))

    # -- slots ---------------------------------------------------------------------------------

    def _load(self, adapter_dir: str | Path, name: str) -> Adapter:
        return staged(load_adapter(adapter_dir, self.config, name), self.dtype, self.device.type == "cuda")

    def _victim(self) -> int | None:
        idle = [s for s in range(self.num_slots) if self.refs[s] == 0]
        if not idle:
            return None
        # Empty and retired slots first, then the least recently used.
        return min(idle, key=lambda s: (self.names[s] is not None, self.last_used[s]))

    def _write(self, slot: int, adapter: Adapter) -> None:
        for other, name in enumerate(self.names):
            if name == adapter.name:
                self.names[other] = None  # an older copy: running requests finish on it
        self.layers.write(slot, adapter)
        self.names[slot] = adapter.name
        self.identities[slot] = adapter.identity
        self.signatures[slot] = adapter.signature
        self.last_used[slot] = next(self._clock)
