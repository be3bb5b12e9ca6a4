"""Device profiles (kernels/gpu_profile.py) and the plans fused_linear takes from them."""

import pytest
import torch

from dragoman.kernels import gpu_profile as profile
from dragoman.kernels.fused_linear import _plan, fused_linear_ref, fused_linear_triton, shared_bytes
from dragoman.kernels.gpu_profile import PROFILES, device_profile, profile_of

# The projections of a decode step and of a typed sentence's encoder (48 padded rows) at 600M, 1.3B
# and 3.3B: (K, N), with the output projection's 256,206 columns.
LAYERS = [(1024, 1024), (1024, 3072), (1024, 4096), (4096, 1024), (8192, 1024), (1024, 8192), (2048, 2048),
          (2048, 6144), (2048, 8192), (8192, 2048), (1024, 24576), (1024, 256206), (2048, 256206)]
ROWS = [1, 4, 16, 17, 48, 64]


def test_a_named_profile_stands_for_the_gpu_and_for_the_interpreter(gpu_profile):
    gpu_profile("sm_86")
    assert device_profile(0) == PROFILES["sm_86"]  # read from the variable, without asking the GPU
    assert profile_of(torch.zeros(1)) == PROFILES["sm_86"]


def test_without_a_name_the_interpreter_plans_as_the_h200(gpu_profile):
    gpu_profile("")
    assert profile_of(torch.zeros(1)) == PROFILES["sm_90"]


def test_an_unknown_profile_is_refused_with_the_known_names(gpu_profile):
    gpu_profile("sm_61")
    with pytest.raises(ValueError, match="DRAGOMAN_GPU_PROFILE='sm_61': expected one of sm_75, sm_80"):
        device_profile(0)


def test_chained_launches_are_hopper_only_and_bfloat16_ampere_on():
    assert [p.name for p in PROFILES.values() if p.chained] == ["sm_90"]
    assert [p.name for p in PROFILES.values() if not p.has_bfloat16] == ["sm_75"]


@pytest.mark.parametrize("name", PROFILES)
@pytest.mark.parametrize("element_size", [2, 4])
def test_every_plan_fits_the_profile_s_shared_memory(name, element_size):
    limit = PROFILES[name].shared_memory
    for K, N in LAYERS:
        for M in ROWS:
            plan = _plan(M, N, K, PROFILES[name], element_size)
            k_split = triton_pow2(plan.k_split) if plan.hold else plan.k_split
            used = shared_bytes(plan.block_m, plan.BLOCK_N, plan.BLOCK_K, k_split, plan.hold, plan.stages,
                                element_size)
            assert used <= limit, f"{M} x {K} -> {N}: {plan}, {used} bytes"


def triton_pow2(n):
    return 1 << (n - 1).bit_length()


def test_the_h200_keeps_its_measured_plans_and_smaller_cards_get_smaller_tiles():
    # 48 rows of 4,096 -> 1,024 (a typed sentence's encoder fc2): 32 columns x 256 inputs, 4 splits, 3 stages.
    h200 = _plan(48, 1024, 4096, PROFILES["sm_90"], 2)
    assert (h200.BLOCK_N, h200.BLOCK_K, h200.split, h200.stages) == (32, 256, 4, 3)
    for name in ("sm_80", "sm_86", "sm_75"):  # 163 KB fits it; 99 and 64 take 2 stages of 128 inputs
        plan = _plan(48, 1024, 4096, PROFILES[name], 2)
        assert (plan.BLOCK_N, plan.BLOCK_K, plan.split, plan.stages) == (32, 256, 4, 3) if name == "sm_80" \
            else (32, 128, 4, 2)
    # 4 rows of 1,024 -> 1,024 hold their 16 x 1,024 weight block where it fits: not in Turing's 64 KB.
    assert _plan(4, 1024, 1024, PROFILES["sm_86"], 2).hold
    assert not _plan(4, 1024, 1024, PROFILES["sm_75"], 2).hold


def test_fewer_multiprocessors_split_less():
    # 4 rows of 4,096 -> 1,024: 64 programs of 16 columns, split towards two programs a multiprocessor
    # (then 8 ways, as measured on the H200); 28 multiprocessors have two each already.
    assert _plan(4, 1024, 4096, PROFILES["sm_90"], 2).split == 8
    assert _plan(4, 1024, 4096, PROFILES["sm_86"], 2).split == 1


@pytest.mark.parametrize("name", ["sm_75", "sm_86"])
def test_the_smaller_plans_compute_the_same_function(name, gpu_profile, check_error):
    gpu_profile(name)
    g = torch.Generator().manual_seed(0)
    for M, K, N in [(48, 1024, 2048), (4, 1024, 64)]:
        x = torch.randn(M, K, generator=g).half()
        weight = (torch.randn(N, K, generator=g) / K**0.5).half()
        bias = torch.randn(N, generator=g).half()
        truth = fused_linear_ref(x.double(), weight.double(), bias.double(), True)
        check_error(fused_linear_triton(x, weight, bias, relu=True), fused_linear_ref(x, weight, bias, True), truth,
                    slack=1e-5)
