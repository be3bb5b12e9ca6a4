"""`triton` and `triton.language`, or stand-ins where triton is not installed (Windows, CPU-only
installs) or could run nothing (`_kernels_can_run`), so that every kernel module still imports and
its `*_ref` still runs there.

Also what the decode step's kernels share: chained launches (`chained_launch`, `wait_for_inputs`,
`prefetch_l2`) and the sums of inputs split between programs (`sum_splits`).
"""

import ctypes
import os
import sys

import torch

from dragoman.kernels.gpu_profile import profile_of


def _kernels_can_run() -> bool:
    """Whether a Triton kernel could run or be compiled in this process: under Triton's interpreter
    (the tests), where triton is imported already (a compiler's tests), or with a GPU build of torch
    on a machine with NVIDIA's driver. Elsewhere triton is not imported: importing it and defining
    the kernels would cost a CPU start a tenth of a second for nothing."""
    if os.environ.get("TRITON_INTERPRET") == "1" or "triton" in sys.modules or torch.version.hip:
        return True
    if not torch.version.cuda:
        return False
    try:
        ctypes.CDLL("nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1")
    except OSError:
        return False
    return True


HAVE_TRITON = False
if _kernels_can_run():
    try:
        import triton
        import triton.language as tl

        HAVE_TRITON = True
    except ImportError:
        pass
if not HAVE_TRITON:

    class _Missing:
        """Just enough of triton for the kernel modules to define their kernels, never to launch them."""

        @staticmethod
        def constexpr(value):  # kernel constants and, uncalled, kernel signatures' annotations
            return value

        @staticmethod
        def jit(fn=None, **options):  # @triton.jit, and @triton.jit(do_not_specialize=...)
            return fn if fn is not None else lambda fn: fn

        @staticmethod
        def next_power_of_2(n: int) -> int:  # block sizes, also where a wrapper chooses kernel or reference
            return 1 << max(0, n - 1).bit_length()

    triton = tl = _Missing()

# Chained launches can be turned off (DRAGOMAN_CHAINED=0) to measure what they bring.
_CHAINED = os.environ.get("DRAGOMAN_CHAINED", "1") != "0"


def chained_launch(tensor) -> bool:
    """Whether kernels on `tensor`'s device launch chained: with programmatic dependent launch
    (Hopper and later), a kernel's programs start while the kernel before it finishes, run the part
    that does not read its predecessor's output (fetching weights), then wait for it (`gdc_wait`).

    Why: a decode step of a typed sentence is ~150 kernels of a few microseconds each, most of them
    bound by their start-up and the latency of their first weight loads, not by bandwidth.

    Rule for every chained kernel: it calls `gdc_wait` in every program before any store and before
    reading anything the kernel before it may write, so that waiting is transitive along the chain.
    A kernel lets the next one start (`gdc_launch_dependents`) once it has waited, so every kernel
    before the one before has finished: what those wrote may be read before waiting. The decode step
    reads that way its weights, the source cache (written at admission), and the lengths, slot lists
    and cached K/V written before the step's first chained kernel (by earlier steps, or by the step's
    unchained opening ops, which a chained kernel does not overtake).

    The exception: a layer norm (kernels/add_layer_norm.py, embed_layer_norm.py) launched with
    `lead` lets the next kernel start before it waits. The engine asks for it where the next kernel
    is a projection that holds its weights (`fused_linear.holds_weights`): it reads only weights
    before waiting, and gets the norm plus the kernel before to load them. Asked for after every
    norm, held or not, it slows 3.3B, whose qkv and fc1 do not hold their weights
    (docs/performance.md). A kernel after a norm launched with `lead` must read nothing but
    weights before waiting. Hopper and later only (kernels/gpu_profile.py)."""
    if not (_CHAINED and HAVE_TRITON and tensor.is_cuda):
        return False
    return profile_of(tensor).chained


def launch_options(chained: bool) -> dict:
    """Extra launch arguments of a chained kernel (none otherwise: the interpreter knows no such option)."""
    return {"launch_pdl": True} if chained else {}


@triton.jit
def wait_for_inputs(CHAINED: tl.constexpr):
    """A chained kernel's wait for the kernel before it, then its leave to the next kernel to start
    (`chained_launch`'s rule); nothing when not chained."""
    if CHAINED:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()


@triton.jit
def prefetch_l2(pointers):
    """Asks L2 to fetch the cache lines at `pointers` (one address per 128-byte line), keeping
    nothing in registers. Only for memory no kernel of the step writes: weights."""
    tl.inline_asm_elementwise(
        "prefetch.global.L2::evict_last [$1]; mov.u32 $0, 0;", "=r,l", [pointers],
        dtype=tl.int32, is_pure=False, pack=1,
    )


ARRIVAL_SLOTS = 256  # output blocks a split launch may have: one arrival count each
# Per device: a count of the splits arrived at each output block, back to 0 when its last adds up.
# Shared by every split launch on the device (fused_linear, source_scores), so split launches must
# not run concurrently on two streams (the engine's decode steps run on one).
_arrivals: dict = {}


def arrivals_on(device):
    """The device's ARRIVAL_SLOTS arrival counts for `sum_splits` (int32, allocated once: captured
    graphs keep its address)."""
    if device not in _arrivals:
        _arrivals[device] = torch.zeros(ARRIVAL_SLOTS, dtype=torch.int32, device=device)
    return _arrivals[device]


@triton.jit
def sum_splits(acc, partial_ptr, arrivals_ptr, block, split, SPLIT: tl.constexpr, ROWS: tl.constexpr,
               COLS: tl.constexpr):
    """For a block of outputs whose inputs SPLIT programs share: this program (`split`) leaves its
    partial sums `acc` (ROWS, COLS) float32; the last to arrive at the block adds them all up in
    split order (the result does not depend on who came last) and resets the block's count in
    `arrivals_ptr` (`arrivals_on`). Returns (the sums, or this program's part; whether this program
    came last). `partial_ptr`: room for (blocks, SPLIT, ROWS, COLS) float32."""
    tile = tl.arange(0, ROWS)[:, None] * COLS + tl.arange(0, COLS)[None, :]  # (ROWS, COLS)
    partials = partial_ptr + block.to(tl.int64) * SPLIT * ROWS * COLS + tile
    tl.store(partials + split * ROWS * COLS, acc)
    tl.debug_barrier()  # every thread's store issued before the count says so
    arrived = tl.atomic_add(arrivals_ptr + block, 1, sem="acq_rel")  # publishes the stores above
    last = arrived == SPLIT - 1
    if last:
        acc = tl.zeros([ROWS, COLS], tl.float32)
        for other in range(SPLIT):
            acc += tl.load(partials + other * ROWS * COLS, cache_modifier=".cg")  # from L2, not a stale L1
        tl.atomic_xchg(arrivals_ptr + block, 0)
    return acc, last


__all__ = [
    "ARRIVAL_SLOTS", "HAVE_TRITON", "arrivals_on", "chained_launch", "launch_options", "prefetch_l2", "sum_splits", "tl",
    "triton", "wait_for_inputs",
]
