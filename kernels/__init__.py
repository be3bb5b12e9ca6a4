"""Kernels the engine calls. Each kernel module holds its op's public function beside its Triton
kernel and its plain-PyTorch reference, which states the op's meaning as a plain loop;
kernels/dispatch.py picks which of the two runs (the kernel on CUDA tensors where triton works, else
the reference); kernels/gpu_profile.py says what the GPU allows the kernels' plans. This file only
re-exports them, so that go-to-definition on `kernels.<name>` lands on the kernel module.

A kernel module and its function share a name: `from dragoman.kernels.argmax import argmax` imports
the submodule, which binds `kernels.argmax` to it, then binds the function over it. So each
submodule is imported here, before its function is bound: one imported first elsewhere, later,
would replace the function `kernels.<name>` with the module. Code that needs the module itself
takes it from `importlib.import_module("dragoman.kernels.<name>")`.
"""

from dragoman.kernels._triton import HAVE_TRITON  # noqa: F401
from dragoman.kernels.dispatch import building, error_line, set_building, triton_failed, unavailable_message
from dragoman.kernels.gpu_profile import PROFILES, DeviceProfile, device_profile, profile_name
from dragoman.kernels.row_state import AdmittedRows, NewTokens, RowState, StepInputs, StepReport
from dragoman.kernels.add_layer_norm import add_layer_norm, add_layer_norm_ref, add_layer_norm_triton  # noqa: F401
from dragoman.kernels.admit_rows import admit_rows, admit_rows_ref, admit_rows_triton  # noqa: F401
from dragoman.kernels.argmax import argmax, argmax_ref, argmax_triton  # noqa: F401
from dragoman.kernels.beam_advance import beam_advance, beam_advance_ref, beam_advance_triton  # noqa: F401
from dragoman.kernels.constrained_advance import (  # noqa: F401
    GAP, ConstraintTensors, constrained_advance, constrained_advance_ref, constrained_advance_triton,
)
from dragoman.kernels.embed_layer_norm import (  # noqa: F401
    embed_layer_norm, embed_layer_norm_ref, embed_layer_norm_triton,
)
from dragoman.kernels.fold_source import fold_source, fold_source_ref, fold_source_triton  # noqa: F401
from dragoman.kernels.fused_linear import (  # noqa: F401
    fused_linear, fused_linear_holds_weights, fused_linear_ref, fused_linear_triton,
)
from dragoman.kernels.logsoftmax_topk import logsoftmax_topk, logsoftmax_topk_ref, logsoftmax_topk_triton  # noqa: F401
from dragoman.kernels.lora import lora, lora_ref, lora_triton  # noqa: F401
from dragoman.kernels.packed_attention import (  # noqa: F401
    packed_attention, packed_attention_ref, packed_attention_triton,
)
from dragoman.kernels.slot_attention import slot_attention, slot_attention_ref, slot_attention_triton  # noqa: F401
from dragoman.kernels.source_attention import (  # noqa: F401
    source_attention, source_attention_ref, source_attention_triton,
)
from dragoman.kernels.source_scores import source_scores, source_scores_ref, source_scores_triton  # noqa: F401
from dragoman.kernels.step_inputs import step_inputs, step_inputs_ref, step_inputs_triton  # noqa: F401
from dragoman.kernels.step_report import step_report, step_report_ref, step_report_triton  # noqa: F401
from dragoman.kernels.store_kv import store_kv, store_kv_ref, store_kv_triton  # noqa: F401

__all__ = [
    "GAP", "AdmittedRows", "ConstraintTensors", "NewTokens", "PROFILES", "DeviceProfile", "RowState", "StepInputs", "StepReport",
    "add_layer_norm", "admit_rows", "argmax", "beam_advance", "building", "constrained_advance", "device_profile",
    "embed_layer_norm", "error_line", "fold_source", "fused_linear", "fused_linear_holds_weights", "logsoftmax_topk", "lora",
    "packed_attention", "profile_name", "set_building", "slot_attention", "source_attention", "source_scores",
    "step_inputs", "step_report", "store_kv", "triton_failed", "unavailable_message",
]
