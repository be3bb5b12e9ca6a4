"""A linear layer for decode steps of few rows, with its ReLU fused in.

`fused_linear(x, weight, bias=None, relu=False) -> out`. Meaning, as a plain loop:

    for m in range(M):
        y = x[m] @ weight.T + bias              # float32 sums, rounded to x's dtype
        out[m] = max(y, 0) if relu else y

Why: at a handful of rows a decoder step is bound by kernel launches and weight reads. cuBLAS at a
few rows splits K and adds the parts up in a second kernel; here one pass reads the weight once.
Each program computes BLOCK_N output columns for all rows, reading its weight rows once; the rows'
inputs (a few KB) come from L2. The layer norm before and the residual add after stay kernels of
their own: in the prologue every program would recompute the norm's statistics in two serial
passes over x, and one program normalising all rows after an atomic takes longer than a chained
kernel of one program per row.

Chained (kernels/_triton.py `chained_launch`), a program starts while the kernel before it still
runs, asks L2 for its weight rows where that pays (`_prefetch`), or loads them into registers
(`_hold`), then waits for x. Layers stay kernels of their own rather than phases of one persistent
kernel: a grid barrier costs more than a chained kernel boundary.
Narrow layers with long inputs split them between programs (`_split`); the last program to finish
an output block adds the partial sums up, so it is still one launch.
"""

from typing import NamedTuple

import torch
import torch.nn.functional as F

from dragoman.kernels._triton import (
    ARRIVAL_SLOTS, arrivals_on, chained_launch, launch_options, prefetch_l2, sum_splits, tl, triton, wait_for_inputs,
)
from dragoman.kernels.dispatch import dispatch, use_triton
from dragoman.kernels.gpu_profile import DeviceProfile, profile_of


@triton.jit
def _load_tile(row_ptrs, k, row_ok, K, ALL_ROWS: tl.constexpr, EVEN_K: tl.constexpr):
    """(rows, k) elements from `row_ptrs` (one pointer per row), zeros past the rows and past K:
    masked only where the shapes need it."""
    if ALL_ROWS and EVEN_K:
        tile = tl.load(row_ptrs[:, None] + k[None, :])
    else:
        tile = tl.load(row_ptrs[:, None] + k[None, :], mask=row_ok[:, None] & (k < K)[None, :], other=0.0)
    return tile


@triton.jit
def _load_chunks(row_ptrs, k_chunks, row_ok, K, ALL_ROWS: tl.constexpr, EVEN_K: tl.constexpr):
    """`_load_tile` for (chunks, 1, k) inputs: (chunks, rows, k) elements."""
    pointers = row_ptrs[None, :, None] + k_chunks
    if ALL_ROWS and EVEN_K:
        tile = tl.load(pointers)
    else:
        tile = tl.load(pointers, mask=row_ok[None, :, None] & (k_chunks < K), other=0.0)
    return tile


@triton.jit
def _fused_linear_kernel(
    x_ptr, w_ptr, b_ptr, out_ptr, partial_ptr, arrivals_ptr, M, N, K, stride_x, stride_w, stride_o,
    HAS_BIAS: tl.constexpr, RELU: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, K_SPLIT: tl.constexpr,
    EVEN_N: tl.constexpr, EVEN_K: tl.constexpr, PRECISION: tl.constexpr, SPLIT: tl.constexpr, HOLD: tl.constexpr,
    CHAINS: tl.constexpr, CHAINED: tl.constexpr, PREFETCH: tl.constexpr, LINE: tl.constexpr, K_LINES: tl.constexpr,
):
    # Program (column block, row block, split) sums inputs k_first .. k_first + K_SPLIT. A static
    # trip count and masks only where shapes need them: a runtime loop end and masks on every load
    # slow the output projection and the wide layers.
    m = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    split = tl.program_id(2)
    m_ok, n_ok = m < M, n < N
    k_first = split * K_SPLIT
    x_rows = x_ptr + m.to(tl.int64) * stride_x
    w_rows = w_ptr + n.to(tl.int64) * stride_w
    if HOLD:
        # The whole weight block in registers before waiting: after the wait only x is loaded. Its
        # inputs come in CHAINS consecutive chunks, one product each, so that the tensor cores
        # run CHAINS independent chains of multiply-adds instead of one K_SPLIT / 16 long.
        if CHAINS == 1:
            w_held = _load_tile(w_rows, k_first + tl.arange(0, K_SPLIT), n_ok, K, EVEN_N, EVEN_K)
        else:
            k_chunks = k_first + (tl.arange(0, CHAINS) * (K_SPLIT // CHAINS))[:, None, None] \
                + tl.arange(0, K_SPLIT // CHAINS)[None, None, :]  # (CHAINS, 1, K_SPLIT // CHAINS)
            w_held = _load_chunks(w_rows, k_chunks, n_ok, K, EVEN_N, EVEN_K)  # (CHAINS, BLOCK_N, K_SPLIT // CHAINS)
    if CHAINED and PREFETCH:
        # Started while the kernel before (which writes x) finishes: stream this program's weight
        # block into L2 meanwhile, LINE elements (128 bytes) per request, then wait for x.
        line = tl.minimum(k_first + tl.arange(0, K_LINES) * LINE, tl.minimum(K, k_first + K_SPLIT) - 1)
        w_safe = w_ptr + tl.minimum(n, N - 1).to(tl.int64)[:, None] * stride_w
        prefetch_l2(w_safe + line[None, :])  # (BLOCK_N, K_LINES) addresses, within this split's inputs
    wait_for_inputs(CHAINED)

    if HOLD:
        if CHAINS == 1:
            h = _load_tile(x_rows, k_first + tl.arange(0, K_SPLIT), m_ok, K, False, EVEN_K)
            acc = tl.dot(h, tl.trans(w_held), input_precision=PRECISION)
        else:
            h = _load_chunks(x_rows, k_chunks, m_ok, K, False, EVEN_K)  # (CHAINS, BLOCK_M, K_SPLIT // CHAINS)
            acc = tl.sum(tl.dot(h, tl.trans(w_held, (0, 2, 1)), input_precision=PRECISION), axis=0)
    else:
        acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
        for start in range(0, K_SPLIT, BLOCK_K):
            k = k_first + start + tl.arange(0, BLOCK_K)
            h = _load_tile(x_rows, k, m_ok, K, False, EVEN_K)
            w = _load_tile(w_rows, k, n_ok, K, EVEN_N, EVEN_K)
            acc += tl.dot(h, tl.trans(w), input_precision=PRECISION)

    mn_ok = m_ok[:, None] & n_ok[None, :]
    last = True
    if SPLIT > 1:  # the last split to arrive at this output block adds the partial sums up
        block = tl.program_id(1) * tl.num_programs(0) + tl.program_id(0)
        acc, last = sum_splits(acc, partial_ptr, arrivals_ptr, block, split, SPLIT, BLOCK_M, BLOCK_N)
    if last:
        if HAS_BIAS:
            acc += tl.load(b_ptr + n, mask=n_ok, other=0.0).to(tl.float32)[None, :]
        y = acc.to(out_ptr.dtype.element_ty)  # rounded as the unfused linear layer rounds
        if RELU:
            y = tl.maximum(y, 0.0)
        tl.store(out_ptr + m.to(tl.int64)[:, None] * stride_o + n[None, :], y, mask=mn_ok)


def _blocks(N, K):
    """(BLOCK_N, BLOCK_K, num_warps), as measured fastest at 4 and 16 rows (docs/performance.md):
    narrow column blocks keep >= 64 programs on the decoder's 1,024- to 4,096-wide layers; wide ones
    suit the output projection and the 3.3B model's wider layers. The 8,192-input layers (fc2 of
    1.3B and 3.3B) take 32 columns over 4 warps, split 4 ways, which beats both 16 columns over 2
    warps and cuBLAS there."""
    if N >= 100_000:
        return 64, 128, 2
    if K >= 8192:
        return 32, 256, 4
    if N >= 6144:
        return 64, 256, 4
    if N >= 2048 and K >= 2048:  # 3.3B's 2,048 -> 2,048: 32 columns in 4 splits beat 16 in 2
        return 32, 128, 4
    return 16, 256, 2


def _split(programs, N, K, BLOCK_N, multiprocessors):
    """How many programs share each output block's K inputs. Narrow blocks of a long K run long
    chains of loads: splitting them until ~256 programs share the work, each over >= 1,024 inputs,
    shortens the chains enough to pay for the partial sums. Wide blocks (64 columns) and shorter
    chains only lose by it. 32-column blocks split down to 512 inputs. The feed-forward's second
    layer of 600M and 1.3B (1,024 outputs of 4,096 or 8,192 inputs) takes 8 splits, which beat 4
    splits of 4 chains once the norms let projections start early. The ~256 programs are two per
    multiprocessor, rounded down to a power of two: a card of fewer multiprocessors splits less.
    The figures are in docs/performance.md."""
    least = 1024 if BLOCK_N <= 16 else 512  # inputs per split
    target = 1 << (2 * multiprocessors).bit_length() - 1
    split = 1
    while BLOCK_N <= 32 and split < 4 and programs * split < target and K >= 2 * split * least:
        split *= 2
    if split == 4 and N <= 1024 and K >= 8 * 512:
        split = 8
    return split


def _prefetch(BLOCK_N, programs):
    """Whether a chained launch asks L2 for its weights before waiting: for narrow blocks in one
    wave. Programs of 64 columns, the output projection's among them, lose by it."""
    return BLOCK_N <= 16 and programs <= 512


def _hold(N, BLOCK_N, k_split):
    """Whether programs load their whole weight block into registers before waiting for x, so
    that after the wait only x is read: where outputs are at most 4,096 columns and a program's
    block small (<= 16 x 1,024), which then beats the stepped loop. Wider layers lose by it, as do
    bigger blocks: their held programs keep the next kernel's from starting early."""
    return N <= 4096 and BLOCK_N * k_split <= 16 * 1024


def _chains(N, split):
    """(chains, num_warps) of a held program, or None to keep _blocks's warps and one chain: its
    inputs split into chains whose products do not wait on each other (a 16 x 1,024 by 1,024 x 16
    product in one chain is 64 tensor-core steps each waiting for the last). Only 1,024 -> 1,024
    unsplit gains, in 4 chains over 4 warps; wider or split layers gain nothing or lose."""
    return (4, 4) if N <= 1024 and split == 1 else None


BLOCK_M = 16  # tl.dot's smallest tile: rows past M are masked
# 17 to 64 rows (a typed sentence's encoder, 48 padded rows; a few sentences' beams) in one row
# block, weights not held (64 rows of x in registers would spill), planned as one block of few rows
# is: three 16-row blocks split less and read each weight block three times.
WIDE_BLOCK_M = 64


def _wide_plan(N, K):
    """((BLOCK_N, BLOCK_K, num_warps), split) of a 64-row block, or None where `_blocks` and `_split`
    plan it (the output projection). Chosen at 48 and 32 rows against `_blocks`' plan, which this
    beats on every layer of the decoder and encoder (docs/performance.md); the cross K/V of all
    layers at once (24,576 or 49,152 outputs) takes about cuBLAS's time, and 1,024 -> 8,192 plans as
    `_blocks` does."""
    if N >= 100_000:
        return None
    if N >= 16384:
        return (32, 64, 4), 1
    if N >= 8192:
        return (64, 256, 4), 1
    if K >= 4096:
        return (32, 256, 4), 4
    return (32 if N > 1024 else 16, 256, 4), 1


STAGES = 3  # how deep the loop's loads are pipelined, where shared memory allows


class Plan(NamedTuple):
    BLOCK_N: int
    BLOCK_K: int
    num_warps: int
    split: int
    k_split: int  # inputs per split, whole BLOCK_Ks
    hold: bool
    block_m: int
    stages: int


def shared_bytes(block_m, BLOCK_N, BLOCK_K, k_split, hold, stages, element_size):
    """The shared memory a program's tiles take, counted generously: a held block and its inputs
    staged once, or each pipelined step's tiles of x and the weight, plus the float32 output tile."""
    tiles = (block_m + BLOCK_N) * (k_split if hold else stages * BLOCK_K)
    return tiles * element_size + block_m * BLOCK_N * 4


def _plan(M, N, K, profile: DeviceProfile, element_size, split=None, hold=None, blocks=None) -> Plan:
    """The launch for x (M, K) and weight (N, K) of `element_size` bytes on a device of `profile`;
    `split`, `hold` and `blocks` (BLOCK_N, BLOCK_K, num_warps) as given, where given. The tiles
    chosen on a Hopper card shrink until they fit the device's shared memory: holding the weights
    gives way to the loop, then the loop's depth to 2 stages, then BLOCK_K halves (GeForce cards
    have 99 KB a block, Turing 64, where the largest 64-row plans take up to 192)."""
    block_m = BLOCK_M if M <= BLOCK_M else WIDE_BLOCK_M
    wide = _wide_plan(N, K) if block_m == WIDE_BLOCK_M else None
    if wide is not None:
        blocks, split = blocks or wide[0], split or wide[1]
    BLOCK_N, BLOCK_K, num_warps = blocks or _blocks(N, K)
    BLOCK_K = min(BLOCK_K, triton.next_power_of_2(K))
    programs = triton.cdiv(N, BLOCK_N) * triton.cdiv(M, block_m)
    split = split or _split(programs, N, K, BLOCK_N, profile.multiprocessors)

    def k_split_of(BLOCK_K):
        return triton.cdiv(triton.cdiv(K, split), BLOCK_K) * BLOCK_K

    k_split, stages = k_split_of(BLOCK_K), STAGES
    if hold is None:
        hold = block_m == BLOCK_M and _hold(N, BLOCK_N, k_split)
    limit = profile.shared_memory
    if hold and shared_bytes(block_m, BLOCK_N, BLOCK_K, triton.next_power_of_2(k_split), True, 1, element_size) > limit:
        hold = False
    while not hold and shared_bytes(block_m, BLOCK_N, BLOCK_K, k_split, False, stages, element_size) > limit:
        if stages > 2:
            stages -= 1
        elif BLOCK_K > 16:
            BLOCK_K //= 2
            k_split = k_split_of(BLOCK_K)
        else:
            break
    return Plan(BLOCK_N, BLOCK_K, num_warps, split, k_split, hold, block_m, stages)


def holds_weights(weight, M):
    """Whether a launch for x (M, K) and `weight` (N, K) loads its weights before it waits for x: a
    layer norm before it may then let it start early (kernels/_triton.py)."""
    N, K = weight.shape
    return _plan(M, N, K, profile_of(weight), weight.element_size()).hold


def fused_linear_triton(x, weight, bias=None, relu=False, split=None, hold=None, chains=None, blocks=None):
    """Triton version of `fused_linear_ref`; same arguments, same result. `split` overrides how many
    programs share an output block's inputs, `hold` whether they hold their weights in registers,
    `chains` how many chains a held program's inputs are split into, `blocks` (BLOCK_N, BLOCK_K,
    num_warps) the tiles (tests, sweeps)."""
    M, K = x.shape
    N = weight.shape[0]
    assert weight.shape == (N, K) and weight.dtype == x.dtype and weight.stride(1) == 1 and x.stride(1) == 1
    assert bias is None or (bias.shape == (N,) and bias.is_contiguous())
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    BLOCK_N, BLOCK_K, num_warps, split, k_split, hold, block_m, stages = _plan(
        M, N, K, profile_of(x), x.element_size(), split, hold, blocks
    )
    grid_n, grid_m = triton.cdiv(N, BLOCK_N), triton.cdiv(M, block_m)
    assert split == 1 or grid_n * grid_m <= ARRIVAL_SLOTS, "split launches count arrivals in 256 slots"
    if hold:
        k_split = triton.next_power_of_2(k_split)  # one tile: past K it is masked
        chosen = _chains(N, split)
        if chosen is not None and chains is None:
            chains, num_warps = chosen
        chains = min(chains or 1, k_split // 16)  # tl.dot takes >= 16 inputs
    else:
        chains = 1
    partial = arrivals = out
    if split > 1:
        partial = torch.empty((grid_n * grid_m, split, block_m, BLOCK_N), dtype=torch.float32, device=x.device)
        arrivals = arrivals_on(x.device)  # a split is only chosen below 256 output blocks
    chained = chained_launch(x)
    line = 128 // x.element_size()  # elements per cache line
    _fused_linear_kernel[(grid_n, grid_m, split)](
        x, weight, bias if bias is not None else x, out, partial, arrivals, M, N, K,
        x.stride(0), weight.stride(0), out.stride(0),
        HAS_BIAS=bias is not None, RELU=relu, BLOCK_M=block_m, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, K_SPLIT=k_split,
        EVEN_N=N % BLOCK_N == 0, EVEN_K=K == split * k_split, SPLIT=split,
        # Only float32 operands read it: without "ieee" they would round to tf32 and miss the reference.
        PRECISION="ieee" if x.dtype == torch.float32 else "tf32",
        HOLD=hold, CHAINS=chains, CHAINED=chained, PREFETCH=not hold and _prefetch(BLOCK_N, grid_n * grid_m * split),
        LINE=line, K_LINES=triton.next_power_of_2(triton.cdiv(k_split, line)),
        num_warps=num_warps, num_stages=stages, **launch_options(chained),
    )
    return out


def fused_linear_ref(x, weight, bias=None, relu=False):
    """`x` (M, K); `weight` (N, K) and `bias` (N,) or None, in x's dtype. Returns x @ weight.T +
    bias, then ReLU if `relu`: (M, N) in x's dtype."""
    y = F.linear(x, weight, bias)
    return F.relu(y) if relu else y


def fused_linear_holds_weights(weight, M):
    """Whether `fused_linear` of x (M, K) and `weight` (N, K) reads only its weights before waiting
    for the kernel before it (so a norm before it may launch with `lead`)."""
    return use_triton(weight) and holds_weights(weight, M)


def fused_linear(x, weight, bias=None, relu=False):
    """x (M, K) @ weight (N, K)^T + bias, then ReLU if `relu`: (M, N) in x's dtype. For few rows:
    at hundreds of rows cuBLAS is faster."""
    return dispatch(fused_linear_triton, fused_linear_ref, x, x, weight, bias, relu)
