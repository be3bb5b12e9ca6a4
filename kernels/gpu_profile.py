"""What the kernels may ask of a GPU: its compute capability, shared memory per block, multiprocessor
count, whether launches may chain, and the half precision its tensor cores have.

Read from `torch.cuda.get_device_properties`, or, where DRAGOMAN_GPU_PROFILE names one of
PROFILES, that card's limits on whatever GPU runs them: a larger card then plans, chains and
checks its kernels as a GeForce of that generation would. The kernels' plans come from
the profile, never from figures of one card.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

PROFILE_VARIABLE = "DRAGOMAN_GPU_PROFILE"


@dataclass(frozen=True)
class DeviceProfile:
    name: str
    capability: tuple[int, int]
    shared_memory: int  # bytes a block may have (the opt-in limit)
    multiprocessors: int

    @property
    def chained(self) -> bool:
        """Programmatic dependent launch: Hopper (9.0) and later."""
        return self.capability >= (9, 0)

    @property
    def has_bfloat16(self) -> bool:
        """Tensor cores with bfloat16 (Ampere, 8.0, and later). Turing's `is_bf16_supported()` is
        true through emulation, with no bfloat16 tensor-core instructions behind it."""
        return self.capability >= (8, 0)


KB = 1024
# Typical cards of each generation (their multiprocessor counts shape how work is split, not what runs).
PROFILES = {
    "sm_75": DeviceProfile("sm_75", (7, 5), 64 * KB, 36),  # Turing: RTX 2060-2080, T4
    "sm_80": DeviceProfile("sm_80", (8, 0), 163 * KB, 108),  # A100
    "sm_86": DeviceProfile("sm_86", (8, 6), 99 * KB, 28),  # Ampere GeForce: RTX 3060-3090, laptop GPUs
    "sm_89": DeviceProfile("sm_89", (8, 9), 99 * KB, 46),  # Ada: RTX 4060-4090
    "sm_90": DeviceProfile("sm_90", (9, 0), 227 * KB, 132),  # Hopper: H100, H200
}

_profiles: dict[int, DeviceProfile] = {}


def profile_name() -> str | None:
    """The profile DRAGOMAN_GPU_PROFILE names, or None (the GPU's own limits). Unknown names are
    refused with the names that exist."""
    name = os.environ.get(PROFILE_VARIABLE, "").strip()
    if not name:
        return None
    if name not in PROFILES:
        raise ValueError(f"{PROFILE_VARIABLE}={name!r}: expected one of {', '.join(PROFILES)}")
    return name


def device_profile(index: int = 0) -> DeviceProfile:
    """The profile of CUDA device `index` (read once per process)."""
    if index not in _profiles:
        name = profile_name()
        _profiles[index] = PROFILES[name] if name else _measured(index)
    return _profiles[index]


def profile_of(tensor) -> DeviceProfile:
    """The profile of `tensor`'s GPU. A CPU tensor (Triton's interpreter, in the tests) plans as the
    named profile, or as sm_90, the card the plans were measured on."""
    if not tensor.is_cuda:
        return PROFILES[profile_name() or "sm_90"]
    index = tensor.device.index
    return device_profile(index if index is not None else 0)


def _measured(index: int) -> DeviceProfile:
    import torch

    props = torch.cuda.get_device_properties(index)
    capability = (props.major, props.minor)
    shared = getattr(props, "shared_memory_per_block_optin", 0) or props.shared_memory_per_block
    return DeviceProfile(f"sm_{props.major}{props.minor}", capability, int(shared), props.multi_processor_count)
