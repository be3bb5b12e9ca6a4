"""LoRA adapters for the tiny test checkpoint, made and saved by PEFT itself, and PEFT's translations
with them: the oracle for engine/peft_adapter.py, engine/lora_layers.py and engine/lora_pool.py.

PEFT initialises lora_B to zero, which would make every adapter a no-op: B is set to random values
(and modules_to_save copies are perturbed), so each adapter changes the translations.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import M2M100ForConditionalGeneration

# Ranks, alphas, rsLoRA, per-module rank and alpha, list and regex targets, every projection of
# encoder and decoder (cross-attention too), one layer only, and modules_to_save on every layer norm.
ADAPTER_CONFIGS = {
    "attn": dict(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]),
    "ffn-rslora": dict(r=8, lora_alpha=16, use_rslora=True, target_modules=["k_proj", "out_proj", "fc1", "fc2"]),
    "encoder-only": dict(r=2, lora_alpha=4, target_modules=r"model\.encoder\.layers\.\d+\.(self_attn\.[qkv]_proj|fc1)"),
    "decoder-only": dict(
        r=4,
        lora_alpha=4,
        target_modules=r"model\.decoder\.layers\.\d+\.(encoder_attn\.[qkv]_proj|self_attn\.out_proj|fc2)",
        rank_pattern={"fc2": 6},
        alpha_pattern={"encoder_attn.k_proj": 32},
    ),
    "layer1-norms": dict(r=3, lora_alpha=6, target_modules=["q_proj", "fc1"], layers_to_transform=[1],
                         modules_to_save=["layer_norm"]),
}


def make_adapter(checkpoint: Path, dest: Path, seed: int, **config) -> PeftModel:
    """Save a PEFT LoRA adapter with random non-zero weights to `dest`; returns the PEFT model."""
    with torch.random.fork_rng():  # lora_A's init draws from the global generator
        torch.manual_seed(seed)
        model = M2M100ForConditionalGeneration.from_pretrained(checkpoint, dtype=torch.float32)
        peft_model = get_peft_model(model, LoraConfig(**config))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in peft_model.named_parameters():
            if "lora_B" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.3)
            elif "modules_to_save" in name:
                parameter.add_(torch.randn(parameter.shape, generator=generator) * 0.2)
    peft_model.save_pretrained(dest)
    return peft_model.eval()


def make_adapters(checkpoint: Path, folder: Path) -> dict[str, PeftModel]:
    """Every adapter of ADAPTER_CONFIGS in its own subfolder of `folder`."""
    return {name: make_adapter(checkpoint, folder / name, seed, **config)
            for seed, (name, config) in enumerate(ADAPTER_CONFIGS.items())}


def peft_generate(model, tokenizer, text: str, src: str, tgt: str, **options) -> tuple[list[int], str]:
    """(token ids without padding, decoded text) of `model.generate`, as tests/engine/test_generation.py."""
    tokenizer.src_lang = src
    with torch.no_grad():
        out = model.generate(
            **tokenizer(text, return_tensors="pt"), forced_bos_token_id=tokenizer.convert_tokens_to_ids(tgt),
            do_sample=False, **options,
        )
    ids = out[0].tolist()
    while ids[-1] == tokenizer.pad_token_id:
        ids.pop()
    return ids, tokenizer.decode(out[0], skip_special_tokens=True)


# The texts, languages and options the LoRA tests translate, and what PEFT makes of them.
TEXTS = ["The quick brown fox jumps over the lazy dog.", "Привет, как дела?", "我们明天去北京。"]
SRC, TGT = "eng_Latn", "fra_Latn"
OPTION_SETS = [dict(num_beams=4, max_length=30), dict(num_beams=1, max_length=30)]
NAMES = list(ADAPTER_CONFIGS)


def peft_expectations(models: dict[str, PeftModel], base_model, tokenizer) -> dict:
    """{(adapter or None, option set index, text index): PEFT's token ids} for TEXTS and OPTION_SETS."""
    out = {}
    for name, model in [(None, base_model)] + list(models.items()):
        for o, options in enumerate(OPTION_SETS):
            for t, text in enumerate(TEXTS):
                out[name, o, t] = peft_generate(model, tokenizer, text, SRC, TGT, **options)[0]
    return out


def requests_for(translator, cases: list[tuple[str | None, int]], o: int) -> list:
    """A generator Request per (adapter or None, text index), with option set `o`."""
    from dragoman.engine.decoding import DecodingOptions
    from dragoman.engine.generator import Request

    tok, options = translator.tokenizer, DecodingOptions(**OPTION_SETS[o])
    return [Request(tok.encode_source(TEXTS[t], SRC), tok.decoder_prefix(TGT), options, adapter=name) for name, t in cases]


def copy_adapter(src: Path, dest: Path) -> None:
    """`dest` becomes a copy of the adapter folder `src` (new files: a new signature on disk)."""
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(src, dest)
