"""Check each Triton kernel against its plain-PyTorch reference at the engine's shapes, in bfloat16
on the GPU, and time both (median of triton.testing.do_bench, which includes the launch from
Python); the Triton kernel also as replayed from a CUDA graph, as the engine's decode step runs it
(median of triton.testing.do_bench_cudagraph).

    python -m bench.kernels_check        # or: python bench/kernels_check.py, from the repo root

Prints one table; writes it as JSON to DIR/kernels.json with `--out DIR`. The error column is
max |kernel - reference| / max |reference| (for logsoftmax_topk: of the values and the logsumexp,
after checking that the indices agree; for argmax: 0, after checking that the indices are equal;
for beam_advance and constrained_advance: 0, after checking that `done` and the state are bit for
bit the reference's);
speedup is torch us / triton us, both launched eagerly.
"""

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `python bench/kernels_check.py`

import torch
import triton
from triton.testing import do_bench, do_bench_cudagraph

from bench import add_out_argument
from dragoman.kernels import NewTokens, RowState
from dragoman.kernels.add_layer_norm import add_layer_norm_ref, add_layer_norm_triton
from dragoman.kernels.argmax import argmax_ref, argmax_triton
from dragoman.kernels.beam_advance import beam_advance_ref, beam_advance_triton
from dragoman.kernels.constrained_advance import constrained_advance_ref, constrained_advance_triton
from dragoman.kernels.embed_layer_norm import embed_layer_norm_ref, embed_layer_norm_triton
from dragoman.kernels.fold_source import fold_source_ref, fold_source_triton
from dragoman.kernels.fused_linear import fused_linear_ref, fused_linear_triton
from dragoman.kernels.logsoftmax_topk import logsoftmax_topk_ref, logsoftmax_topk_triton
from dragoman.kernels.lora import lora_ref, lora_triton
from dragoman.kernels.packed_attention import packed_attention_ref, packed_attention_triton
from dragoman.kernels.slot_attention import slot_attention_ref, slot_attention_triton
from dragoman.kernels.source_attention import source_attention_ref, source_attention_triton
from dragoman.kernels.source_scores import source_scores_ref, source_scores_triton
from dragoman.kernels.step_inputs import step_inputs_ref, step_inputs_triton

ROWS = [1, 4, 64, 256]  # decode rows: beams of all sentences in flight
BEAM = 4
H = 16
DTYPE = torch.bfloat16
VOCAB = 256206


def rel_error(out, ref):
    return ((out.float() - ref.float()).abs().max() / ref.float().abs().max()).item()


def median_us(fn, graph=False):
    return (do_bench_cudagraph if graph else do_bench)(fn, return_mode="median") * 1000


def slot_attention_inputs(N, D, seq_len=40):
    """Beam groups of up to BEAM rows, one length per group; the rows of a group share all their
    slots but the last 8, as beams agreeing on a prefix do."""
    groups = max(1, N // BEAM)
    lens = torch.randint(seq_len - 8, seq_len + 9, (groups,)).repeat_interleave(N // groups)  # (N,)
    T = int(lens.max())
    table = torch.randperm(N * T).view(N, T)  # (N, T)
    group_leader = torch.arange(N) // (N // groups) * (N // groups)  # (N,)
    table[:, :-8] = table[group_leader, :-8]
    k, v = torch.randn(N * T, H, D, dtype=DTYPE), torch.randn(N * T, H, D, dtype=DTYPE)
    q = torch.randn(N, H, D, dtype=DTYPE)
    args = (q, k, v, table.int(), torch.arange(N, dtype=torch.int32), lens.int())
    return [a.cuda() for a in args] + [D**-0.5]


def self_attention_inputs(N, D):
    """Runs of BEAM rows, the beams of one sentence, one length in 10..40 per sentence: a run's beams
    share the slots of their first 80% of positions, as beams agreeing on a prefix do, and hold the
    others, their last (the new token's) included, in slots of their own. Returns slot_attention's
    arguments, and the new tokens (a NewTokens) as the engine's decode step passes them."""
    lens = torch.randint(10, 41, (N // BEAM,)).repeat_interleave(BEAM)  # (N,)
    T = int(lens.max())
    own = torch.randperm(N * T).view(N, T)  # (N, T)
    first = torch.arange(N) // BEAM * BEAM  # (N,) the first row of each row's run
    shared = torch.arange(T)[None, :] < (0.8 * lens).long()[:, None]  # (N, T)
    table = torch.where(shared, own[first], own)  # (N, T)
    write_slots = table[torch.arange(N), lens - 1]  # (N,) each row's last slot, its own
    k, v = torch.randn(N * T, H, D, dtype=DTYPE), torch.randn(N * T, H, D, dtype=DTYPE)
    q, k_new, v_new = torch.randn(3, N, H, D, dtype=DTYPE)  # 3 x (N, H, D)
    args = (q, k, v, table.int(), torch.arange(N, dtype=torch.int32), lens.int())
    new = NewTokens(k_new.cuda(), v_new.cuda(), write_slots.cuda())
    return [a.cuda() for a in args] + [D**-0.5], new


def source_attention_inputs(N, D, seq_len=40):
    """Runs of BEAM rows, one source per run: a length near seq_len and one copy of its K/V, listed
    by one slot_table row that all the run's rows read (rows[i] = i // BEAM)."""
    runs = N // BEAM
    lens = torch.randint(seq_len - 8, seq_len + 9, (runs,)).repeat_interleave(BEAM)  # (N,)
    T = int(lens.max())
    table = torch.randperm(runs * T).view(runs, T)  # (runs, T)
    k, v = torch.randn(runs * T, H, D, dtype=DTYPE), torch.randn(runs * T, H, D, dtype=DTYPE)
    q = torch.randn(N, H, D, dtype=DTYPE)
    args = (q, k, v, table.int(), torch.arange(N, dtype=torch.int32) // BEAM, lens.int())
    return [a.cuda() for a in args] + [D**-0.5]


def add_layer_norm_inputs(N, C):
    x, residual = torch.randn(N, C, dtype=DTYPE), torch.randn(N, C, dtype=DTYPE)
    weight, bias = torch.randn(C, dtype=DTYPE), torch.randn(C, dtype=DTYPE)
    return [t.cuda() for t in (x, residual, weight, bias)] + [1e-5]


def lora_inputs(M, K, N, slots=4, rank=16):
    """Rows spread over `slots` adapters and the base model (-1), as in a mixed batch."""
    x, y = torch.randn(M, K, dtype=DTYPE), torch.randn(M, N, dtype=DTYPE)
    a = (torch.randn(slots, rank, K) / K**0.5).to(DTYPE)
    b = (torch.randn(slots, N, rank) / rank**0.5).to(DTYPE)
    scale, row_slots = torch.full((slots,), 2.0), torch.randint(-1, slots, (M,), dtype=torch.int32)
    return [t.cuda() for t in (x, y, a, b, scale, row_slots)]


def argmax_inputs(N):
    """Random logits whose first rows hold the cases the tie and NaN rules decide: equal maxima on
    both sides of a chunk boundary and far apart, NaN beside +inf, -inf but for one column, -0.0
    against +0.0 (the answers: 2047, 5000, 77777, 3)."""
    logits = (torch.randn(N, VOCAB, device="cuda") * 4).to(DTYPE)
    logits[0, [100000, 2048, 2047]] = 50.0
    logits[1, [0, 200000, 5000]] = torch.tensor([float("nan"), float("nan"), float("inf")], dtype=DTYPE, device="cuda")
    logits[2] = float("-inf")
    logits[2, 77777] = -3.0
    logits[3] = float("-inf")
    logits[3, [100000, 3]] = torch.tensor([0.0, -0.0], dtype=DTYPE, device="cuda")
    assert argmax_ref(logits)[:4].tolist() == [2047, 5000, 77777, 3]
    return logits


def row_state(tensors):
    """A RowState of these tensors, the fields a kernel does not read left empty."""
    return RowState(**{name: tensors.get(name, torch.empty(0)) for name in RowState._fields})


def beam_advance_inputs(S, B=BEAM, width=40, T=1024, eos_id=2, device="cuda"):
    """One beam-search step of S sentences in mid-search, hypotheses of 2 to width - 1 tokens:
    (args, state, penalty, options) for beam_advance. Candidates come from random log-probs over
    1,000 tokens, `</s>` often among them; some sentences have finished hypotheses, the shortest
    still ban `</s>`, some reach their own max_length."""
    R, k = S * B + 1, 2 * B
    logits = torch.randn(S * B, 1000, device=device) * 3
    logits[:, eos_id] += 2
    values, tokens = logits.log_softmax(dim=-1).topk(k + 1, dim=-1)  # (S * B, k + 1)
    rows = torch.randperm(R - 1, device=device).view(S, B)  # (S, B)
    kv_len = torch.zeros(R, dtype=torch.int32, device=device)
    kv_len[rows] = torch.randint(2, width - 1, (S, 1), dtype=torch.int32, device=device)  # a length per sentence
    limit = torch.full((R,), T, dtype=torch.int32, device=device)
    limit[rows] = torch.randint(width // 2, width, (S, 1), dtype=torch.int32, device=device)  # some reached
    fin_score = torch.full((R,), float("-inf"), device=device)
    fin_score[rows[:, :2]] = -torch.rand(S, 2, device=device).sort(dim=1).values * 10  # two finished each
    state = dict(score=-torch.rand(R, device=device) * 20, hyp=torch.randint(0, 1000, (R, T), device=device),
                 kv_slots=torch.randint(0, 10**6, (R, T), dtype=torch.int32, device=device), fin_score=fin_score,
                 fin_hyp=torch.randint(0, 1000, (R, T), device=device),
                 fin_len=torch.randint(2, width, (R,), dtype=torch.int32, device=device),
                 improvable=torch.ones(R, dtype=torch.bool, device=device),
                 finished=torch.zeros(R, dtype=torch.bool, device=device))
    penalty = (torch.arange(T + 1, dtype=torch.float64) ** 1.0).float().to(device)
    state |= dict(kv_len=kv_len, limit=limit)
    options = dict(eos_id=eos_id, early_stopping=0, blocked=-1.0e9, width=width)
    return (values, tokens, rows, 5), state, penalty, options


def beam_advance_agrees(S):
    """Runs beam_advance's kernel and reference on copies of one state: whether `done` and every
    state tensor agree bit for bit. Returns (agrees, kernel_fn, ref_fn) for timing."""
    def bits(t):
        return t.view(torch.int32) if t.dtype == torch.float32 else t

    args, state, penalty, options = beam_advance_inputs(S)
    ours, ref = ({name: t.clone() for name, t in state.items()} for _ in range(2))
    done = beam_advance_triton(*args, row_state(ours), penalty, **options)
    ref_done = beam_advance_ref(*args, row_state(ref), penalty, **options)
    agrees = torch.equal(done, ref_done) and all(torch.equal(bits(ours[n]), bits(ref[n])) for n in state)
    # Timed calls keep advancing the same state: each step does the same work.
    return (agrees, lambda: beam_advance_triton(*args, row_state(ours), penalty, **options),
            lambda: beam_advance_ref(*args, row_state(ref), penalty, **options))



def constrained_advance_agrees(S, C, W=BEAM, width=40, T=1024, eos_id=2, device="cuda"):
    """Runs constrained_advance's kernel and reference on copies of one mid-search state of S
    sentences with C constraints of 2 tokens each (bench.constraints' workload), candidates from
    random log-probs over 1,000 tokens: whether `done`, the met counts and every state tensor agree
    bit for bit. Returns (agrees, kernel_fn, ref_fn) for timing."""
    from dragoman.engine.constrained_search import ConstraintTables
    from dragoman.engine.constraints import Constraints

    args, state, penalty, _ = beam_advance_inputs(S, W, width, T, eos_id, device)
    rows = args[2]
    tables = ConstraintTables.build([Constraints([[int(t) for t in torch.randint(4, 1000, (2,))] for _ in range(C)],
                                                 eos_id) for _ in range(S)], torch.device(device))
    J = tables.tokens.shape[1]
    logits = torch.randn(S * W, 1000, device=device) * 3
    log_probs = logits.log_softmax(dim=-1)
    top_values, top_tokens = log_probs.topk(2 * W + J + 2, dim=-1)  # (S * W, K1)
    own_values = log_probs.gather(1, tables.tokens.repeat_interleave(W, dim=0))  # (S * W, J)
    met = torch.randint(0, 3, (state["score"].shape[0], 64), dtype=torch.int32, device=device)
    options = dict(eos_id=eos_id, forced_eos_id=-1, capacity=W, early_stopping=0, blocked=-1.0e9, vocab=1000,
                   width=width)
    ours, ref = ({name: t.clone() for name, t in state.items()} for _ in range(2))
    ours_met, ref_met = met.clone(), met.clone()
    call = (top_values, top_tokens, own_values, rows)
    done = constrained_advance_triton(*call, ours_met, tables, row_state(ours), penalty, **options)
    ref_done = constrained_advance_ref(*call, ref_met, tables, row_state(ref), penalty, **options)
    agrees = (torch.equal(done, ref_done) and torch.equal(ours_met, ref_met)
              and all(torch.equal(ours[n], ref[n]) for n in state))
    return (agrees, lambda: constrained_advance_triton(*call, ours_met, tables, row_state(ours), penalty,
                                                       **options),
            lambda: constrained_advance_ref(*call, ref_met, tables, row_state(ref), penalty, **options))

def main():
    parser = argparse.ArgumentParser(prog="python -m bench.kernels_check")
    add_out_argument(parser)
    args = parser.parse_args()
    torch.manual_seed(0)
    rows = []

    def record(kernel, shape, error, kernel_fn, ref_fn, dtype=DTYPE):
        rows.append(dict(kernel=kernel, shape=shape, dtype=str(dtype).removeprefix("torch."), rel_error=error,
                         triton_us=median_us(kernel_fn), triton_graph_us=median_us(kernel_fn, graph=True),
                         ref_us=median_us(ref_fn)))

    for D in (64, 128):
        for B in ROWS:
            args = slot_attention_inputs(B, D)
            error = rel_error(slot_attention_triton(*args), slot_attention_ref(*args))
            record("slot_attention", f"N={B} H={H} D={D} len~40", error,
                   lambda: slot_attention_triton(*args), lambda: slot_attention_ref(*args))
    for D in (64, 128):
        for N in ROWS + [2048]:  # 2,048 rows: 512 sentences of beam 4, where the source reads add up
            if N % BEAM:
                continue
            args = source_attention_inputs(N, D)
            shape = f"N={N} H={H} D={D} len~40 g={BEAM}"
            error = rel_error(source_attention_triton(*args, BEAM), source_attention_ref(*args, BEAM))
            record("source_attention", shape, error,
                   lambda: source_attention_triton(*args, BEAM), lambda: source_attention_ref(*args, BEAM))
            # The same inputs through slot_attention, whose programs (a row's heads) each read the source.
            error = rel_error(slot_attention_triton(*args), source_attention_ref(*args, BEAM))
            record("slot_attention", shape, error,
                   lambda: slot_attention_triton(*args), lambda: slot_attention_ref(*args))
    # Self-attention at a document's 2,048 rows (512 sentences of beam 4, H=16, lengths 10-40), the new
    # token stored by the op as in the engine's decode step.
    args, new = self_attention_inputs(2048, 64)
    error = rel_error(slot_attention_triton(*args, new), slot_attention_ref(*args, new))
    record("slot_attention", "N=2048 D=64 g=4 len10-40 new", error,
           lambda: slot_attention_triton(*args, new), lambda: slot_attention_ref(*args, new))
    for C in (1024, 2048):
        for N in ROWS + [8192]:
            args = add_layer_norm_inputs(N, C)
            (summed, normed), (ref_summed, ref_normed) = add_layer_norm_triton(*args), add_layer_norm_ref(*args)
            error = max(rel_error(summed, ref_summed), rel_error(normed, ref_normed))
            record("add_layer_norm", f"N={N} C={C}", error,
                   lambda: add_layer_norm_triton(*args), lambda: add_layer_norm_ref(*args))
    for C in (1024, 2048):
        for N in ROWS + [8192]:  # decode rows, and the encoder's tokens
            table, positions_table = torch.randn(VOCAB, C, dtype=DTYPE).cuda(), torch.randn(1026, C, dtype=DTYPE).cuda()
            ids, at = torch.randint(0, VOCAB, (N,)).cuda(), torch.randint(0, 1024, (N,)).cuda()
            args = (ids, at, table, C**0.5, positions_table, 2, *add_layer_norm_inputs(1, C)[2:])
            (x, normed), (ref_x, ref_normed) = embed_layer_norm_triton(*args), embed_layer_norm_ref(*args)
            assert torch.equal(x, ref_x), "embed_layer_norm: embeddings differ from the reference"
            record("embed_layer_norm", f"N={N} C={C}", rel_error(normed, ref_normed),
                   lambda: embed_layer_norm_triton(*args), lambda: embed_layer_norm_ref(*args))
            del table
    for N in ROWS + [2048]:  # a decode step's rows, the last 3 padding (the padding row)
        R, T = N + 1, 1024
        feed = torch.cat([torch.randperm(R - 1)[: max(1, N - 3)], torch.full((min(3, N - 1),), R - 1)]).cuda()
        kv_len = torch.randint(0, T - 1, (R,), dtype=torch.int32).cuda()
        kv_len[-1] = 0
        state = dict(kv_len=kv_len, write_block=torch.randint(0, 10**5, (R,), dtype=torch.int32).cuda(),
                     kv_slots=torch.randint(0, 10**6, (R, T), dtype=torch.int32).cuda(),
                     hyp=torch.randint(0, VOCAB, (R, T)).cuda(), cross_len=torch.randint(1, 200, (R,), dtype=torch.int32).cuda(),
                     finished=torch.zeros(R, dtype=torch.bool).cuda(), prior_offset=torch.zeros(R, dtype=torch.int32).cuda())
        ours, ref = ({name: t.clone() for name, t in state.items()} for _ in range(2))
        out, ref_out = step_inputs_triton(feed, row_state(ours), R - 1, 16), step_inputs_ref(feed, row_state(ref), R - 1, 16)
        assert all(torch.equal(a, b) for a, b in zip(out, ref_out)) and all(torch.equal(ours[n], ref[n]) for n in state), \
            "step_inputs: outputs or state differ from the reference"
        # Timed on padding rows alone, whose length stays 0: real rows would run past T.
        padding = torch.full_like(feed, R - 1)
        record("step_inputs", f"N={N} T={T}", 0.0, lambda: step_inputs_triton(padding, row_state(ours), R - 1, 16),
               lambda: step_inputs_ref(padding, row_state(ref), R - 1, 16), dtype=torch.int32)
    for k in (2 * BEAM, 16):
        for N in ROWS:
            logits = (torch.randn(N, VOCAB, device="cuda") * 4).to(DTYPE)
            values, indices, lse = logsoftmax_topk_triton(logits, k)
            ref_values, ref_indices, ref_lse = logsoftmax_topk_ref(logits, k)
            assert torch.equal(indices, ref_indices), "logsoftmax_topk: indices differ from the reference"
            error = max(rel_error(values, ref_values), rel_error(lse, ref_lse))
            record("logsoftmax_topk", f"N={N} V={VOCAB} k={k}", error,
                   lambda: logsoftmax_topk_triton(logits, k), lambda: logsoftmax_topk_ref(logits, k))
    for N in (4, 512):  # greedy decoding: a few sentences, and a document's 512
        logits = argmax_inputs(N)
        assert torch.equal(argmax_triton(logits), argmax_ref(logits)), "argmax: indices differ from torch.argmax"
        record("argmax", f"N={N} V={VOCAB}", 0.0, lambda: argmax_triton(logits), lambda: argmax_ref(logits))
    for S in (1, 512):  # beam search's bookkeeping: a typed sentence, and a document's 512
        agrees, kernel_fn, ref_fn = beam_advance_agrees(S)
        assert agrees, "beam_advance: done or state differs from the reference"
        record("beam_advance", f"S={S} B={BEAM} width=40 T=1024", 0.0, kernel_fn, ref_fn, dtype=torch.float32)
    for S, C in ((1, 2), (512, 1), (512, 3)):  # a typed sentence's glossary, a document's constrained sentences
        agrees, kernel_fn, ref_fn = constrained_advance_agrees(S, C)
        assert agrees, "constrained_advance: done, met or state differs from the reference"
        record("constrained_advance", f"S={S} W={BEAM} C={C} width=40 T=1024", 0.0, kernel_fn, ref_fn,
               dtype=torch.float32)

    # The decode steps that engine.model sends to fused_linear (4 and 16 rows), and its 64-row block
    # (48 rows: a typed sentence's encoder bucket, a few sentences' steps).
    few = [(M, K, N) for K, N in ((1024, 3072), (1024, 1024), (1024, 4096), (2048, 8192), (1024, VOCAB)) for M in (4, 16)]
    wide = [(48, K, N) for K, N in ((1024, 3072), (4096, 1024), (8192, 1024), (1024, 24576))]
    for M, K, N in few + wide:
        x, weight = torch.randn(M, K, dtype=DTYPE).cuda(), (torch.randn(N, K) / K**0.5).to(DTYPE).cuda()
        bias = torch.randn(N, dtype=DTYPE).cuda()
        error = rel_error(fused_linear_triton(x, weight, bias, True), fused_linear_ref(x, weight, bias, True))
        record("fused_linear", f"M={M} K={K} N={N} relu", error,
               lambda: fused_linear_triton(x, weight, bias, True), lambda: fused_linear_ref(x, weight, bias, True))
    for C in (1024, 2048):  # a typed sentence's encoder self-attention: its 34 tokens and the bucket's 14 of padding
        D = C // H
        qkv, starts = torch.randn(48, 3 * C, dtype=DTYPE).cuda(), torch.tensor([0, 34, 48], dtype=torch.int32).cuda()
        error = rel_error(packed_attention_triton(qkv, starts, D**-0.5, H), packed_attention_ref(qkv, starts, D**-0.5, H))
        record("packed_attention", f"T=34+14 H={H} D={D}", error,
               lambda: packed_attention_triton(qkv, starts, D**-0.5, H), lambda: packed_attention_ref(qkv, starts, D**-0.5, H))

    for L, C in ((12, 1024), (24, 1024), (24, 2048)):  # a typed sentence's folded cross-attention: 600M, 1.3B, 3.3B
        S, D = 32, C // H
        kv = torch.randn(S, L, 2, H, D, dtype=DTYPE).cuda()  # as the encoder's cross K/V projection leaves them
        k, v = kv[:, :, 0].transpose(0, 1), kv[:, :, 1].transpose(0, 1)  # (L, S, H, D) each
        wq, wo = ((torch.randn(L, C, C) / C**0.5).to(DTYPE).cuda() for _ in range(2))
        bq, length = torch.randn(L, C, dtype=DTYPE).cuda(), torch.tensor([S - 2], dtype=torch.int32).cuda()
        ours, ref = ((torch.empty(L, H * S, C, dtype=DTYPE).cuda(), torch.empty(L, H * S).cuda(),
                      torch.empty(L, C, H * S, dtype=DTYPE).cuda()) for _ in range(2))
        fold_source_triton(k, v, wq, bq, wo, length, *ours)
        fold_source_ref(k, v, wq, bq, wo, length, *ref)
        record("fold_source", f"L={L} C={C} S={S}", max(rel_error(o, r) for o, r in zip(ours, ref)),
               lambda: fold_source_triton(k, v, wq, bq, wo, length, *ours),
               lambda: fold_source_ref(k, v, wq, bq, wo, length, *ref))
        for S in (16, 32, 64):
            x, a = torch.randn(BEAM, C, dtype=DTYPE).cuda(), (torch.randn(H * S, C) / C**0.5).to(DTYPE).cuda()
            c, length = torch.randn(H * S).cuda(), torch.tensor([S - 2], dtype=torch.int32).cuda()
            args = (x, a, c, length, D**-0.5, S)
            error = rel_error(source_scores_triton(*args), source_scores_ref(*args))
            record("source_scores", f"M={BEAM} C={C} S={S}", error,
                   lambda: source_scores_triton(*args), lambda: source_scores_ref(*args))

    for K, N in ((1024, 1024), (1024, 4096), (4096, 1024), (1024, 3072)):
        for M in ROWS + [8192]:  # decode rows, and the encoder's tokens
            x, y, a, b, scale, row_slots = lora_inputs(M, K, N)
            ours, ref = lora_triton(x, y.clone(), a, b, scale, row_slots), lora_ref(x, y.clone(), a, b, scale, row_slots)
            error = rel_error(ours.float() - y.float(), ref.float() - y.float())  # of the deltas
            record("lora", f"M={M} K={K} N={N} S=4 r=16", error,
                   lambda: lora_triton(x, y, a, b, scale, row_slots), lambda: lora_ref(x, y, a, b, scale, row_slots))

    print(f"{torch.cuda.get_device_name()}  torch {torch.__version__}  triton {triton.__version__}")
    print(f"{'kernel':<16} {'shape':<28} {'rel err':>8} {'triton us':>10} {'graphed':>8} {'torch us':>9} "
          f"{'speedup':>8}")
    for r in rows:
        print(f"{r['kernel']:<16} {r['shape']:<28} {r['rel_error']:8.1e} {r['triton_us']:10.1f} "
              f"{r['triton_graph_us']:8.1f} {r['ref_us']:9.1f} {r['ref_us'] / r['triton_us']:7.1f}x")
    if args.out is not None:
        report = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__,
                      rows=rows)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "kernels.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
