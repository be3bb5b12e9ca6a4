"""The GPU's driver and context started while torch is imported (`open_gpu_ahead`). No torch here.

torch makes the device's primary context on first use, after it is imported: the driver's start
and the context take a warm launch a few tenths of a second (docs/performance.md, "Start-up").
Made by the driver's own calls on a thread of its own, from before torch's import, the context is
the one torch then takes up.
"""

from __future__ import annotations

import ctypes
import sys
import threading

DRIVER = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"


def open_gpu_ahead(device: str) -> threading.Thread | None:
    """Start the CUDA driver and `device`'s primary context ("auto", "cuda" or "cuda:N") on a thread
    of its own, which is returned. Nothing for "cpu" or a name torch would refuse, and nothing where
    the driver is missing or fails: torch starts the GPU itself then, and reports what is wrong."""
    if device in ("auto", "cuda"):
        index = 0
    elif device.startswith("cuda:") and device.removeprefix("cuda:").isdigit():
        index = int(device.removeprefix("cuda:"))
    else:
        return None
    thread = threading.Thread(target=_retain_primary_context, args=(index,), name="dragoman-gpu-ahead", daemon=True)
    thread.start()
    return thread


def _retain_primary_context(index: int) -> None:
    try:
        driver = ctypes.CDLL(DRIVER)
    except OSError:
        return  # no NVIDIA driver: a machine without a GPU
    device, context = ctypes.c_int(), ctypes.c_void_p()
    # Each call releases the interpreter (ctypes): torch's import goes on meanwhile.
    if driver.cuInit(0) == 0 and driver.cuDeviceGet(ctypes.byref(device), index) == 0:
        driver.cuDevicePrimaryCtxRetain(ctypes.byref(context), device)  # kept for the process, as torch keeps it
