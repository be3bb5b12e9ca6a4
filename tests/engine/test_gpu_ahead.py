"""engine/gpu_ahead.py: the GPU's context started by the driver's calls before torch is imported,
and taken up by torch."""

import subprocess
import sys
import textwrap

import pytest
import torch

from dragoman.engine import gpu_ahead
from dragoman.engine.gpu_ahead import open_gpu_ahead


def test_nothing_is_started_for_the_cpu_or_a_name_torch_refuses():
    assert open_gpu_ahead("cpu") is None
    assert open_gpu_ahead("cuda:x") is None
    assert open_gpu_ahead("tpu") is None


def test_whether_torch_is_a_cuda_build_is_told_without_importing_it(monkeypatch):
    assert gpu_ahead.torch_has_cuda() == (torch.version.cuda is not None)
    script = "import sys; from dragoman.engine.gpu_ahead import torch_has_cuda; torch_has_cuda(); print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["False"], done.stderr
    monkeypatch.setattr(gpu_ahead, "torch_has_cuda", lambda: False)  # a CPU build on a machine with a GPU
    assert open_gpu_ahead("cuda") is None and open_gpu_ahead("auto") is None


def test_a_machine_without_the_driver_is_left_to_torch(monkeypatch):
    monkeypatch.setattr(gpu_ahead, "torch_has_cuda", lambda: True)
    monkeypatch.setattr(gpu_ahead, "DRIVER", "libno-such-driver.so.1")
    thread = open_gpu_ahead("cuda")
    assert thread is not None
    thread.join(timeout=30)
    assert not thread.is_alive()  # ended quietly: no error on its thread, nothing raised here


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_torch_takes_up_the_context_made_ahead():
    # A process of its own: this one's torch has its context already.
    script = textwrap.dedent("""
        import ctypes
        from dragoman.engine.gpu_ahead import DRIVER, open_gpu_ahead
        open_gpu_ahead("cuda:0").join()
        driver = ctypes.CDLL(DRIVER)
        flags, active = ctypes.c_uint(), ctypes.c_int()
        assert driver.cuDevicePrimaryCtxGetState(0, ctypes.byref(flags), ctypes.byref(active)) == 0
        made = active.value
        import torch
        torch.zeros(1, device="cuda:0")
        ahead, current = ctypes.c_void_p(), ctypes.c_void_p()
        driver.cuDevicePrimaryCtxRetain(ctypes.byref(ahead), 0)
        driver.cuCtxGetCurrent(ctypes.byref(current))
        print(made, ahead.value == current.value)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "True"]


def test_tritons_key_of_its_own_files_is_made_ahead_without_torch_and_kept():
    pytest.importorskip("triton")
    script = textwrap.dedent("""
        import sys
        from dragoman.engine.gpu_ahead import hash_triton
        made = hash_triton()
        from triton.runtime.cache import triton_key
        print(made, 'torch' in sys.modules, triton_key.cache_info().currsize)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False", "1"]  # made, torch not imported, kept for the kernels
