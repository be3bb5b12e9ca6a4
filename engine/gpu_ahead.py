"""The GPU's driver and context started while torch is imported (`open_gpu_ahead`). No torch here.

torch makes the device's primary context on first use, after it is imported: the driver's start
and the context take a warm launch a few tenths of a second (docs/performance.md, "Start-up").
Made by the driver's own calls on a thread of its own, from before torch's import, the context is
the one torch then takes up. The same thread then has Triton hash its own files, which it does
once a process before the first kernel it loads from its disk cache (Triton does not import torch).
"""

from __future__ import annotations

import ctypes
import importlib.util
import sys
import threading
from pathlib import Path

DRIVER = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"


def open_gpu_ahead(device: str) -> threading.Thread | None:
    """Start the CUDA driver and `device`'s primary context ("auto", "cuda" or "cuda:N"), then
    Triton's key of its own files (`hash_triton`), on a thread of its own, which is returned.
    Nothing for "cpu" or a name torch would refuse, nothing with a build of torch without CUDA (the
    app's CPU package on a machine with a GPU would hold a context for nothing), and nothing where
    the driver is missing or fails: torch starts the GPU itself then, and reports what is wrong."""
    if not torch_has_cuda():
        return None
    if device in ("auto", "cuda"):
        index = 0
    elif device.startswith("cuda:") and device.removeprefix("cuda:").isdigit():
        index = int(device.removeprefix("cuda:"))
    else:
        return None
    thread = threading.Thread(target=_start_gpu, args=(index,), name="dragoman-gpu-ahead", daemon=True)
    thread.start()
    return thread


def torch_has_cuda() -> bool:
    """Whether the installed torch is a CUDA build, by its library files: torch is not imported."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return False
    lib = Path(next(iter(spec.submodule_search_locations))) / "lib"
    return any(lib.glob("libtorch_cuda*")) or any(lib.glob("torch_cuda*"))  # Linux's, Windows' names


def _start_gpu(index: int) -> None:
    if _retain_primary_context(index):
        hash_triton()


def _retain_primary_context(index: int) -> bool:
    """Whether the device's primary context was made."""
    try:
        driver = ctypes.CDLL(DRIVER)
    except OSError:
        return False  # no NVIDIA driver: a machine without a GPU
    device, context = ctypes.c_int(), ctypes.c_void_p()
    # Each call releases the interpreter (ctypes): torch's import goes on meanwhile.
    return (driver.cuInit(0) == 0 and driver.cuDeviceGet(ctypes.byref(device), index) == 0
            # kept for the process, as torch keeps it
            and driver.cuDevicePrimaryCtxRetain(ctypes.byref(context), device) == 0)


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
