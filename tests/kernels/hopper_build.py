"""Compile kernels' launches for Hopper (sm_90) without a GPU: `python hopper_build.py MODULE EXAMPLES
KERNEL [KERNEL ...]`, with TRITON_INTERPRET=0 (the interpreter's kernels cannot be compiled). EXAMPLES,
"test_module:function" in this folder, calls the kernels' wrappers on CPU tensors; meanwhile each
kernel (MODULE.KERNEL) is replaced by a recorder of its launches, whose arguments give the signatures
Triton compiles, down to the cubin (ptxas comes with triton). Prints "compiled N", N the launches of
all the kernels, or the compiler's error and exits 1: what a GPU would report as "GPU kernels
unavailable". Tests run it through `compile_for_hopper`.

The recorders see only launches `MODULE.KERNEL[grid](...)` that look the kernel up in the module's
globals as the wrapper runs. Any other launch (a kernel not named, or reached another way) is refused
with its name, and so is a named kernel never seen launched: neither passes as compiled.
"""

import importlib
import inspect
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import torch
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.compiler import compile as triton_compile
from triton.runtime.jit import JITFunction

POINTER_TYPES = {torch.float64: "fp64", torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16",
                 torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8", torch.uint8: "u8",
                 torch.bool: "u1"}
# The launch keywords that are compile options (any other keyword is the kernel's).
OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "launch_pdl", "launch_cooperative_grid")
HOPPER = GPUTarget("cuda", 90, 32)
DIVISIBLE = [["tt.divisibility", 16]]  # the attribute of pointers and ints that are multiples of 16


class UnrecordedLaunch(Exception):
    """A kernel launched otherwise than through a recorder: on CPU tensors it could not run anyway."""


def refuse_launch(kernel, *args, **kwargs):
    """Stands for `JITFunction.run` while the examples run."""
    raise UnrecordedLaunch(f"{kernel.fn.__module__}.{kernel.fn.__name__} launched unrecorded: name it as a KERNEL, "
                           "and launch it as MODULE.KERNEL[grid](...)")


class Recorder:
    """Stands for a @triton.jit kernel: `kernel[grid](*args, **kwargs)` records the launch."""

    def __init__(self):
        self.launches: list[tuple[tuple, dict]] = []

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.launches.append((args, kwargs))


def signature_of(kernel, args, kwargs):
    """(signature, constexprs, attrs) of a launch of `kernel`, specialised as Triton's launcher does
    it: tensors as pointers to their dtype, bools as u1, ints as i32, i64 or u64 (1 as the constexpr
    1), floats as fp32, None as a constexpr; pointers on 16 bytes and ints that are multiples of 16
    marked divisible by 16."""
    bound = inspect.signature(kernel.fn).bind(*args, **{k: v for k, v in kwargs.items() if k not in OPTIONS})
    bound.apply_defaults()
    signature, constexprs, attrs = {}, {}, {}
    for index, (param, (name, value)) in enumerate(zip(kernel.params, bound.arguments.items())):
        specialize = not param.do_not_specialize
        align = specialize and not param.do_not_specialize_on_alignment
        divisible = False
        if param.is_constexpr or value is None or (specialize and type(value) is int and value == 1):
            signature[name], constexprs[(index,)] = "constexpr", value
        elif isinstance(value, torch.Tensor):
            if value.dtype not in POINTER_TYPES:
                raise TypeError(f"{name}: no pointer type for {value.dtype}")
            signature[name] = "*" + POINTER_TYPES[value.dtype]
            divisible = align and value.data_ptr() % 16 == 0
        elif isinstance(value, bool):
            signature[name] = "u1"
        elif isinstance(value, int):
            signature[name] = "i32" if -(2**31) <= value < 2**31 else "i64" if -(2**63) <= value < 2**63 else "u64"
            divisible = align and value % 16 == 0
        elif isinstance(value, float):
            signature[name] = "fp32"
        else:
            raise TypeError(f"{name}: no Triton type for {type(value).__name__}")
        if divisible:
            attrs[(index,)] = DIVISIBLE
    return signature, constexprs, attrs


@contextmanager
def chained(wrapper):
    """Within it, `wrapper` launches its kernels chained, as on a Hopper GPU (kernels/_triton.py's
    `chained_launch` is false for CPU tensors)."""
    namespace = wrapper.__globals__
    plain = namespace["chained_launch"]
    namespace["chained_launch"] = lambda tensor: True
    try:
        yield
    finally:
        namespace["chained_launch"] = plain


def record(module, kernel_names, examples: str) -> dict[str, list[tuple[tuple, dict]]]:
    """The launches of each kernel `module.<name>` as the function `examples` makes them."""
    kernels = {name: getattr(module, name) for name in kernel_names}
    recorders = {name: Recorder() for name in kernel_names}
    test_module, function = examples.split(":")
    examples_function = getattr(importlib.import_module(test_module), function)
    launch = JITFunction.run
    try:
        JITFunction.run = refuse_launch
        for name, recorder in recorders.items():
            setattr(module, name, recorder)
        examples_function()
    finally:
        JITFunction.run = launch
        for name, kernel in kernels.items():
            setattr(module, name, kernel)
    return {name: recorder.launches for name, recorder in recorders.items()}


def main(module_name: str, examples: str, *kernel_names: str) -> int:
    module = importlib.import_module(module_name)
    try:
        launches = record(module, kernel_names, examples)
    except UnrecordedLaunch as error:
        print(error)
        return 1
    unseen = [name for name in kernel_names if not launches[name]]
    if unseen:
        print(f"no launch of {', '.join(unseen)} recorded: {examples} never launches it")
        return 1
    for name in kernel_names:
        kernel = getattr(module, name)
        for args, kwargs in launches[name]:
            signature, constexprs, attrs = signature_of(kernel, args, kwargs)
            options = {k: v for k, v in kwargs.items() if k in OPTIONS}
            try:
                triton_compile(ASTSource(fn=kernel, signature=signature, constexprs=constexprs, attrs=attrs),
                               target=HOPPER, options=options)
            except Exception as error:  # the compiler's own exception types
                print(f"{name}: {type(error).__name__}: {error}")
                return 1
    print(f"compiled {sum(map(len, launches.values()))}")
    return 0


def compile_for_hopper(module: str, examples: str, *kernels: str) -> subprocess.CompletedProcess:
    """This script run on `kernels` of `module` in a subprocess, as a test runs it: with the compiler,
    which a process cannot switch to once triton's interpreter is on (tests/kernels/conftest.py)."""
    return subprocess.run([sys.executable, str(Path(__file__)), module, examples, *kernels], cwd=Path(__file__).parent,
                          env=os.environ | {"TRITON_INTERPRET": "0"}, capture_output=True, text=True, timeout=600)


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
