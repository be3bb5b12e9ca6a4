import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from dragoman.engine.model import FOLD_SLOTS, FUSED_MAX_ROWS, FoldedSources
from dragoman.engine.translator import ModelOutputError, Translator


def test_the_warm_up_translates_a_sentence_of_each_kind_alone_and_keeps_nothing(make_translator, monkeypatch):
    """One sentence at a time, as typed text runs (a lone sentence's graphs): a short one, one of
    more tokens than fused_linear takes rows (the encoder's projections go through cuBLAS's set-up
    too), and one folded at each S of FoldedSources (each S has graphs of its own)."""
    translator = make_translator()
    generator = translator.generator
    runs, run = [], generator.run

    def recording(requests, feed, *rest):  # the requests each of the engine loop's runs was fed
        fed = []
        runs.append(fed)
        return run(requests, lambda idle: (more := feed(idle)) and fed.extend(more) or more, *rest)

    monkeypatch.setattr(generator, "run", recording)
    translator.warm_up(num_beams=4, max_length=20)
    assert all(len(requests) == 1 for requests in runs)
    lengths = sorted(len(requests[0].src_ids) for requests in runs)
    assert lengths[0] <= FOLD_SLOTS[0] and lengths[-1] > FUSED_MAX_ROWS
    assert sorted({FoldedSources.slots_for(n) for n in lengths} - {0}) == list(FOLD_SLOTS)  # 0: not folded
    assert all(r.result and r.options.num_beams == 4 and r.options.max_length == 20 for [r] in runs)
    assert generator.num_free_blocks() == generator.num_total_blocks()
    assert generator.rows.num_free_rows() == generator.rows.capacity


def test_when_the_gpu_kernels_fail_translation_goes_on_with_the_same_tokens(make_translator, monkeypatch, caplog):
    """Every kernel call taken as on a GPU, and the first Triton launch failing as without a C
    compiler: the references carry on, the tokens are float32's, and it is said once."""
    import triton.runtime.interpreter
    import triton.runtime.jit

    from dragoman.kernels import dispatch

    translator = make_translator()
    texts = ["The quick brown fox jumps over the lazy dog.", "Ein kurzer Satz"]
    options = translator.default_options(num_beams=4, max_length=30)
    expected = translator.translate(texts, "eng_Latn", "fra_Latn", options)
    assert translator.kernels_unavailable() is None

    tried = []

    def fail(self, *args, **kwargs):
        tried.append(self)
        raise RuntimeError("Failed to find C compiler. Please specify via CC environment variable.")

    monkeypatch.setattr(dispatch, "_on_gpu", lambda tensor: True)
    monkeypatch.setattr(dispatch, "_unavailable", None)
    for kind in (triton.runtime.jit.JITFunction, triton.runtime.interpreter.InterpretedFunction):
        monkeypatch.setattr(kind, "run", fail)
    with caplog.at_level("WARNING", logger="dragoman.kernels"):
        assert translator.translate(texts, "eng_Latn", "fra_Latn", options) == expected
        assert translator.translate(texts[:1], "eng_Latn", "fra_Latn", options) == expected[:1]
    assert len(tried) == 1
    message = translator.kernels_unavailable()
    assert message.startswith("GPU kernels unavailable: RuntimeError: Failed to find C compiler")
    assert message.endswith("; using the slower PyTorch path")
    assert [r.getMessage() for r in caplog.records] == [message]


NAN_OPTIONS = [dict(num_beams=1), dict(num_beams=4), dict(num_beams=4, repetition_penalty=1.3)]


@pytest.mark.parametrize("overrides", NAN_OPTIONS, ids=["greedy", "beam", "beam-processors"])
@pytest.mark.parametrize("from_step", [0, 3])
def test_a_model_whose_output_turns_nan_fails_the_sentence_in_one_line(make_translator, monkeypatch, overrides,
                                                                       from_step):
    """The decoder's logits NaN from a step on, as a forward pass that overflows gives them: the
    search ends the sentence instead of failing on a shape deep inside, the translator names it,
    and the engine is left whole: every row and block given back, the next translation as before."""
    translator = make_translator()
    model, generator = translator.generator.model, translator.generator
    texts = ["The quick brown fox jumps over the lazy dog.", "Ein kurzer Satz"]
    options = translator.default_options(max_length=30, min_length=8, **overrides)  # no `</s>` before the NaN
    expected = translator.translate(texts, "eng_Latn", "fra_Latn", options)
    head, steps = model.lm_head, []

    def overflowing_head(h):
        steps.append(h.shape[0])
        logits = head(h)
        return logits * float("nan") if len(steps) > from_step else logits

    monkeypatch.setattr(model, "lm_head", overflowing_head)
    with pytest.raises(ModelOutputError) as failure:
        translator.translate(texts, "eng_Latn", "fra_Latn", options)
    message = str(failure.value)
    assert "\n" not in message and message.startswith("the model's output was not a number (NaN) for the sentence")
    assert '"The quick brown fox jumps over the lazy…"' in message or '"Ein kurzer Satz"' in message
    assert message.endswith("the weights are broken or the precision (float32) overflows")
    assert generator.num_free_blocks() == generator.num_total_blocks()
    assert generator.rows.num_free_rows() == generator.rows.capacity
    monkeypatch.setattr(model, "lm_head", head)
    assert translator.translate(texts, "eng_Latn", "fra_Latn", options) == expected


def test_weights_that_overflow_fail_the_sentence_in_one_line(tiny_checkpoint, tmp_path):
    """A finite weight so large that the decoder's activations overflow to inf, and its layer norm
    to NaN: the checkpoint loads, and the translation fails in one line instead of deep inside."""
    folder = shutil.copytree(tiny_checkpoint, tmp_path / "model")
    weights = load_file(folder / "model.safetensors")
    name = "model.decoder.layers.0.fc2.weight"
    weights[name] = torch.full_like(weights[name], 3e38)  # float32's largest is 3.4e38
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    translator = Translator(folder, device="cpu", dtype="float32")
    for num_beams in (1, 4):
        with pytest.raises(ModelOutputError, match=r"^the model's output was not a number \(NaN\) for the sentence "):
            translator.translate(["A short sentence."], "eng_Latn", "fra_Latn",
                                 translator.default_options(num_beams=num_beams, max_length=20))


def test_a_source_as_long_as_the_model_reads_fills_whole_blocks_of_source_slots(translator):
    """A source of max_positions tokens takes whole blocks of the cross cache (200 tokens, 13 blocks
    of 16: 208 slots); a row's source slots must hold them all (they were max_positions wide)."""
    model, tokenizer = translator.generator.model, translator.tokenizer
    block = translator.generator.runner.cross_cache.block_size
    assert model.max_positions % block  # else the test proves nothing
    words = ["house", "report", "window", "system", "engine", "cat", "alpha"]
    text = ""
    while len(tokenizer.encode_source(f"{text} {words[len(text) % 7]}.", "eng_Latn")) <= model.max_positions:
        text = f"{text} {words[len(text) % 7]}".strip()
    assert model.max_positions - block < len(tokenizer.encode_source(f"{text}.", "eng_Latn")) <= model.max_positions
    [alone] = translator.translate([f"{text}."], "eng_Latn", "fra_Latn", translator.default_options(max_length=8))
    assert alone
