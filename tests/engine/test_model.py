"""engine/model.py's parts that the translations of test_generation.py do not reach by themselves."""

import pytest
import torch
import torch.nn.functional as F

from engine.model import Linear, cross_attention_folded, fold_source


@pytest.mark.parametrize("length", [1, 7, 16])
def test_cross_attention_by_associativity_equals_q_attention_and_output(length):
    """fold_source + cross_attention_folded (kernels' references on the CPU) against the plain
    sublayer: q projection, attention over the sentence's keys and values, output projection."""
    g = torch.Generator().manual_seed(length)
    N, H, D, slots = 4, 4, 8, 16
    C = H * D
    cross_q = Linear(torch.randn(C, C, generator=g) / C**0.5, torch.randn(C, generator=g))
    cross_out = Linear(torch.randn(C, C, generator=g) / C**0.5, torch.randn(C, generator=g))
    k, v = torch.randn(length, H, D, generator=g), torch.randn(length, H, D, generator=g)
    h = torch.randn(N, C, generator=g)
    scale = D**-0.5
    q = F.linear(h, cross_q.weight, cross_q.bias).view(N, H, D)  # (N, H, D)
    scores = torch.einsum("nhd,shd->nhs", q, k) * scale  # (N, H, length)
    attended = torch.einsum("nhs,shd->nhd", scores.softmax(-1), v).reshape(N, C)  # (N, C)
    expected = F.linear(attended, cross_out.weight, cross_out.bias)
    folded = fold_source(cross_q, cross_out, k, v, slots)
    assert folded.a.shape == (H * slots, C) and folded.b.shape == (C, H * slots) and int(folded.length) == length
    torch.testing.assert_close(cross_attention_folded(h, folded, cross_out, scale), expected, rtol=1e-5, atol=1e-5)
