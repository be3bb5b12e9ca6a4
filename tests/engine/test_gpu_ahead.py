"""engine/gpu_ahead.py: the GPU's context started by the driver's calls before torch is imported,
and taken up by torch; Triton's key and the weights read meanwhile."""

import subprocess
import sys
import textwrap
from concurrent.futures import Future

import pytest
import torch

from dragoman.engine import gpu_ahead
from dragoman.engine.gpu_ahead import open_gpu_ahead
from dragoman.engine.tokenizer import file_key


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


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_weights_read_ahead_into_locked_memory_are_taken_up_once_and_load_as_from_the_file(tiny_checkpoint):
    script = textwrap.dedent(f"""
        import time
        from pathlib import Path
        from dragoman.engine import gpu_ahead, weights
        folder = Path({str(tiny_checkpoint)!r})
        gpu_ahead.open_gpu_ahead("cuda:0", folder).join()
        while not all(reading.done() for reading in list(gpu_ahead._pinned.values())):
            time.sleep(0.01)  # the read, on a thread of its own
        taken = []
        real = weights.pinned_weights
        weights.pinned_weights = lambda path: taken.append(real(path)) or taken[-1]
        import torch
        from dragoman.engine.config import load_config
        config = load_config(folder)
        on_gpu = weights.load_weights(folder, config, torch.float32, torch.device("cuda:0"))
        on_cpu = weights.load_weights(folder, config, torch.float32, torch.device("cpu"))
        same = all(torch.equal(on_gpu[name].cpu(), on_cpu[name]) for name in on_cpu)
        print(len(taken), taken[0] is not None, taken[0].freed, taken[1] is None, same)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    # read ahead, taken by the first load and freed after it (by the driver, from the engine's
    # thread); the second found nothing; the same weights
    assert done.stdout.split() == ["2", "True", "True", "True", "True"]


def test_weights_still_being_read_ahead_are_not_waited_for_and_are_freed_once_read(tiny_checkpoint):
    path = tiny_checkpoint / "model.safetensors"
    reading = Future()
    gpu_ahead._pinned[file_key(path)] = reading
    assert gpu_ahead.pinned_weights(path) is None  # the engine reads the file itself meanwhile
    assert gpu_ahead._pinned == {}

    class Read:
        freed = False

        def free(self):
            self.freed = True

    read = Read()
    reading.set_result(read)
    assert read.freed
