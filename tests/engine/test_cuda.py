"""The engine on a CUDA GPU (skipped where there is none, as in CI): the Triton kernels and the
batched GPU paths must give the reference's tokens in float32, and run in the low precisions."""

import pytest
import torch

from engine.translator import Translator

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

TEXTS = ["The quick brown fox jumps over the lazy dog.", "Привет, как дела?", "我们明天去北京。", "Ein kurzer Satz"]


@pytest.fixture(scope="module")
def cpu_translator(tiny_checkpoint):
    return Translator(tiny_checkpoint, device="cpu", dtype="float32")


@pytest.mark.parametrize("options", [dict(num_beams=4), dict(num_beams=1), dict(num_beams=4, repetition_penalty=1.3)])
def test_float32_on_the_gpu_equals_the_cpu(tiny_checkpoint, cpu_translator, options):
    gpu = Translator(tiny_checkpoint, device="cuda", dtype="float32")
    expected = cpu_translator.translate(TEXTS, "eng_Latn", "fra_Latn", cpu_translator.default_options(max_length=40, **options))
    assert gpu.translate(TEXTS, "eng_Latn", "fra_Latn", gpu.default_options(max_length=40, **options)) == expected


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_low_precision_runs_and_frees_its_blocks(tiny_checkpoint, dtype):
    gpu = Translator(tiny_checkpoint, device="cuda", dtype=dtype)
    out = gpu.translate(TEXTS, "eng_Latn", "deu_Latn", gpu.default_options(max_length=40))
    assert all(isinstance(t, str) and t for t in out)
    assert gpu.generator.num_free_blocks() == gpu.generator.num_total_blocks()


def test_mixed_lora_adapters_on_the_gpu_equal_the_cpu(tiny_checkpoint, peft_adapters):
    """The LoRA kernel in CUDA graphs: every adapter and the base model in one batch, float32."""
    from engine.generator import Request

    folder, models = peft_adapters
    cpu = Translator(tiny_checkpoint, device="cpu", dtype="float32", adapters_dir=folder)
    gpu = Translator(tiny_checkpoint, device="cuda", dtype="float32", adapters_dir=folder)
    tok, options = cpu.tokenizer, cpu.default_options(num_beams=4, max_length=40)
    cases = [(text, name) for text in TEXTS for name in [None, *models]]

    def run(translator):
        return translator.generator.generate_beam_batch(
            [Request(tok.encode_source(text, "eng_Latn"), tok.decoder_prefix("fra_Latn"), options, adapter=name)
             for text, name in cases]
        )

    assert gpu.generator.graphs is not None
    assert run(gpu) == run(cpu)
