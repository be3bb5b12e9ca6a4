"""The LoRA deltas against PEFT on the tiny random checkpoint, in float32: token-identical, alone and
in mixed batches, eagerly and through the padded graph path; and the sites the model asks for
deltas by are the modules PEFT names."""

import pytest
from peft_adapters import NAMES, OPTION_SETS, TEXTS, peft_expectations, requests_for

from dragoman.engine.generator import Generator
from dragoman.engine.lora_layers import LoraLayers, fused_sites
from dragoman.engine.peft_adapter import linear_modules, norm_modules


@pytest.fixture(scope="module")
def expected(peft_adapters, hf_model, hf_tokenizer):
    """{(adapter or None, option set index, text index): PEFT's token ids}."""
    return peft_expectations(peft_adapters[1], hf_model, hf_tokenizer)


def test_the_fused_sites_cover_every_module_once(lora_translator):
    sites = fused_sites(lora_translator.config)
    covered = [module for modules in sites.values() for module, _ in modules]
    assert sorted(covered) == sorted(linear_modules(lora_translator.config))


def test_the_model_asks_for_deltas_by_the_sites_the_layers_know(peft_adapters, lora_translator, monkeypatch):
    """Encoder and decoder steps ask for every fused site and every layer norm, by those names only."""
    asked = {"add": set(), "norm": set()}
    add, norm = LoraLayers.add, LoraLayers.norm
    monkeypatch.setattr(LoraLayers, "add", lambda self, site, *args: asked["add"].add(site) or add(self, site, *args))
    monkeypatch.setattr(LoraLayers, "norm", lambda self, site, *args: asked["norm"].add(site) or norm(self, site, *args))
    generator = Generator.build(lora_translator.generator.model, adapters_dir=peft_adapters[0], adapter_slots=1)
    generator.run(requests_for(lora_translator, [("layer1-norms", 0)], 1))
    assert asked["add"] == set(fused_sites(lora_translator.config))
    assert asked["norm"] == set(norm_modules(lora_translator.config))


@pytest.mark.parametrize("o", range(len(OPTION_SETS)), ids=["beam4", "greedy"])
def test_a_mixed_batch_equals_peft_and_each_request_alone(lora_translator, expected, o):
    """Every adapter and the base model, every text, in one continuous batch."""
    cases = [(name, t) for t in range(len(TEXTS)) for name in [None] + NAMES]
    mixed = [r.result for r in lora_translator.generator.run(requests_for(lora_translator, cases, o))]
    for (name, t), result in zip(cases, mixed):
        assert result == expected[name, o, t], (name, TEXTS[t])
    for name, t in cases[: len(NAMES) + 1]:  # the first text of each, alone
        [alone] = [r.result for r in lora_translator.generator.run(requests_for(lora_translator, [(name, t)], o))]
        assert alone == expected[name, o, t], name
    pool = lora_translator.generator.lora
    assert sum(pool.refs) == 0
    assert lora_translator.generator.num_free_blocks() == lora_translator.generator.num_total_blocks()


def test_every_adapter_changes_the_translation(expected):
    for name in NAMES:
        assert any(expected[name, 0, t] != expected[None, 0, t] for t in range(len(TEXTS))), name


def test_the_padded_graph_path_mixes_adapters_too(peft_adapters, lora_translator, expected):
    """The decoder step CUDA graphs replay, run eagerly: rows' slots in the static buffer, padding rows -1."""
    generator = Generator.build(lora_translator.generator.model, max_rows=32, graphs=True, adapters_dir=peft_adapters[0])
    generator.pipelined = True  # the GPU's order too
    cases = [(name, t) for t in range(2) for name in ["attn", None, "decoder-only", "layer1-norms"]]  # 3 beams: odd rows
    results = [r.result for r in generator.run(requests_for(lora_translator, cases, 0))]
    assert results == [expected[name, 0, t] for name, t in cases]


def test_a_sentence_alone_with_an_adapter_keeps_the_source_cache(peft_adapters, lora_translator, expected, monkeypatch):
    """A sentence admitted alone is folded (FoldedSources) only with the base model: the fold knows
    no adapter's q or output projection deltas. Alone, each adapter's translation is still PEFT's."""
    from dragoman import kernels

    generator = Generator.build(lora_translator.generator.model, max_rows=32, graphs=True, fold_sources=True,
                                adapters_dir=peft_adapters[0])
    generator.pipelined = True
    folded_steps = []
    source_scores = kernels.source_scores
    monkeypatch.setattr(kernels, "source_scores", lambda *args: folded_steps.append(1) or source_scores(*args))
    for name in [None] + NAMES:
        folded_steps.clear()
        [alone] = [r.result for r in generator.run(requests_for(lora_translator, [(name, 1)], 0))]
        assert alone == expected[name, 0, 1], name
        assert bool(folded_steps) == (name is None), name

