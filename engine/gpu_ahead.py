"""The GPU's driver and context started while torch is imported (`open_gpu_ahead`). No torch here.

torch makes the device's primary context on first use, after it is imported: the driver's start
and the context take a warm launch a few tenths of a second (docs/performance.md, "Start-up").
Made by the driver's own calls on a thread of its own, from before torch's import, the context is
the one torch then takes up. The same thread then has Triton hash its own files, which it does
once a process before the first kernel it loads from its disk cache (Triton does not import torch).

Meanwhile another thread reads the model's safetensors files into page-locked memory that the
driver allocates (`PinnedFile`): copied from there, the weights reach the GPU by DMA, several
times faster than from the pageable memory of a memory map (engine/weights.py takes them up with
`pinned_weights`; docs/performance.md, "Start-up"). Locked memory is the machine's to lend, so
only a model of up to a quarter of its memory (and PINNED_MAX_BYTES) is read so, and what the
engine does not take within PINNED_KEEP_S seconds is given back.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
import threading
from concurrent.futures import Future
from pathlib import Path

from dragoman.engine.tokenizer import file_key

DRIVER = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
PINNED_MAX_BYTES = 8 << 30
PINNED_KEEP_S = 60.0
CU_MEMHOSTALLOC_PORTABLE = 1  # page-locked for every context of the process
READ_CHUNK = 64 << 20  # bytes a read: each releases the interpreter


def open_gpu_ahead(device: str, model_dir: str | Path | None = None) -> threading.Thread | None:
    """Start the CUDA driver and `device`'s primary context ("auto", "cuda" or "cuda:N"), then
    Triton's key of its own files (`hash_triton`), on a thread of its own, which is returned; with
    `model_dir`, its safetensors weights are read into page-locked memory on another. Nothing for
    "cpu" or a name torch would refuse, nothing with a build of torch without CUDA (the app's CPU
    package on a machine with a GPU would hold a context for nothing), and nothing where the driver
    is missing or fails: torch starts the GPU itself then, and reports what is wrong."""
    if not torch_has_cuda():
        return None
    if device in ("auto", "cuda"):
        index = 0
    elif device.startswith("cuda:") and device.removeprefix("cuda:").isdigit():
        index = int(device.removeprefix("cuda:"))
    else:
        return None
    thread = threading.Thread(target=_start_gpu, args=(index, model_dir), name="dragoman-gpu-ahead", daemon=True)
    thread.start()
    return thread


def torch_has_cuda() -> bool:
    """Whether the installed torch is a CUDA build, by its library files: torch is not imported."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return False
    lib = Path(next(iter(spec.submodule_search_locations))) / "lib"
    return any(lib.glob("libtorch_cuda*")) or any(lib.glob("torch_cuda*"))  # Linux's, Windows' names


def _start_gpu(index: int, model_dir: str | Path | None) -> None:
    driver = _driver()
    context = _retain_primary_context(driver, index) if driver is not None else None
    if driver is None or context is None:
        return
    if model_dir is not None:
        read_weights_ahead(model_dir, driver, context)
    hash_triton()


def _driver() -> ctypes.CDLL | None:
    try:
        driver = ctypes.CDLL(DRIVER)
    except OSError:
        return None  # no NVIDIA driver: a machine without a GPU
    driver.cuMemHostAlloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_uint]
    driver.cuMemFreeHost.argtypes = [ctypes.c_void_p]
    driver.cuCtxSetCurrent.argtypes = [ctypes.c_void_p]
    return driver


def _retain_primary_context(driver: ctypes.CDLL, index: int) -> ctypes.c_void_p | None:
    """The device's primary context, made; None where it could not be."""
    device, context = ctypes.c_int(), ctypes.c_void_p()
    # Each call releases the interpreter (ctypes): torch's import goes on meanwhile.
    made = (driver.cuInit(0) == 0 and driver.cuDeviceGet(ctypes.byref(device), index) == 0
            # kept for the process, as torch keeps it
            and driver.cuDevicePrimaryCtxRetain(ctypes.byref(context), device) == 0)
    return context if made else None


class PinnedFile:
    """A file's bytes in page-locked memory the CUDA driver allocated, until `free`."""

    def __init__(self, driver: ctypes.CDLL, context: ctypes.c_void_p, address: int, size: int):
        self._driver, self._context, self._address, self.size = driver, context, address, size
        self.data: memoryview | None = memoryview((ctypes.c_char * size).from_address(address)).cast("B")
        self.freed = False

    def free(self) -> None:
        """Give the memory back (once; no tensor may use it after)."""
        if self.data is None:
            return
        try:
            self.data.release()
        except BufferError:  # a tensor still views it (an error on its way up): kept, not freed under it
            return
        self.data = None
        # The driver frees in a current context: this thread may not have touched the GPU yet (the
        # context is the device's primary one, which torch makes current on its threads too).
        self.freed = (self._driver.cuCtxSetCurrent(self._context) == 0
                      and self._driver.cuMemFreeHost(ctypes.c_void_p(self._address)) == 0)

    @classmethod
    def read(cls, driver: ctypes.CDLL, context: ctypes.c_void_p, path: Path, size: int) -> PinnedFile | None:
        """The file read in, or None where the memory could not be had or the file read."""
        address = ctypes.c_void_p()
        if driver.cuMemHostAlloc(ctypes.byref(address), size, CU_MEMHOSTALLOC_PORTABLE) != 0 or not address.value:
            return None
        pinned = cls(driver, context, address.value, size)
        try:
            assert pinned.data is not None
            with open(path, "rb", buffering=0) as f:
                done = 0
                while done < size:
                    got = f.readinto(pinned.data[done : done + READ_CHUNK])
                    if not got:
                        raise OSError("the file ended early")
                    done += got
        except OSError:
            pinned.free()
            return None
        return pinned


# Weights read ahead, by their file's (path, size, mtime): taken once by `pinned_weights`.
_pinned: dict[tuple, Future[PinnedFile | None]] = {}
_pinned_lock = threading.Lock()


def read_weights_ahead(model_dir: str | Path, driver: ctypes.CDLL, context: ctypes.c_void_p) -> None:
    """Read the model's safetensors files into page-locked memory, one after another, on a thread
    of its own (`context` made current there, as the driver's allocation needs)."""
    from dragoman.engine.weights import weight_files  # which imports this module

    try:
        paths = [path for path in weight_files(model_dir) if path.suffix == ".safetensors"]
    except Exception:  # a broken folder: the engine says what is wrong with it
        return
    files = [(path, key) for path in paths if (key := file_key(path)) is not None]
    if not files or len(files) < len(paths) or sum(key[1] for _, key in files) > min(PINNED_MAX_BYTES, _memory_bytes() // 4):
        return
    with _pinned_lock:
        for pinned in _pinned.values():  # an earlier model's, not taken
            pinned.add_done_callback(_free_result)
        _pinned.clear()
        readings: dict[tuple, Future[PinnedFile | None]] = {key: Future() for _, key in files}
        _pinned.update(readings)

    def read() -> None:
        driver.cuCtxSetCurrent(context)
        for path, key in files:
            future = readings[key]
            try:
                future.set_result(PinnedFile.read(driver, context, path, key[1]))
            except BaseException:
                future.set_result(None)
        timer = threading.Timer(PINNED_KEEP_S, _drop, args=(list(readings),))
        timer.daemon = True
        timer.start()

    threading.Thread(target=read, name="dragoman-weights-ahead", daemon=True).start()


def pinned_weights(path: Path) -> PinnedFile | None:
    """The file's bytes read ahead into page-locked memory, if they were, all of them by now, and
    the file has not changed since; the caller frees them. None otherwise: a read still going on
    is freed once it ends, and the engine reads the file itself, as it would have without."""
    key = file_key(path)
    with _pinned_lock:
        reading = _pinned.pop(key, None) if key is not None else None
    if reading is None:
        return None
    if not reading.done():
        reading.add_done_callback(_free_result)
        return None
    return reading.result()


def _drop(keys: list[tuple]) -> None:
    """Free what the engine did not take."""
    with _pinned_lock:
        left = [_pinned.pop(key) for key in keys if key in _pinned]
    for reading in left:
        reading.add_done_callback(_free_result)


def _free_result(reading: Future[PinnedFile | None]) -> None:
    pinned = reading.result()
    if pinned is not None:
        pinned.free()


def _memory_bytes() -> int:
    """The machine's memory; 0 where it cannot be told (nothing is read ahead then)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # Windows has no sysconf
        return 0


def hash_triton() -> bool:
    """Have Triton compute the key of its own files (its compiler library, half a gigabyte, among
    them), which it keeps for the process and puts in every kernel's disk-cache key: a few tenths
    of a second that would otherwise fall on the first sentence's first kernel. Hashing releases
    the interpreter. Whether Triton has such a key (nothing where it is missing or fails: its first
    kernel reports what is wrong)."""
    for module in ("triton.runtime.cache", "triton.compiler.compiler"):  # where later and earlier Tritons keep it
        try:
            importlib.import_module(module).triton_key()
            return True
        except Exception:  # not there; or any failure of an optional head start
            continue
    return False
