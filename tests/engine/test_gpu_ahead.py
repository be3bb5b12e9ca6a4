"""engine/gpu_ahead.py: the GPU's context started by the driver's calls before torch is imported,
and taken up by torch."""

import ctypes
import json
import os
import struct
import subprocess
import sys
import textwrap
from concurrent.futures import Future

import pytest
import torch
from host_driver import HostDriver, weights_file

from dragoman.engine import gpu_ahead, weights
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


@pytest.fixture
def host_driver(monkeypatch):
    driver = HostDriver()
    monkeypatch.setattr(gpu_ahead, "_driver", lambda: driver)
    return driver


def test_a_weights_files_bytes_are_copied_as_its_header_places_them(tmp_path, host_driver):
    tensors = weights_file(tmp_path / "model.safetensors")
    upload = gpu_ahead._upload_file(host_driver, ctypes.c_void_p(1), 0, tmp_path / "model.safetensors")
    assert upload is not None and upload.pointer in host_driver.buffers
    assert weights._upload_serves(upload, list(tensors))
    raw = torch.frombuffer(host_driver.buffers[upload.pointer], dtype=torch.uint8)  # (size,) as on the device
    views = dict(weights.upload_views(raw, upload.tensors, list(tensors)))
    for name, tensor in tensors.items():
        assert views[name].dtype == tensor.dtype and torch.equal(views[name], tensor)
    upload.free()
    assert not host_driver.buffers and upload.pointer == 0


def test_no_room_on_the_device_or_a_hostile_header_leaves_the_file_to_be_read(tmp_path, host_driver):
    path = tmp_path / "model.safetensors"
    tensors = weights_file(path)
    host_driver.free = 1000  # the file's bytes fit, their cast copy and the headroom not
    assert gpu_ahead._upload_file(host_driver, ctypes.c_void_p(1), 0, path) is None and not host_driver.buffers
    host_driver.free = 1 << 40
    data = path.read_bytes()
    (header_size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_size])
    header["a.bias"]["data_offsets"][1] += 1 << 30  # past the file's end
    hostile = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(hostile)) + hostile + data[8 + header_size:])
    assert gpu_ahead._upload_file(host_driver, ctypes.c_void_p(1), 0, path) is None and not host_driver.buffers
    path.write_bytes(struct.pack("<Q", 1 << 40) + data[8:])  # a header larger than the file
    assert gpu_ahead._upload_file(host_driver, ctypes.c_void_p(1), 0, path) is None
    weights_file(path)
    upload = gpu_ahead._upload_file(host_driver, ctypes.c_void_p(1), 0, path)
    shapes = dict(upload.tensors)
    upload.tensors["b.weight"] = (shapes["b.weight"][0], [3, 4], *shapes["b.weight"][2:])  # not its bytes' shape
    assert not weights._upload_serves(upload, list(tensors))
    assert weights._upload_serves(upload, ["a.bias", "c.weight"])


def test_an_upload_of_a_file_changed_since_is_freed_not_taken(tmp_path, host_driver):
    path = tmp_path / "model.safetensors"
    weights_file(path)
    upload = gpu_ahead._upload_file(host_driver, ctypes.c_void_p(1), 0, path)
    done = Future()
    done.set_result(upload)
    gpu_ahead._uploads[(path.resolve(), 0)] = done
    weights_file(path)
    os.utime(path, ns=(0, 0))
    assert gpu_ahead.take_upload(path, 0) is None
    assert not host_driver.buffers and not gpu_ahead._uploads
    assert gpu_ahead.take_upload(path, 0) is None  # none asked for
    left = Future()
    gpu_ahead._uploads[(path.resolve(), 0)] = left
    gpu_ahead.drop_uploads()  # one not taken, freed once done
    left.set_result(gpu_ahead._upload_file(host_driver, ctypes.c_void_p(1), 0, path))
    assert not host_driver.buffers and not gpu_ahead._uploads


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_weights_copied_ahead_load_as_those_read_after_and_are_freed(tiny_checkpoint):
    script = textwrap.dedent(f"""
        from dragoman.engine import gpu_ahead
        gpu_ahead.open_gpu_ahead("cuda:0", {str(tiny_checkpoint)!r}).join()
        import torch
        from dragoman.engine.checkpoint import open_checkpoint
        from dragoman.engine.weights import load_weights
        config = open_checkpoint({str(tiny_checkpoint)!r}).config
        device = torch.device("cuda", 0)
        assert gpu_ahead._uploads, "nothing copied ahead"
        for dtype in (torch.bfloat16, torch.float32):
            ahead = load_weights({str(tiny_checkpoint)!r}, config, dtype, device)
            assert not gpu_ahead._uploads
            read = load_weights({str(tiny_checkpoint)!r}, config, dtype, device)
            assert ahead.keys() == read.keys()
            assert all(torch.equal(ahead[k], read[k]) for k in read), "not the same weights"
            del ahead, read
            gpu_ahead.open_gpu_ahead("cuda:0", {str(tiny_checkpoint)!r}).join()
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok"]
