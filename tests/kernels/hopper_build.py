"""Compile a kernel's launches for Hopper (sm_90) without a GPU: `python hopper_build.py MODULE KERNEL
EXAMPLES`, with TRITON_INTERPRET=0 (the interpreter's kernels cannot be compiled). EXAMPLES,
"test_module:function" in this folder, calls the kernel's wrapper on CPU tensors; the kernel
(MODULE.KERNEL) is replaced by a recorder of its launches, whose arguments give the signatures
Triton compiles, down to the cubin (ptxas comes with triton). Prints "compiled", or the compiler's
error and exits 1: what a GPU would report as "GPU kernels unavailable".
"""

import importlib
import sys

import torch
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.compiler import compile as triton_compile

TYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.int64: "i64",
         torch.int32: "i32", torch.uint8: "u8", torch.int8: "i8"}
OPTIONS = ("num_warps", "num_stages", "num_ctas", "launch_pdl", "launch_cooperative_grid")


class Recorder:
    """Stands for a @triton.jit kernel: `kernel[grid](*args, **kwargs)` records the launch."""

    def __init__(self):
        self.launches: list[tuple[tuple, dict]] = []

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.launches.append((args, kwargs))


def signature_of(kernel, args, kwargs):
    """Triton's signature and constants for a launch of `kernel`, as the launcher would specialise it."""
    names = list(kernel.arg_names)
    values = dict(zip(names, args)) | {k: v for k, v in kwargs.items() if k not in OPTIONS}
    signature, constants = {}, {}
    for name in names:
        value = values[name]
        if isinstance(value, torch.Tensor):
            signature[name] = "*" + TYPES[value.dtype]
        elif names.index(name) in kernel.constexprs or value is None or isinstance(value, bool) or value == 1:
            signature[name], constants[(names.index(name),)] = "constexpr", value
        elif isinstance(value, float):
            signature[name] = "fp32"
        else:
            signature[name] = "i32" if -(2**31) <= value < 2**31 else "i64"
    return signature, constants


def main(module_name: str, kernel_name: str, examples: str) -> int:
    module = importlib.import_module(module_name)
    kernel = getattr(module, kernel_name)
    recorder = Recorder()
    setattr(module, kernel_name, recorder)
    test_module, function = examples.split(":")
    getattr(importlib.import_module(test_module), function)()
    for args, kwargs in recorder.launches:
        signature, constants = signature_of(kernel, args, kwargs)
        options = {k: v for k, v in kwargs.items() if k in ("num_warps", "num_stages")}
        try:
            triton_compile(ASTSource(fn=kernel, signature=signature, constexprs=constants),
                           target=GPUTarget("cuda", 90, 32), options=options)
        except Exception as error:  # the compiler's own exception types
            print(f"{type(error).__name__}: {error}")
            return 1
    print(f"compiled {len(recorder.launches)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
