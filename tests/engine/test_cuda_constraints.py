"""Constrained decoding on a CUDA GPU (skipped where there is none): with CUDA graphs and the
pipelined steps, sentences with terms and plain ones in one batch give the CPU's float32 tokens,
and in half precision every term still appears."""

import pytest
import torch

from dragoman import kernels

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

TEXTS = ["The quick brown fox jumps over the lazy dog.", "Привет, как дела?", "Ein kurzer Satz",
         "Bonjour, comment allez-vous aujourd'hui ?", "The lazy dog sleeps."]
TERMS = [["chat"], [], ["chat", "bonjour le monde", "rouge"], None, ["le chat", "chat noir"]]


@pytest.fixture(autouse=True)
def kernels_ran():
    yield
    assert kernels.unavailable_message() is None


@pytest.mark.parametrize("num_beams", [4, 1])
def test_constrained_and_plain_sentences_with_cuda_graphs_equal_the_cpu(make_translator, translator, num_beams):
    gpu = make_translator(device="cuda", dtype="float32")
    assert gpu.generator.runner.graphs is not None and gpu.generator.pipelined
    options = dict(num_beams=num_beams, max_length=40)
    expected = translator.translate(TEXTS, "eng_Latn", "fra_Latn", translator.default_options(**options), terms=TERMS)
    ours = gpu.translate(TEXTS, "eng_Latn", "fra_Latn", gpu.default_options(**options), terms=TERMS)
    assert ours == expected
    plain = translator.translate(TEXTS, "eng_Latn", "fra_Latn", translator.default_options(**options))
    for translation, without, terms in zip(ours, plain, TERMS):
        assert all(t in translation for t in terms or []) and (terms or translation == without)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_in_half_precision_every_term_appears(make_translator, dtype):
    gpu = make_translator(device="cuda", dtype=dtype)
    options = gpu.default_options(num_beams=4, max_length=40)
    for translation, terms in zip(gpu.translate(TEXTS, "eng_Latn", "fra_Latn", options, terms=TERMS), TERMS):
        assert all(t in translation for t in terms or [])
    # a typed sentence alone (whose plain steps fold its source), with a glossary of two terms
    [typed] = gpu.translate(TEXTS[:1], "eng_Latn", "fra_Latn", options, priority=0, terms=[["chat", "rouge"]])
    assert "chat" in typed and "rouge" in typed
