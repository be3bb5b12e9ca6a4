"""int8 weights on the CPU: close to float32, and the CPU's default."""


import pytest
import torch
from polling import wait_for

from dragoman.engine.device import DeviceError, resolve_dtype
from dragoman.engine.model import Linear
from dragoman.engine.generator import Generator, Request
from dragoman.engine.handle import TranslationRequest
from dragoman.engine import quantize
from dragoman.engine.quantize import Int8Linear, fbgemm_supported, int8_supported, onednn_supported, quantize_int8
from dragoman.engine.scheduler import DOCUMENT, TYPED
from dragoman.engine.translator import Translator

pytestmark = pytest.mark.skipif(not int8_supported(), reason="this torch has no int8 CPU kernels")


PRODUCTS = {"int_mm": lambda: True, "onednn": onednn_supported, "fbgemm": fbgemm_supported}


@pytest.mark.parametrize("product", PRODUCTS, ids=["torch._int_mm", "oneDNN prepacked", "fbgemm in pieces"])
@pytest.mark.parametrize("rows", [3, 35])  # row by row, and one product
def test_int8_linear_is_close_to_float32_and_the_same_floats_whatever_its_product(product, rows, monkeypatch):
    if not PRODUCTS[product]():
        pytest.skip(f"this torch has no {product} int8 linear")
    monkeypatch.setattr(quantize, "FBGEMM_PIECE_ROWS", 128)  # the weight's 300 rows in three pieces
    g = torch.Generator().manual_seed(0)
    linear = Linear(torch.randn(300, 64, generator=g) / 8, torch.randn(300, generator=g))
    x = torch.randn(rows, 7, 64, generator=g)
    exact = linear(x)
    int8 = Int8Linear.from_linear(linear, product)
    approx = int8(x)
    assert approx.shape == exact.shape
    assert (approx - exact).norm() / exact.norm() < 0.02  # int8 rounding of weights and activations
    assert torch.equal(int8(x, relu=True), approx.relu())
    # Every product sums the same integer products and scales them alike: the same floats, so that
    # weights packed while the engine runs (EngineLoop) change no translation.
    other = Int8Linear.from_linear(linear)  # torch._int_mm's
    assert torch.equal(other(x), approx)
    assert torch.equal(other(x, relu=True), int8(x, relu=True))
    unbiased = Linear(linear.weight, None)
    assert torch.equal(Int8Linear.from_linear(unbiased, product)(x), Int8Linear.from_linear(unbiased)(x))
    # A row's result never depends on its batch-mates (fbgemm scales a batch as one: see FbgemmProduct).
    loud = torch.cat([x[:1] * 1000, x[1:]])
    assert torch.equal(int8(loud)[1:], approx[1:])


@pytest.mark.parametrize("product", PRODUCTS, ids=["torch._int_mm", "oneDNN prepacked", "fbgemm in pieces"])
def test_the_sums_stay_exact_at_the_extremes_of_the_weights_range(product):
    """Without VNNI, x86 kernels add pairs of products in 16 bits, which two of 255 x 127 overflow:
    the weights' range (`weight_levels`) keeps every pair within them on this CPU."""
    if not PRODUCTS[product]():
        pytest.skip(f"this torch has no {product} int8 linear")
    levels = quantize.weight_levels()
    g = torch.Generator().manual_seed(0)
    signs = torch.randint(0, 2, (2, 96, 512), generator=g) * 2 - 1
    weight = (signs[0] * levels).to(torch.int8)  # (96, 512): every weight at the range's ends
    rows = torch.cat([torch.full((2, 512), 127.0), torch.full((2, 512), -127.0), signs[1, :4] * 127.0])  # (8, 512)
    exact = rows @ weight.float().t()  # |sums| <= 512 * 127 * 127: exact in float32
    linear = Int8Linear(weight, torch.ones(96), None)
    if product == "onednn":
        linear.pack_onednn()
    elif product == "fbgemm":
        linear.packed_for_fbgemm()
    assert torch.equal(linear.product(rows), exact)


def test_int8_weights_stored_for_another_range_are_quantised_again(make_translator, tmp_path, monkeypatch):
    """The stored weights' range is the CPU's (`weight_levels`): a cache folder shared with, or
    carried over from, a CPU of the other kind is quantised again, not misread."""
    texts = ["The quick brown fox jumps over the lazy dog."]
    options = dict(num_beams=2, max_length=20)
    other = 190 - quantize.weight_levels()  # 63 <-> 127
    monkeypatch.setattr(quantize, "weight_levels", lambda: other)
    make_translator(dtype="int8", weights_cache=tmp_path)
    monkeypatch.undo()
    (stored,) = tmp_path.glob("*.int8.safetensors")
    written = stored.stat().st_mtime_ns
    ours = make_translator(dtype="int8", weights_cache=tmp_path)
    assert stored.stat().st_mtime_ns != written  # quantised again and replaced
    fresh = make_translator(dtype="int8")
    assert (ours.translate(texts, "eng_Latn", "fra_Latn", ours.default_options(**options))
            == fresh.translate(texts, "eng_Latn", "fra_Latn", fresh.default_options(**options)))


@pytest.mark.parametrize("fbgemm", [False, True], ids=["oneDNN", "fbgemm"])
def test_a_model_translates_before_its_weights_are_packed_as_after(tiny_checkpoint, fbgemm, monkeypatch):
    """A start translates at once, the weights packed for a faster product later, a piece at a time
    (EngineLoop): the same tokens and scores, whatever was packed when. Where fbgemm serves the
    CPU, oneDNN's product serves from the start and fbgemm's is packed later."""
    if not (fbgemm_supported() if fbgemm else onednn_supported()):
        pytest.skip("this torch lacks that int8 linear")
    monkeypatch.setattr(quantize, "fbgemm_serves", lambda: fbgemm)
    monkeypatch.setattr(quantize, "FBGEMM_PIECE_ROWS", 256)  # the tiny model's output layer in pieces
    translator = Translator(tiny_checkpoint, device="cpu", dtype="float32")
    model = translator.generator.model
    packing = quantize_int8(model, pack_now=False)
    int8s = [model.lm_head, model.cross_kv]
    assert packing and all(type(int8.product).__name__ == ("OneDnnProduct" if fbgemm else "IntMMProduct")
                           for int8 in int8s)
    texts = ["The quick brown fox jumps over the lazy dog.", "我们明天去北京。"]
    options = translator.default_options(num_beams=2, max_length=20)
    runs = []
    done = 0
    for packed in (0, len(packing) // 2, len(packing) - 1, len(packing)):
        for piece in packing[done:packed]:
            piece()
        done = packed
        requests = [Request(translator.tokenizer.encode_source(text, "eng_Latn"),
                            translator.tokenizer.decoder_prefix("fra_Latn"), options, alternatives=1) for text in texts]
        runs.append([r.hypotheses for r in Generator.build(model).run(requests)])  # tokens and scores
    assert runs[0] == runs[1] == runs[2] == runs[3]
    assert all(type(int8.product).__name__ == ("FbgemmProduct" if fbgemm else "OneDnnProduct") for int8 in int8s)
    translator.teardown()


def test_the_engine_packs_when_idle_or_deep_into_a_long_run_but_not_while_text_is_typed(make_translator, monkeypatch):
    from dragoman.engine import translator as translator_module

    monkeypatch.setattr(translator_module, "IDLE_WORK_AFTER_STEPS", 3)
    for typed in (True, False):
        translator = make_translator()
        generator, loop = translator.generator, translator.loop
        packs = []
        with loop._wake:  # held: the loop can take none of the pieces before the run starts
            generator.idle_work.extend(lambda: packs.append(bool(generator.scheduler.running)) for _ in range(40))
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


def test_a_weight_is_quantised_a_block_of_rows_at_a_time_as_it_would_be_whole(monkeypatch):
    monkeypatch.setattr(quantize, "QUANTIZE_ROWS", 3)  # three blocks and a partial one
    weight = torch.randn(10, 16)
    weight[4] = 0  # its scale is the floor
    found, scale = quantize.quantize_weight(weight, levels=63)
    whole = weight.abs().amax(dim=1).clamp(min=1e-12) / 63  # (out,)
    assert torch.equal(scale, whole)
    assert torch.equal(found, torch.round(weight / whole[:, None]).to(torch.int8))
