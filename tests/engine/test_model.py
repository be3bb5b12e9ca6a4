"""engine/model.py's parts that the translations of test_generation.py do not reach by themselves."""

import pytest
import torch

from dragoman.engine.kv_cache import PagedKVCache
from dragoman.engine.model import FoldedSources


@pytest.mark.parametrize("length, S", [(1, 16), (7, 16), (16, 16), (17, 32), (32, 32), (33, 64), (64, 64)])
def test_a_folded_source_gives_the_cross_attention_sublayer(translator, length, S):
    """FoldedSources (kernels' references on the CPU) against the plain sublayer: q projection,
    attention over the sentence's keys and values in the cache, output projection; every layer,
    at every S, with the K/V it is handed past the sentence's length another's."""
    model = translator.generator.model
    L, H, D, C = model.config.decoder_layers, model.heads, model.head_dim, model.config.d_model
    g = torch.Generator().manual_seed(length)
    cache = PagedKVCache(L, 8, 16, H, D, torch.float32, torch.device("cpu"))
    cache.k.normal_(generator=g)
    cache.v.normal_(generator=g)
    assert FoldedSources.slots_for(length) == S
    slots = torch.randperm(cache.k.shape[1], generator=g)[:S].int()  # (S,): the sentence's first, scattered
    folded = FoldedSources(model)
    folded.fold(cache.k[:, slots], cache.v[:, slots], torch.tensor([length], dtype=torch.int32), S)
    assert folded.slots == S
    h = torch.randn(4, C, generator=g)  # (N, C)
    own = slots[:length].long()
    for i, layer in enumerate(model.decoder_layers):
        q = layer.cross_q(h).view(4, H, D)  # (N, H, D)
        scores = torch.einsum("nhd,shd->nhs", q, cache.k[i, own]) * model.scale  # (N, H, length)
        attended = torch.einsum("nhs,shd->nhd", scores.softmax(-1), cache.v[i, own]).reshape(4, C)  # (N, C)
        torch.testing.assert_close(folded.attend(i, h, model.scale), layer.cross_out(attended), rtol=1e-5, atol=1e-5)


def test_the_stacked_cross_projections_are_the_layers_own_weights(make_translator):
    model = make_translator().generator.model
    before = [(layer.cross_q.weight.clone(), layer.cross_out.bias.clone()) for layer in model.decoder_layers]
    wq, bq, wo, bo = model.cross_projections()
    assert model.cross_projections()[0] is wq  # stacked once
    for i, (layer, (q_weight, out_bias)) in enumerate(zip(model.decoder_layers, before)):
        assert torch.equal(wq[i], q_weight) and torch.equal(bo[i], out_bias)
        # Views of the stacks: no second copy of the weights is kept.
        assert layer.cross_q.weight.data_ptr() == wq[i].data_ptr() and layer.cross_out.weight.data_ptr() == wo[i].data_ptr()


def test_the_model_holds_the_weights_it_was_given_not_copies(tiny_checkpoint):
    """Only the projections it stacks (q, k and v; every layer's cross K and V) are new tensors: a
    copy of the rest would hold a large model's weights twice while it loads."""
    from dragoman.engine.checkpoint import open_checkpoint
    from dragoman.engine.model import NllbModel
    from dragoman.engine.weights import load_weights

    config = open_checkpoint(tiny_checkpoint).config
    weights = load_weights(tiny_checkpoint, config, torch.float32, torch.device("cpu"))
    model = NllbModel(config, weights, 64)
    for i, layer in enumerate(model.decoder_layers):
        for linear, name in ((layer.fc1, "fc1"), (layer.fc2, "fc2"), (layer.self_attn_out, "self_attn.out_proj"),
                             (layer.cross_q, "encoder_attn.q_proj"), (layer.cross_out, "encoder_attn.out_proj")):
            assert linear.weight.data_ptr() == weights[f"decoder.layers.{i}.{name}.weight"].data_ptr(), name
    assert model.embed_tokens.data_ptr() == weights["embed_tokens.weight"].data_ptr()
