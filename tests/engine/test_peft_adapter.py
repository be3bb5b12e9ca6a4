"""PEFT adapter folders read and checked: what a scan lists, broken adapters refused by file and
problem (and the base model and the other adapters still working beside them), and the config's
module patterns matched as PEFT matches them, without backtracking."""

import json
import math

import pytest
import torch
from peft_adapters import NAMES, OPTION_SETS, SRC, TEXTS, TGT, copy_adapter, peft_expectations, requests_for
from safetensors.torch import load_file, save_file

from dragoman.engine.peft_adapter import AdapterError, linear_modules, load_adapter, scan_adapters


@pytest.fixture(scope="module")
def expected(peft_adapters, hf_model, hf_tokenizer):
    """{(adapter or None, option set index, text index): PEFT's token ids}."""
    return peft_expectations(peft_adapters[1], hf_model, hf_tokenizer)


def test_scan_lists_rank_targets_and_size(peft_adapters, lora_translator):
    found = {info.name: info for info in scan_adapters(peft_adapters[0], lora_translator.config)}
    assert list(found) == sorted(NAMES, key=str.casefold) and not any(info.error for info in found.values())
    assert found["ffn-rslora"].rank == 8 and found["ffn-rslora"].use_rslora
    assert found["ffn-rslora"].targets() == ("encoder k_proj out_proj fc1 fc2; "
                                             "decoder k_proj out_proj fc1 fc2 cross_attn.k_proj cross_attn.out_proj")
    assert found["decoder-only"].rank == 6  # rank_pattern
    assert found["layer1-norms"].targets().endswith("12 layer norms")  # 2 per encoder layer, 3 per decoder layer, 2 final
    assert found["attn"].size == (peft_adapters[0] / "attn" / "adapter_model.safetensors").stat().st_size


# -- broken adapters ----------------------------------------------------------------------------------


def edit_config(folder, **changes):
    path = folder / "adapter_config.json"
    config = json.loads(path.read_text())
    config.update(changes)
    path.write_text(json.dumps(config))


def read_weights(folder):
    """The adapter's tensors, copied out of the memory map (rewriting a mapped file would pull it away)."""
    return {name: tensor.clone() for name, tensor in load_file(folder / "adapter_model.safetensors").items()}


def edit_weights(folder, change):
    tensors = read_weights(folder)
    change(tensors)
    save_file(tensors, folder / "adapter_model.safetensors")


def first_key(tensors, part):
    return next(k for k in sorted(tensors) if part in k)


def widen(tensors):
    """lora_A of a model with d_model 48: an adapter for another base model."""
    key = first_key(tensors, "lora_A")
    tensors[key] = torch.randn(tensors[key].shape[0], 48)


BROKEN = {
    "no-config": (lambda f: (f / "adapter_config.json").unlink(), "adapter_config.json: missing"),
    "bad-json": (lambda f: (f / "adapter_config.json").write_text("{"), "adapter_config.json: not readable JSON"),
    "other-base-model": (lambda f: edit_weights(f, widen), "an adapter for another base model"),
    "no-such-targets": (lambda f: edit_config(f, target_modules=["query_key_value"]), "select no module of NLLB"),
    "untargeted-tensor": (lambda f: edit_config(f, target_modules=["q_proj"]), "target_modules does not select"),
    "wrong-rank": (lambda f: edit_config(f, r=5), "gives it rank 5"),
    "truncated": (
        lambda f: (f / "adapter_model.safetensors").write_bytes((f / "adapter_model.safetensors").read_bytes()[:-100]),
        "truncated",
    ),
    "not-safetensors": (lambda f: (f / "adapter_model.safetensors").write_text("hello " * 50), "not a safetensors file"),
    "pickle-named-safetensors": (
        lambda f: torch.save(read_weights(f), f / "adapter_model.safetensors"),
        "a pickle (torch.save) file",
    ),
    "pickle-only": (
        lambda f: (torch.save({}, f / "adapter_model.bin"), (f / "adapter_model.safetensors").unlink()),
        "adapter_model.bin: a pickle file",
    ),
    "dora": (lambda f: edit_config(f, use_dora=True), "DoRA (use_dora) is not supported"),
    "ia3": (lambda f: edit_config(f, peft_type="IA3"), "only LoRA adapters are supported"),
    "pissa": (lambda f: edit_config(f, init_lora_weights="pissa"), "init_lora_weights='pissa'"),
    "trained-biases": (lambda f: edit_config(f, bias="all"), "bias='all'"),
    "lm-head-copy": (
        lambda f: edit_weights(f, lambda t: t.update({"base_model.model.lm_head.weight": torch.zeros(3, 32)})),
        "whole copy of 'lm_head' (modules_to_save)",
    ),
    "nan": (
        lambda f: edit_weights(f, lambda t: t[first_key(t, "lora_B")].fill_(float("nan"))),
        "NaN or infinite",
    ),
    "inf": (
        lambda f: edit_weights(f, lambda t: t[first_key(t, "lora_A")].view(-1)[7:9].fill_(-math.inf)),
        "NaN or infinite",
    ),
    "beyond-float16": (
        lambda f: edit_weights(f, lambda t: t[first_key(t, "lora_B")].view(-1)[0:1].fill_(1e6)),
        "beyond float16's range",
    ),
    # json writes NaN and Infinity, which Python's json (as PEFT's) reads back.
    "nan-alpha": (lambda f: edit_config(f, lora_alpha=math.nan), "adapter_config.json: lora_alpha must be a number above 0"),
    "inf-alpha": (lambda f: edit_config(f, lora_alpha=math.inf), "adapter_config.json: lora_alpha must be"),
    "negative-alpha": (lambda f: edit_config(f, lora_alpha=-8), "adapter_config.json: lora_alpha must be"),
    "overflowing-alpha": (lambda f: edit_config(f, lora_alpha=1e300), "adapter_config.json: lora_alpha must be"),
    "string-alpha": (lambda f: edit_config(f, lora_alpha="8"), "adapter_config.json: lora_alpha must be"),
    "zero-rank": (lambda f: edit_config(f, r=0), "adapter_config.json: r must be an integer from 1 to 4096, not 0"),
    "negative-rank": (lambda f: edit_config(f, r=-4), "adapter_config.json: r must be an integer"),
    "overflowing-rank": (lambda f: edit_config(f, r=10**30), "adapter_config.json: r must be an integer"),
    "float-rank": (lambda f: edit_config(f, r=4.0), "adapter_config.json: r must be an integer"),
    "nan-rank-pattern": (lambda f: edit_config(f, rank_pattern={"q_proj": math.nan}),
                         "adapter_config.json: rank_pattern['q_proj'] must be an integer"),
    "inf-alpha-pattern": (lambda f: edit_config(f, alpha_pattern={"v_proj": math.inf}),
                          "adapter_config.json: alpha_pattern['v_proj'] must be a number above 0"),
    "zero-alpha-pattern": (lambda f: edit_config(f, alpha_pattern={"v_proj": 0}),
                           "adapter_config.json: alpha_pattern['v_proj'] must be"),
    "list-rank-pattern": (lambda f: edit_config(f, rank_pattern=[4]), "adapter_config.json: rank_pattern must be an object"),
    "numeric-targets": (lambda f: edit_config(f, target_modules=5), "adapter_config.json: target_modules must be"),
    "lookahead-target": (lambda f: edit_config(f, target_modules=r"(?!.*fc1).*_proj"),
                         "adapter_config.json: target_modules '(?!.*fc1).*_proj' uses lookarounds"),
    "invalid-regex": (lambda f: edit_config(f, rank_pattern={"q_proj(": 4}),
                      "adapter_config.json: rank_pattern 'q_proj(' is not a valid regular expression"),
}


@pytest.fixture(scope="module")
def broken_folder(peft_adapters, tmp_path_factory):
    folder = tmp_path_factory.mktemp("broken-adapters")
    copy_adapter(peft_adapters[0] / "attn", folder / "good")
    for name, (breaks, _) in BROKEN.items():
        copy_adapter(peft_adapters[0] / "attn", folder / name)
        breaks(folder / name)
    return folder


@pytest.mark.parametrize("name", BROKEN)
def test_a_broken_adapter_is_refused_by_file_and_problem(lora_translator, broken_folder, name):
    message = BROKEN[name][1]
    with pytest.raises(AdapterError, match=None) as refused:
        load_adapter(broken_folder / name, lora_translator.config)
    assert message in str(refused.value) and str(broken_folder / name) in str(refused.value)
    if name not in ("nan", "inf", "beyond-float16"):  # found without reading the tensors' data
        [info] = [i for i in scan_adapters(broken_folder, lora_translator.config) if i.name == name]
        assert message in info.error


def test_broken_adapters_leave_the_base_model_and_the_others_working(make_translator, broken_folder, expected):
    t = make_translator(adapters_dir=broken_folder, adapter_slots=1)
    options = t.default_options(**OPTION_SETS[1])
    for name in BROKEN:
        with pytest.raises(AdapterError):
            t.translate(TEXTS[:1], SRC, TGT, options, adapter=name)
    good = t.translate(TEXTS[:1], SRC, TGT, options, adapter="good")
    base = t.translate(TEXTS[:1], SRC, TGT, options)
    assert [good, base] == [[t.tokenizer.decode(expected[n, 1, 0])] for n in ("attn", None)]
    requests = requests_for(t, [("nan", 0), ("good", 0), (None, 0), ("no-config", 0)], 1)
    t.generator.run(requests)
    assert [r.result for r in requests] == [None, expected["attn", 1, 0], expected[None, 1, 0], None]
    assert "NaN" in requests[0].error and "adapter_config.json: missing" in requests[3].error


def test_unusable_names_are_refused(lora_translator):
    for name in ["", "../attn", ".hidden", "no-such-adapter"]:
        with pytest.raises(AdapterError):
            lora_translator.translate(TEXTS[:1], SRC, TGT, adapter=name or "x/y")



# Each keeps Python's backtracking `re` busy for hours on one of NLLB's module names (some 40
# characters long): nested repeats, many runs of `.*`. A hang fails the run by its timeout.
CATASTROPHIC = [r"([a-z_.0-9]+)+X", r"(.*)*X", ".*" * 30 + "X", r"(\w+\.?)+\d{3}"]


@pytest.mark.parametrize("pattern", CATASTROPHIC)
@pytest.mark.parametrize("field", ["target_modules", "exclude_modules", "rank_pattern", "alpha_pattern",
                                   "layers_pattern", "modules_to_save"])
def test_catastrophic_patterns_are_matched_without_backtracking(peft_adapters, lora_translator, tmp_path, field, pattern):
    folder = tmp_path / "evil"
    copy_adapter(peft_adapters[0] / "attn", folder)
    value = {"rank_pattern": {pattern: 4}, "alpha_pattern": {pattern: 8}, "modules_to_save": [pattern]}.get(field, pattern)
    edit_config(folder, **{field: value}, **({"layers_to_transform": [0, 1]} if field == "layers_pattern" else {}))
    if field in ("target_modules", "layers_pattern"):  # matches no module: nothing is targeted
        with pytest.raises(AdapterError, match="select no module of NLLB|target_modules does not select"):
            load_adapter(folder, lora_translator.config)
    else:  # matches nothing: the adapter is the original one
        assert load_adapter(folder, lora_translator.config).lora.keys() == load_adapter(
            peft_adapters[0] / "attn", lora_translator.config).lora.keys()
    [info] = scan_adapters(tmp_path, lora_translator.config)
    assert info.name == "evil"


def test_module_patterns_mean_what_they_mean_to_peft(lora_translator, tmp_path):
    """The linear-time matcher against `re` on every module name, for patterns PEFT users write."""
    import re

    from dragoman.engine.linear_regex import compile_pattern

    patterns = [r".*\.(q_proj|v_proj)", r"model\.decoder\.layers\.\d+\.encoder_attn\.[kv]_proj", r".*fc[12]$",
                r"(.*\.)?(self_attn\.out_proj)$", r".*layers\.(0|1)\..*", r"^model\.\w+\.layers\.1\b.*", r"[^.]+"]
    names = [f"model.{m}" for m in linear_modules(lora_translator.config)]
    for pattern in patterns:
        compiled = compile_pattern(pattern)
        for name in names:
            assert compiled.fullmatch(name) == (re.fullmatch(pattern, name) is not None), (pattern, name)
            assert compiled.match(name) == (re.match(pattern, name) is not None), (pattern, name)


def test_layers_pattern_names_where_the_layer_index_is(peft_adapters, lora_translator, tmp_path):
    original = load_adapter(peft_adapters[0] / "layer1-norms", lora_translator.config).lora.keys()
    assert original and all(".layers.1." in module for module in original)
    for pattern in ("layers", ["nothing", "lay.rs"], r"(encoder|decoder)\.layers"):
        copy_adapter(peft_adapters[0] / "layer1-norms", tmp_path / "pattern")
        edit_config(tmp_path / "pattern", layers_pattern=pattern)
        assert load_adapter(tmp_path / "pattern", lora_translator.config).lora.keys() == original, pattern
    edit_config(tmp_path / "pattern", layers_pattern="blocks")
