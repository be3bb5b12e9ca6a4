"""Kernels the engine calls: each function runs the Triton kernel when its tensors are on CUDA and
triton is installed, and the plain-PyTorch reference otherwise, or once a kernel has failed to
compile or launch in this process (`_dispatch`). Each kernel module states its op's meaning as a
plain loop; kernels/gpu_profile.py says what the GPU allows their plans.

The kernel modules are imported here, before the functions of the same names are defined: a
submodule imported later would replace the function `kernels.<name>` with the module.
"""

import logging

from dragoman.kernels._triton import HAVE_TRITON
from dragoman.kernels.add_layer_norm import add_layer_norm_ref, add_layer_norm_triton
from dragoman.kernels.admit_rows import admit_rows_ref, admit_rows_triton
from dragoman.kernels.argmax import argmax_ref, argmax_triton
from dragoman.kernels.beam_advance import beam_advance_ref, beam_advance_triton
from dragoman.kernels.constrained_advance import (GAP, ConstraintTensors, constrained_advance_ref,
                                                  constrained_advance_triton, fits_kernel)
from dragoman.kernels.embed_layer_norm import embed_layer_norm_ref, embed_layer_norm_triton
from dragoman.kernels.fold_source import fold_source_ref, fold_source_triton
from dragoman.kernels.fused_linear import fused_linear_ref, fused_linear_triton, holds_weights
from dragoman.kernels.logsoftmax_topk import logsoftmax_topk_ref, logsoftmax_topk_triton
from dragoman.kernels.lora import lora_ref, lora_triton
from dragoman.kernels.packed_attention import packed_attention_ref, packed_attention_triton
from dragoman.kernels.row_state import AdmittedRows, NewTokens, RowState, StepInputs, StepReport
from dragoman.kernels.gpu_profile import PROFILES, DeviceProfile, device_profile, profile_name
from dragoman.kernels.slot_attention import slot_attention_ref, slot_attention_triton
from dragoman.kernels.source_attention import source_attention_ref, source_attention_triton
from dragoman.kernels.source_scores import source_scores_ref, source_scores_triton
from dragoman.kernels.step_inputs import step_inputs_ref, step_inputs_triton
from dragoman.kernels.step_report import step_report_ref, step_report_triton
from dragoman.kernels.store_kv import store_kv_ref, store_kv_triton


log = logging.getLogger(__name__)
# Why the Triton kernels stopped being used in this process (None while they are): the first kernel
# that failed to compile or launch. Every kernel has a reference, so the work goes on without them.
_unavailable: str | None = None
# While the kernels are compiled in another process (engine/kernel_build.py, a first launch), the
# references serve; once it is done the kernels load from Triton's disk cache.
_building = False


def _on_gpu(tensor) -> bool:
    return tensor.is_cuda


def _use_triton(tensor) -> bool:
    return HAVE_TRITON and _unavailable is None and not _building and _on_gpu(tensor)


def _dispatch(kernel, reference, tensor, *args, **kwargs):
    """kernel(*args, **kwargs) where `tensor` is on a GPU that runs Triton, else reference(...).
    A kernel that fails to compile or launch (no C compiler for Triton's launchers, a GPU or
    driver Triton cannot build for, out of shared memory) turns the kernels off for the rest of
    the process, with one log line, and its reference does the work: a failed compile or load
    happens before the kernel writes anything. A failed assertion is a caller's mistake: it is
    raised."""
    if _use_triton(tensor):
        try:
            return kernel(*args, **kwargs)
        except AssertionError:
            raise
        except Exception as e:
            _turn_off(e)
    return reference(*args, **kwargs)


def _turn_off(error: Exception) -> None:
    global _unavailable
    _unavailable = error_line(error)
    log.warning("%s", unavailable_message())


def error_line(error: BaseException) -> str:
    """Why a kernel failed to compile or launch, in one line: "<type>: <its message's first line>"
    (compilers' messages run to pages)."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0][:200]}" if lines else type(error).__name__


def unavailable_message() -> str | None:
    """"GPU kernels unavailable: <reason>; using the slower PyTorch path" once a kernel has failed
    in this process, else None."""
    if _unavailable is None:
        return None
    return f"GPU kernels unavailable: {_unavailable}; using the slower PyTorch path"


def slot_attention(q, k, v, slot_table, rows, lens, scale, new: NewTokens | None = None):
    """Decode attention over one layer's cache of token slots. q (N, H, D); k, v (slots, H, D); row
    i reads the first lens[i] slots of slot_table[rows[i]] (slot_table (R, T) int32, rows (N,),
    lens (N,) int32, current token included). Given `new` (a NewTokens), first stores row i's new
    token in the cache at new.write_slots[i] (in place), which must be row i's last slot; then
    new.priors may name the row j whose new token is row i's position before last (-1: none).
    Returns (N, H, D) in q's dtype."""
    return _dispatch(slot_attention_triton, slot_attention_ref, q, q, k, v, slot_table, rows, lens, scale, new)


def source_attention(q, k, v, slot_table, rows, lens, scale, group):
    """Decode cross-attention for rows in runs of `group` (the beams of a sentence) that read the
    same source slots: row i reads the first lens[f] slots of slot_table[rows[f]], f = i - i % group
    the first row of its run, each slot's K/V read once per run. q (N, H, D) with N % group == 0;
    k, v (slots, H, D). Returns (N, H, D) in q's dtype."""
    return _dispatch(source_attention_triton, source_attention_ref, q, q, k, v, slot_table, rows, lens, scale, group)


def source_scores(x, a, c, length, scale, S):
    """One sentence's cross-attention probabilities (M, H * S) from the normed hidden state x (M, C)
    by associativity: a (H * S, C) = each head's W_q^T k_t, c (H * S,) float32 = b_q . k_t, the
    first `length` (1,) of each head's S slots valid (kernels/source_scores.py)."""
    return _dispatch(source_scores_triton, source_scores_ref, x, x, a, c, length, scale, S)


def fold_source(k, v, wq, bq, wo, length, a, c, b):
    """One sentence's cross K/V k, v (L, T, H, D), the first `length` (1,) int32 of T its tokens,
    folded into every layer's q weights and bias wq (L, C, C), bq (L, C) and output weights wo:
    writes a (L, H * S, C), c (L, H * S) float32 and b (L, C, H * S) in place, S >= T slots a head
    (kernels/fold_source.py)."""
    _dispatch(fold_source_triton, fold_source_ref, k, k, v, wq, bq, wo, length, a, c, b)


def packed_attention(qkv, starts, scale, heads, sources=None):
    """Self-attention within each source of qkv (T, 3C) packed one after another, source b its
    tokens starts[b] .. starts[b + 1] - 1 (starts (B + 1,) int32): (T, C). `sources` (T,) int32:
    each token's source, for many sources (kernels/packed_attention.py)."""
    return _dispatch(packed_attention_triton, packed_attention_ref, qkv, qkv, starts, scale, heads, sources)


def add_layer_norm(x, residual, weight, bias, eps, lead=False):
    """Returns (summed, normed): summed = x + residual in x's dtype (x itself when residual is
    None), normed = layer_norm(summed) * weight + bias with float32 statistics. `lead`: the kernel
    after reads nothing but weights before waiting, so may start first (kernels/_triton.py)."""
    return _dispatch(lambda: add_layer_norm_triton(x, residual, weight, bias, eps, lead),
                     lambda: add_layer_norm_ref(x, residual, weight, bias, eps), x)


def embed_layer_norm(tokens, positions, table, scale, position_table, offset, weight, bias, eps, lead=False):
    """Returns (x, normed) (N, C): x = table[tokens] * scale + position_table[positions + offset],
    each rounded to the tables' dtype, and normed = layer_norm(x) * weight + bias with float32
    statistics. tokens, positions (N,) integer. `lead` as in add_layer_norm."""
    return _dispatch(
        lambda: embed_layer_norm_triton(tokens, positions, table, scale, position_table, offset, weight, bias, eps,
                                        lead),
        lambda: embed_layer_norm_ref(tokens, positions, table, scale, position_table, offset, weight, bias, eps),
        table,
    )


def admit_rows(new, state, block_size, blocked):
    """Sets up the rows new.rows (n,) of newly admitted sentences (`new` an AdmittedRows): each one's
    decoder prefix, an empty cache (or, where its prior offset is nonzero, position 0 in the first
    block of the row that feeds it in the sentence's first step), HF's starting beam score (0 for
    beam 0, else `blocked`), no finished hypothesis, its adapter, its first block where it has one,
    the cross-attention slots of its source (blocks of `block_size` slots) and its length, and its
    sentence's max_length. `state` (a RowState) is updated in place (kernels/admit_rows.py)."""
    _dispatch(admit_rows_triton, admit_rows_ref, new.rows, new, state, block_size, blocked)


def step_inputs(rows, state, padding_row, block_size):
    """Each of the rows (N,) int64, or `padding_row` where its sentence is `finished`, feeds the token at
    its length n = kv_len[r] and claims its cache slot: kv_slots[r, n] = write_block[r] * block_size
    + n % block_size; kv_len[r] += 1 but for the padding row (length 0). Returns
    StepInputs: the rows fed r, tokens, positions (= n), write_slots (N,) int64 and self_lens
    (= n + 1), cross_lens (= cross_len[r]), priors (= i + prior_offset[r] where that is nonzero,
    else -1; the offset is spent) (N,) int32. `state` a RowState (engine/rows.py)."""
    return _dispatch(step_inputs_triton, step_inputs_ref, rows, rows, state, padding_row, block_size)


def step_report(done, rows, state, report, every):
    """After a step's search over rows (S, B), into the pinned host memory of `report` (a
    StepReport): done[s] and, for each sentence done (or every one, with `every`), its best
    hypothesis and its length n: its best finished one where it is done and has one (fin_hyp,
    fin_len of its first row), else its best running one (hyp[rows[s, 0], :kv_len[rows[s, 0]] + 1]),
    and its score (that finished one's fin_score, else the running one's score).
    `state` a RowState (engine/rows.py)."""
    _dispatch(step_report_triton, step_report_ref, done, done, rows, state, report, every)


def fused_linear_holds_weights(weight, M):
    """Whether `fused_linear` of x (M, K) and `weight` (N, K) reads only its weights before waiting
    for the kernel before it (so a norm before it may launch with `lead`)."""
    return _use_triton(weight) and holds_weights(weight, M)


def triton_failed() -> bool:
    """Whether a kernel failed in this process, so that only the references run."""
    return _unavailable is not None


def set_building(building: bool) -> None:
    """While `building`, the references serve on the GPU too: another process compiles the kernels
    into Triton's disk cache, from which they load once it is done."""
    global _building
    _building = building


def building() -> bool:
    """Whether the references serve while another process compiles the kernels (`set_building`)."""
    return _building


def fused_linear(x, weight, bias=None, relu=False):
    """x (M, K) @ weight (N, K)^T + bias, then ReLU if `relu`: (M, N) in x's dtype. For few rows:
    at hundreds of rows cuBLAS is faster."""
    return _dispatch(fused_linear_triton, fused_linear_ref, x, x, weight, bias, relu)


def store_kv(kv, slots, k, v):
    """Store kv (T, L, 2, H, D), every layer's K and V of T tokens, at flat slots (T,) of the cache
    k, v (L, slots, H, D), in place (kernels/store_kv.py)."""
    _dispatch(store_kv_triton, store_kv_ref, kv, kv, slots, k, v)


def argmax(logits):
    """logits (N, V), last dim contiguous: (N,) int64, each row's column of its largest value,
    lowest column on ties, first NaN where there is one (torch.argmax's rule)."""
    return _dispatch(argmax_triton, argmax_ref, logits, logits)


def logsoftmax_topk(logits, k):
    """Returns (values (N, k) float32, indices (N, k) int64, lse (N,) float32): each row's k
    largest log-softmax values, descending, equal logits lowest index first."""
    return _dispatch(logsoftmax_topk_triton, logsoftmax_topk_ref, logits, logits, k)


def beam_advance(values, tokens, rows, eos_from, state, penalty, *, eos_id, early_stopping, blocked, width):
    """One step of HF's beam search after `logsoftmax_topk(logits, 2B + 1)`, for S sentences of B beams in
    rows (S, B) int64: values, tokens (S * B, 2B + 1) each row's best log-probs, descending, and their
    tokens. A sentence's hypotheses' length n is state.kv_len[its first row], and becomes every one of
    its rows'; `</s>` is not allowed while n < eos_from. Updates the rows' state (a RowState) in place:
    score, fin_score; hyp, fin_hyp and kv_slots over positions [0, n], n < width; fin_len; improvable
    at each sentence's first row; finished, every row of a sentence done; and returns done (S,) bool.
    A sentence's max_length is state.limit at its first row. penalty (T + 1,) float32: n **
    length_penalty; early_stopping 0 (False), 1 (True), 2 ("never" and a positive length penalty);
    blocked: HF's -1e9. Ties go to the lower beam, then the better-ranked token."""
    return _dispatch(beam_advance_triton, beam_advance_ref, values, values, tokens, rows, eos_from, state, penalty,
                     eos_id=eos_id, early_stopping=early_stopping, blocked=blocked, width=width)



def constrained_advance(top_values, top_tokens, own_values, rows, met, tables, state, penalty, *, eos_id,
                        forced_eos_id, capacity, early_stopping, blocked, vocab, width):
    """One step of lexically constrained beam search (dynamic beam allocation) after the rows'
    log-softmax + top-k, for S sentences of W rows in rows (S, W) int64: top_values, top_tokens
    (S * W, K1 >= 2W) each row's best processed log-probs, descending, and their tokens; own_values
    (S * W, J) those of its sentence's constraint tokens tables.tokens; met (R, >= C) int32 the rows'
    met counts; tables a ConstraintTensors. Updates met and the rows' state (a RowState) as
    beam_advance does, the first `capacity` rows holding the finished hypotheses, and returns done
    (S,) bool. forced_eos_id: -1 for none; vocab: the logits' width. A group too wide for the kernel
    (many constraints, `fits_kernel`) runs the reference on a GPU too (kernels/constrained_advance.py)."""
    kernel = constrained_advance_triton if fits_kernel(rows, top_values, tables) else constrained_advance_ref
    return _dispatch(kernel, constrained_advance_ref, rows, top_values, top_tokens, own_values,
                     rows, met, tables, state, penalty, eos_id=eos_id, forced_eos_id=forced_eos_id, capacity=capacity,
                     early_stopping=early_stopping, blocked=blocked, vocab=vocab, width=width)

def lora(x, y, a, b, scale, slots):
    """Adds each row's LoRA delta to y (M, N) in place and returns it: y[i] += scale[s] *
    (x[i] @ a[s]^T) @ b[s]^T with s = slots[i] (int32, (M,)), rows with s = -1 untouched. x (M, K);
    a (S, R, K) and b (S, N, R) the slots' stacked matrices, in x's dtype; scale (S,) float32."""
    return _dispatch(lora_triton, lora_ref, x, x, y, a, b, scale, slots)


__all__ = [
    "GAP", "AdmittedRows", "ConstraintTensors", "NewTokens", "PROFILES", "DeviceProfile", "RowState", "StepInputs", "StepReport",
    "add_layer_norm", "admit_rows", "argmax", "beam_advance", "building", "constrained_advance", "device_profile",
    "embed_layer_norm", "error_line", "fold_source", "fused_linear", "fused_linear_holds_weights", "logsoftmax_topk", "lora",
    "packed_attention", "profile_name", "set_building", "slot_attention", "source_attention", "source_scores",
    "step_inputs", "step_report", "store_kv", "triton_failed", "unavailable_message",
]
