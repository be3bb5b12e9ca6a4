"""The LoRA part of the forward pass: adapters in fixed slots of device stacks, and the deltas each row adds.

For each targeted module there is a (slots, rank, in) and a (slots, out, rank) stack, rank-padded
with zeros, which kernels/lora.py reads with each row's slot index (-1 = base model), so one batch
mixes adapters and a CUDA graph captured once stays valid whatever the slots hold. Layer norms an
adapter replaces (modules_to_save) get per-slot copies.

The model asks for deltas by site: a projection it computes in one matmul (`fused_sites`: q, k and
v stacked; every decoder layer's cross-attention K and V), or a single module, named as PEFT names
it. Writing an adapter copies into the stacks; a stack is only reallocated when an adapter targets
a module no earlier adapter did, or with a larger rank: that bumps `layout`, and CUDA graphs
captured over the old stacks are captured again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from dragoman import kernels
from dragoman.engine.config import NllbConfig
from dragoman.engine.peft_adapter import Adapter

LAYER_NORM_EPS = 1e-5  # as engine/model.py


def fused_sites(config: NllbConfig) -> dict[str, list[tuple[str, int]]]:
    """engine/model.py's projections that compute several modules in one matmul, and the
    single ones: site -> [(module, its first output column)]."""
    C = config.d_model
    sites: dict[str, list[tuple[str, int]]] = {}
    for side, layers in (("encoder", config.encoder_layers), ("decoder", config.decoder_layers)):
        for i in range(layers):
            p = f"{side}.layers.{i}"
            qkv = ("q_proj", "k_proj", "v_proj")
            sites[f"{p}.self_attn.qkv"] = [(f"{p}.self_attn.{proj}", j * C) for j, proj in enumerate(qkv)]
            singles = ["self_attn.out_proj", "fc1", "fc2"]
            if side == "decoder":
                singles += ["encoder_attn.q_proj", "encoder_attn.out_proj"]
            for module in singles:
                sites[f"{p}.{module}"] = [(f"{p}.{module}", 0)]
    # Cross-attention K and V of every decoder layer, one matmul over the encoder output.
    sites["decoder.cross_kv"] = [
        (f"decoder.layers.{i}.encoder_attn.{proj}", (2 * i + j) * C)
        for i in range(config.decoder_layers) for j, proj in enumerate(("k_proj", "v_proj"))
    ]
    return sites


@dataclass
class _Stack:
    """One targeted module's slots: a (S, R, in), b (S, out, R), scale (S,) float32 (0 = no delta)."""

    a: torch.Tensor
    b: torch.Tensor
    scale: torch.Tensor


@dataclass
class _NormStack:
    """One layer norm's per-slot replacements (float32), and which slots replace it."""

    weight: torch.Tensor  # (S, C)
    bias: torch.Tensor  # (S, C)
    used: torch.Tensor  # (S,) bool


class LoraLayers:
    """`num_slots` adapters' weights on the device, and the deltas the model applies from them."""

    def __init__(self, config: NllbConfig, num_slots: int, device: torch.device, dtype: torch.dtype):
        self.num_slots = num_slots
        self.device = device
        self.dtype = dtype
        self.sites = fused_sites(config)
        self.stacks: dict[str, _Stack] = {}
        self.norm_stacks: dict[str, _NormStack] = {}
        self.site_stacks: dict[str, list[tuple[_Stack, int]]] = {}
        self.layout = 0  # bumped whenever stacks are reallocated

    def write(self, slot: int, adapter: Adapter) -> None:
        """Copy `adapter` into `slot`, queued on the current stream behind the work already queued
        there: no row may read the slot meanwhile. The copies wait for nothing when the adapter's
        host tensors are pinned (engine/lora_pool.py stages them so)."""
        self._fit(adapter)
        for module, stack in self.stacks.items():
            stack.a[slot].zero_()
            stack.b[slot].zero_()
            stack.scale[slot].fill_(0.0)  # (fill_: a Python number, no copy that could wait)
            lora = adapter.lora.get(module)
            if lora is not None:
                r = lora.a.shape[0]
                stack.a[slot, :r].copy_(lora.a, non_blocking=True)
                stack.b[slot, :, :r].copy_(lora.b, non_blocking=True)
                stack.scale[slot].fill_(lora.scale)
        for module, norm in self.norm_stacks.items():
            replaced = adapter.norms.get(module)
            norm.used[slot].fill_(replaced is not None)
            if replaced is not None:
                norm.weight[slot].copy_(replaced[0], non_blocking=True)
                norm.bias[slot].copy_(replaced[1], non_blocking=True)

    def _fit(self, adapter: Adapter) -> None:
        """Grow the stacks to hold `adapter`: new modules, or a larger rank (existing slots kept)."""
        S, grown = self.num_slots, False
        for module, lora in adapter.lora.items():
            rank = lora.a.shape[0]
            old = self.stacks.get(module)
            if old is not None and old.a.shape[1] >= rank:
                continue
            out, inp = lora.b.shape[0], lora.a.shape[1]
            kw: dict[str, Any] = dict(device=self.device, dtype=self.dtype)
            stack = _Stack(torch.zeros(S, rank, inp, **kw), torch.zeros(S, out, rank, **kw),
                           torch.zeros(S, dtype=torch.float32, device=self.device))
            if old is not None:
                stack.a[:, : old.a.shape[1]].copy_(old.a)
                stack.b[:, :, : old.a.shape[1]].copy_(old.b)
                stack.scale.copy_(old.scale)
            self.stacks[module] = stack
            grown = True
        for module, (weight, _) in adapter.norms.items():
            if module not in self.norm_stacks:
                kw = dict(device=self.device, dtype=torch.float32)
                self.norm_stacks[module] = _NormStack(torch.zeros(S, weight.shape[0], **kw),
                                                      torch.zeros(S, weight.shape[0], **kw),
                                                      torch.zeros(S, dtype=torch.bool, device=self.device))
                grown = True
        if grown:
            self.layout += 1
            self.site_stacks = {
                site: [(self.stacks[m], offset) for m, offset in modules if m in self.stacks]
                for site, modules in self.sites.items()
            }

    def add(self, site: str, x: torch.Tensor, y: torch.Tensor, slots: torch.Tensor) -> None:
        """y (M, out) += each row's delta for the modules computed at `site`; x (M, in), slots (M,)."""
        for stack, offset in self.site_stacks.get(site, ()):
            kernels.lora(x, y[:, offset : offset + stack.b.shape[1]], stack.a, stack.b, stack.scale, slots)

    def norm(self, site: str, x: torch.Tensor, h: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
        """h = norm(x) with each row's replacement weight and bias where its adapter has one."""
        stack = self.norm_stacks.get(site)
        if stack is None:
            return h
        C = x.shape[-1]
        x2, h2 = x.reshape(-1, C), h.reshape(-1, C)  # (M, C)
        s = slots.clamp(min=0).long()
        use = (slots >= 0) & stack.used[s]  # (M,)
        normed = F.layer_norm(x2.float(), (C,), eps=LAYER_NORM_EPS) * stack.weight[s] + stack.bias[s]
        return torch.where(use[:, None], normed.to(h.dtype), h2).view(h.shape)


@dataclass
class LoraRows:
    """The adapters of one forward pass: the slots' weights, and each row's slot (-1 = base model).
    Encoder rows are tokens, each with its source's slot."""

    layers: LoraLayers
    slots: torch.Tensor  # (rows,) int32

    def add(self, site: str, x: torch.Tensor, y: torch.Tensor) -> None:
        """y += the rows' LoRA deltas at `site`; x (..., in) and y (..., out) with rows leading."""
        self.layers.add(site, x.reshape(-1, x.shape[-1]), y.view(-1, y.shape[-1]), self.slots)

    def norm(self, site: str, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        return self.layers.norm(site, x, h, self.slots)
