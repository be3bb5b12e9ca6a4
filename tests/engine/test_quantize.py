"""int8 weights on the CPU: close to float32, and the CPU's default."""


import pytest
import torch
from polling import wait_for

from dragoman.engine.device import DeviceError, resolve_dtype
from dragoman.engine.model import Linear
from dragoman.engine.generator import Generator, Request
from dragoman.engine.handle import TranslationRequest
from dragoman.engine.quantize import Int8Linear, int8_supported, onednn_supported, quantize_int8
from dragoman.engine.scheduler import DOCUMENT, TYPED
from dragoman.engine.translator import Translator

pytestmark = pytest.mark.skipif(not int8_supported(), reason="this torch has no int8 CPU kernels")


@pytest.mark.parametrize("onednn", [True, False], ids=["oneDNN prepacked", "torch._int_mm"])
@pytest.mark.parametrize("rows", [3, 35])  # row by row, and one product
def test_int8_linear_is_close_to_float32(onednn, rows):
    if onednn and not onednn_supported():
        pytest.skip("this torch has no oneDNN int8 linear")
    g = torch.Generator().manual_seed(0)
    linear = Linear(torch.randn(300, 64, generator=g) / 8, torch.randn(300, generator=g))
    x = torch.randn(rows, 7, 64, generator=g)
    exact = linear(x)
    int8 = Int8Linear.from_linear(linear, onednn)
    approx = int8(x)
    assert approx.shape == exact.shape
    assert (approx - exact).norm() / exact.norm() < 0.02  # int8 rounding of weights and activations
    assert torch.equal(int8(x, relu=True), approx.relu())
    # Both paths sum the same integer products and scale them alike: the same floats, so that
    # weights packed while the engine runs (EngineLoop) change no translation.
    other = Int8Linear.from_linear(linear, not onednn) if onednn_supported() else int8
    assert torch.equal(other(x), approx)
    assert torch.equal(other(x, relu=True), int8(x, relu=True))
    unbiased = Linear(linear.weight, None)
    assert torch.equal(Int8Linear.from_linear(unbiased, onednn)(x), Int8Linear.from_linear(unbiased, not onednn)(x))


@pytest.mark.skipif(not onednn_supported(), reason="this torch has no oneDNN int8 linear")
def test_a_model_translates_before_its_weights_are_packed_as_after(tiny_checkpoint):
    """A start translates on torch._int_mm at once, the weights packed for oneDNN later
    (EngineLoop): the same tokens and scores, whatever was packed when."""
    translator = Translator(tiny_checkpoint, device="cpu", dtype="float32")
    model = translator.generator.model
    unpacked = quantize_int8(model, pack_now=False)
    assert unpacked and all(int8.zeros is None for int8 in unpacked)
    assert [int8.weight.numel() for int8 in unpacked] == sorted(int8.weight.numel() for int8 in unpacked)
    texts = ["The quick brown fox jumps over the lazy dog.", "我们明天去北京。"]
    options = translator.default_options(num_beams=2, max_length=20)
    runs = []
    for packed in (0, len(unpacked) // 2, len(unpacked)):
        for int8 in unpacked[:packed]:
            int8.pack()
        requests = [Request(translator.tokenizer.encode_source(text, "eng_Latn"),
                            translator.tokenizer.decoder_prefix("fra_Latn"), options, alternatives=1) for text in texts]
        runs.append([r.hypotheses for r in Generator.build(model).run(requests)])  # tokens and scores
    assert runs[0] == runs[1] == runs[2]
    translator.teardown()


def test_the_engine_packs_when_idle_or_deep_into_a_long_run_but_not_while_text_is_typed(make_translator, monkeypatch):
    from dragoman.engine import translator as translator_module

    monkeypatch.setattr(translator_module, "PACK_AFTER_STEPS", 3)
    for typed in (True, False):
        translator = make_translator()
        generator, loop = translator.generator, translator.loop
        packs = []
        with loop._wake:  # held: the loop can take none of the pieces before the run starts
            generator.packing.extend(lambda: packs.append(bool(generator.scheduler.running)) for _ in range(40))
            handle = translator.submit(TranslationRequest(
                ["The quick brown fox jumps over the lazy dog."] * 3, "eng_Latn", "fra_Latn",
                translator.default_options(num_beams=2, min_new_tokens=20, max_new_tokens=20),
                priority=TYPED if typed else DOCUMENT))
        handle.result()
        assert wait_for(lambda: len(packs) == 40)  # the rest once idle
        during = sum(packs)
        assert during == 0 if typed else 0 < during < 40  # a piece a step from the fourth on


def test_cpu_default_is_int8_and_translates_like_float32_mostly(make_translator, translator):
    texts = ["The quick brown fox jumps over the lazy dog.", "Привет, как дела?", "我们明天去北京。", "Ein kurzer Satz"]
    int8 = make_translator(dtype="auto")
    exact = translator
    assert "int8" in int8.describe() and "float32" in exact.describe()
    options = dict(num_beams=1, max_length=20)
    ours = int8.translate(texts, "eng_Latn", "fra_Latn", int8.default_options(**options))
    reference = exact.translate(texts, "eng_Latn", "fra_Latn", exact.default_options(**options))
    assert all(ours)
    # The first few tokens agree: int8 perturbs scores, it does not scramble them.
    first_words = [a.split()[:1] == b.split()[:1] for a, b in zip(ours, reference)]
    assert sum(first_words) >= len(texts) - 1


def test_int8_is_refused_on_a_gpu_device():
    with pytest.raises(DeviceError, match="int8"):
        resolve_dtype("int8", torch.device("cuda"))


def test_int8_result_does_not_depend_on_the_batch(make_translator):
    """Activations are quantised per row: what else is decoding must not change a sentence."""
    translator = make_translator(dtype="int8")
    options = translator.default_options(num_beams=4, max_length=30)
    alone = translator.translate(["Ein kurzer Satz"], "deu_Latn", "eng_Latn", options)
    crowd = ["The quick brown fox jumps over the lazy dog.", "Ein kurzer Satz", "我们明天去北京。"]
    assert translator.translate(crowd, "deu_Latn", "eng_Latn", options)[1] == alone[0]


def test_int8_weights_are_stored_once_and_read_back_the_same(make_translator, tmp_path, monkeypatch):
    """A later start reads the int8 weights instead of quantising again, and not the checkpoint's
    projections they stand for, and translates the same; a damaged store is quantised again from
    the checkpoint and replaced."""
    from dragoman.engine import quantize, weights

    read: list[str] = []
    read_tensors = weights._read_tensors
    monkeypatch.setattr(weights, "_read_tensors", lambda path, names, device: read.extend(map(weights._canonical, names)) or read_tensors(path, names, device))
    texts = ["The quick brown fox jumps over the lazy dog.", "我们明天去北京。"]
    first = make_translator(dtype="int8", weights_cache=tmp_path)
    projections = quantize.projection_weights(first.config)
    assert projections and projections <= set(read)
    (stored,) = tmp_path.glob("*.int8.safetensors")
    assert [p.name for p in tmp_path.iterdir()] == [stored.name]  # no temporary left
    monkeypatch.setattr(quantize, "quantize_weight", lambda w: pytest.fail("quantised again"))
    read.clear()
    second = make_translator(dtype="int8", weights_cache=tmp_path)
    assert read and not projections.intersection(read)
    options = dict(num_beams=2, max_length=20)
    assert (second.translate(texts, "eng_Latn", "fra_Latn", second.default_options(**options))
            == first.translate(texts, "eng_Latn", "fra_Latn", first.default_options(**options)))
    monkeypatch.undo()
    stored.write_bytes(stored.read_bytes()[:1000])  # damaged: read as missing, written anew
    third = make_translator(dtype="int8", weights_cache=tmp_path)
    assert stored.stat().st_size > 1000
    assert (third.translate(texts, "eng_Latn", "fra_Latn", third.default_options(**options))
            == first.translate(texts, "eng_Latn", "fra_Latn", first.default_options(**options)))
