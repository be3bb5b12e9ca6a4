"""The CUDA driver's calls that engine/gpu_ahead.py's weights upload makes, on host memory, for
tests without a GPU; and a weights file for it to copy."""

import ctypes

import torch
from safetensors.torch import save_file


class HostDriver:
    """The driver's calls an upload makes, on host memory: "device memory" is a host buffer."""

    def __init__(self, free: int = 1 << 40):
        self.free = free
        self.buffers: dict[int, ctypes.Array] = {}

    def cuMemGetInfo_v2(self, free, total):
        free._obj.value = total._obj.value = self.free
        return 0

    def cuMemAlloc_v2(self, pointer, size):
        buffer = ctypes.create_string_buffer(size)
        pointer._obj.value = ctypes.addressof(buffer)
        self.buffers[pointer._obj.value] = buffer
        return 0

    def cuMemcpyHtoD_v2(self, destination, source, size):
        ctypes.memmove(destination, source, size)
        return 0

    def cuMemFree_v2(self, pointer):
        del self.buffers[pointer]
        return 0

    def cuCtxSetCurrent(self, context):
        return 0


def weights_file(path):
    """A safetensors file of tensors of each float dtype and odd sizes, in no order of theirs."""
    g = torch.Generator().manual_seed(0)
    tensors = {"b.weight": torch.randn(3, 5, generator=g).half(), "a.bias": torch.randn(7, generator=g),
               "c.weight": torch.randn(2, 3, generator=g).bfloat16(), "d": torch.randn(1, generator=g).double()}
    save_file(tensors, str(path))
    return tensors
