"""What a kernel boundary costs on the GPU, against a grid barrier inside one persistent kernel:
`python -m bench.boundaries` (CUDA only). docs/performance.md says what the figures meant for the
engine.

Each figure is per phase of a chain of PHASES, replayed from a CUDA graph (median of 15):
- fused_linear chained / plain: 4 rows of a 1,024 -> 1,024 projection, weights rotating past L2;
- empty chained / plain: a kernel that reads and writes one number per program (64 programs);
- persistent: one launch whose programs run PHASES phases, meeting at a grid barrier (an atomic
  arrive, then a spin on the count) after each: the barrier alone, and with each phase doing the
  same projection (its weights loaded after the barrier, or held from before it).
"""

import torch
import triton
import triton.language as tl

import dragoman.kernels._triton as chained
from dragoman.kernels import fused_linear

PHASES, K, N, M = 96, 1024, 1024, 4


@triton.jit
def _empty_kernel(x_ptr, y_ptr, CHAINED: tl.constexpr):
    if CHAINED:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    i = tl.program_id(0)
    tl.store(y_ptr + i, tl.load(x_ptr + i) + 1)


@triton.jit
def _grid_barrier(count_ptr, target):
    """Every program of the grid has arrived `target` times in all (the count only grows)."""
    tl.debug_barrier()
    seen = tl.atomic_add(count_ptr, 1, sem="acq_rel", scope="gpu") + 1
    while seen < target:
        seen = tl.atomic_add(count_ptr, 0, sem="acquire", scope="gpu")
    tl.debug_barrier()


@triton.jit
def _persistent_kernel(buf_ptr, w_ptr, count_ptr, phases, M: tl.constexpr, K: tl.constexpr, N: tl.constexpr,
                       BLOCK_N: tl.constexpr, WORK: tl.constexpr, HOLD: tl.constexpr):
    programs = tl.num_programs(0)
    n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    k = tl.arange(0, K)
    m = tl.arange(0, 16)  # tl.dot's smallest tile; rows past M masked
    w = tl.load(w_ptr + n[:, None] * K + k[None, :])
    for phase in range(phases):
        if WORK:
            src = buf_ptr + (phase % 2) * M * K  # activations ping-pong between two buffers
            dst = buf_ptr + ((phase + 1) % 2) * M * K
            if not HOLD:
                w = tl.load(w_ptr + phase * N * K + n[:, None] * K + k[None, :])
            h = tl.load(src + m[:, None] * K + k[None, :], mask=(m < M)[:, None], other=0.0, cache_modifier=".cg")
            tl.store(dst + m[:, None] * N + n[None, :], tl.dot(h, tl.trans(w)).to(dst.dtype.element_ty),
                     mask=(m < M)[:, None])
            if HOLD:
                w = tl.load(w_ptr + ((phase + 1) % phases) * N * K + n[:, None] * K + k[None, :])
        _grid_barrier(count_ptr, (phase + 1) * programs)


def per_phase_us(fn, reps=15):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[reps // 2] * 1000 / PHASES


def main() -> None:
    torch.manual_seed(0)
    weights = (torch.randn(PHASES, N, K, device="cuda") * 0.03).to(torch.bfloat16)  # 192 MB: past L2
    x = torch.randn(M, K, device="cuda").to(torch.bfloat16)
    one, other = torch.zeros(64, device="cuda"), torch.zeros(64, device="cuda")
    results = {}

    def projections():
        y = x
        for phase in range(PHASES):
            y = fused_linear(y, weights[phase])

    results["fused_linear chained"] = per_phase_us(projections)
    chained._CHAINED = False
    results["fused_linear plain"] = per_phase_us(projections)
    chained._CHAINED = True
    for is_chained in (True, False):
        def empties():
            for _ in range(PHASES):
                _empty_kernel[(64,)](one, other, CHAINED=is_chained, **chained.launch_options(is_chained))
        results[f"empty {'chained' if is_chained else 'plain'}"] = per_phase_us(empties)

    buffers = torch.zeros(2, M, K, device="cuda", dtype=torch.bfloat16)
    count = torch.zeros(1, device="cuda", dtype=torch.int32)
    for work, hold in ((False, False), (True, False), (True, True)):
        def persistent():
            count.zero_()
            buffers[0].copy_(x)
            _persistent_kernel[(N // 16,)](buffers, weights, count, PHASES, M=M, K=K, N=N, BLOCK_N=16,
                                           WORK=work, HOLD=hold, num_warps=8)
        label = "barrier only" if not work else "projection, weights held" if hold else "projection"
        results[f"persistent: {label}"] = per_phase_us(persistent)
    for name, us in results.items():
        print(f"{name:40s} {us:6.2f} us per phase")


if __name__ == "__main__":
    main()
