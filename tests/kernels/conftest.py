"""Kernel tests run the Triton kernels on CPU tensors through triton's interpreter.

Each test checks the flash-attention rule: the kernel's largest error against a float64
computation is at most twice the reference's own largest error in the same dtype.

Kernels that write bfloat16 are tested here in float32 and float16 only: triton's interpreter
truncates float32 -> bfloat16 where the GPU rounds to nearest even, which alone doubles the error.
bench/kernels_check.py checks them in bfloat16 on the GPU.
"""

import importlib.util
import os
import sys

import pytest
import torch

# triton picks interpreter or compiler as it defines each @triton.jit function, its own library's
# included, so this must be set before anything imports triton.
_TRITON_IMPORTED_COMPILED = "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1"
os.environ["TRITON_INTERPRET"] = "1"

if importlib.util.find_spec("triton") is None:
    # Only the kernels need triton; test_dispatch.py checks the references alone still work.
    collect_ignore = ["test_add_layer_norm.py", "test_fused_linear.py", "test_logsoftmax_topk.py",
                      "test_slot_attention.py", "test_source_attention.py", "test_lora_kernel.py",
                      "test_embed_layer_norm.py", "test_step_inputs.py", "test_step_report.py",
                      "test_admit_rows.py", "test_source_scores.py", "test_fold_source.py",
                      "test_packed_attention.py", "test_store_kv.py"]


@pytest.fixture
def poisoned_outputs(monkeypatch):
    """Fill every tensor the wrappers allocate with NaN (floats) or -7 (integers), so an output
    element the kernel never writes shows up."""
    empty, empty_like = torch.empty, torch.empty_like

    def poison(t):
        return t.fill_(float("nan") if t.is_floating_point() else -7)

    monkeypatch.setattr(torch, "empty", lambda *args, **kwargs: poison(empty(*args, **kwargs)))
    monkeypatch.setattr(torch, "empty_like", lambda *args, **kwargs: poison(empty_like(*args, **kwargs)))


def max_error(out, truth):
    """Largest |out - truth|, counting equal infinities as exact."""
    diff = (out.double() - truth).abs()
    return diff.masked_fill(out.double() == truth, 0.0).max().item()


@pytest.fixture
def check_error():
    """check_error(kernel_out, ref_out, truth): the kernel's error is within twice the reference's,
    plus `slack` (float32's own rounding leaves the reference's error near zero)."""

    if _TRITON_IMPORTED_COMPILED:
        pytest.fail("triton was imported before tests/kernels/conftest.py set TRITON_INTERPRET=1: "
                    "set it in tests/conftest.py, or run tests/kernels on its own")

    def check(kernel_out, ref_out, truth, slack=1e-6):
        assert not kernel_out.isnan().any(), "kernel left NaN (unwritten) elements"
        kernel_err, ref_err = max_error(kernel_out, truth), max_error(ref_out, truth)
        assert kernel_err <= 2 * ref_err + slack, f"kernel error {kernel_err:.3g}, reference error {ref_err:.3g}"

    return check
