"""Checkpoint loading: every published weight layout gives the same model; broken ones say what is wrong."""

import json
import math
import pickle
import re
import shutil
import threading

import pytest
import torch
from safetensors.torch import load_file, save_file

from dragoman.engine.config import CheckpointError, load_config, load_generation_defaults
from dragoman.engine.translator import Translator
from dragoman.engine.weights import load_weights

CPU = torch.device("cpu")


@pytest.fixture()
def checkpoint(tiny_checkpoint, tmp_path):
    """A private copy of the tiny checkpoint that a test may damage."""
    return shutil.copytree(tiny_checkpoint, tmp_path / "model")


def load(path):
    return load_weights(path, load_config(path), torch.float32, CPU)


@pytest.mark.parametrize("layout", ["bin", "sharded"])
def test_every_weight_layout_loads_the_same_tensors(tiny_checkpoint, request, layout):
    reference = load(tiny_checkpoint)
    other = load(request.getfixturevalue(f"{layout}_checkpoint"))
    assert reference.keys() == other.keys()
    for name in reference:
        torch.testing.assert_close(other[name], reference[name], rtol=0, atol=0, msg=name)


def test_embeddings_are_tied(tiny_checkpoint):
    weights = load(tiny_checkpoint)
    assert weights["lm_head.weight"] is weights["embed_tokens.weight"]


def test_generation_defaults_come_from_the_checkpoint(checkpoint):
    assert load_generation_defaults(checkpoint).max_length == 200
    (checkpoint / "generation_config.json").write_text(json.dumps({"max_length": 77, "num_beams": 3}))
    translator_defaults = load_generation_defaults(checkpoint)
    assert (translator_defaults.max_length, translator_defaults.num_beams) == (77, 3)


def test_missing_tensor_is_named(checkpoint):
    tensors = load_file(checkpoint / "model.safetensors")
    del tensors["model.decoder.layers.1.fc2.weight"]
    save_file(tensors, checkpoint / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match=r"decoder\.layers\.1\.fc2\.weight"):
        load(checkpoint)


def test_misshapen_tensor_is_named(checkpoint):
    tensors = load_file(checkpoint / "model.safetensors")
    tensors["model.encoder.layers.0.fc1.weight"] = tensors["model.encoder.layers.0.fc1.weight"][:-1].clone()
    save_file(tensors, checkpoint / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match=r"encoder\.layers\.0\.fc1\.weight.*shape"):
        load(checkpoint)


def test_config_for_another_size_is_refused(checkpoint):
    config = json.loads((checkpoint / "config.json").read_text())
    config["encoder_ffn_dim"] *= 2
    (checkpoint / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"fc1\.(weight|bias).*expected"):
        load(checkpoint)


def test_truncated_safetensors_is_refused(checkpoint):
    path = checkpoint / "model.safetensors"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="model.safetensors.*truncated"):
        load(checkpoint)


class Exploit:
    """Unpickling this would run code; weights_only loading must refuse it."""

    def __reduce__(self):
        return (print, ("pwned",))


@pytest.mark.parametrize("damage, problem", [
    (lambda data: data[: len(data) // 2], "the file is truncated"),
    (lambda data: data[:-1], "the file is truncated"),
    (lambda data: b"", "the file is empty"),
    (lambda data: b"\x00garbage" * 100, "not a PyTorch checkpoint"),
])
def test_a_damaged_bin_is_one_line_naming_the_file(bin_checkpoint, tmp_path, damage, problem):
    folder = tmp_path / "damaged"
    shutil.copytree(bin_checkpoint, folder)
    weights = folder / "pytorch_model.bin"
    weights.write_bytes(damage(weights.read_bytes()))
    with pytest.raises(CheckpointError) as error:
        load(folder)
    assert str(error.value).startswith(f"{weights}: {problem}") and "\n" not in str(error.value)
    assert "miniz" not in str(error.value)  # PyTorch's own explanation is not passed on


def test_pickle_with_code_is_refused_without_running_it(checkpoint, capsys):
    (checkpoint / "model.safetensors").unlink()
    with open(checkpoint / "pytorch_model.bin", "wb") as f:
        pickle.dump({"model.shared.weight": Exploit()}, f)
    with pytest.raises(CheckpointError, match="pytorch_model.bin"):
        load(checkpoint)
    assert "pwned" not in capsys.readouterr().out


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda d: (d / "config.json").unlink(), "is missing config.json"),
        (lambda d: (d / "config.json").write_text("{not json"), "config.json: not readable JSON"),
        (lambda d: (d / "config.json").write_text('{"model_type": "bert"}'), "model_type is 'bert'"),
        (lambda d: (d / "model.safetensors").unlink(), r"weights \(model.safetensors or pytorch_model.bin\)"),
        (lambda d: (d / "sentencepiece.bpe.model").unlink(), "sentencepiece.bpe.model"),
    ],
)
def test_broken_folders_are_refused_with_the_reason(checkpoint, damage, message):
    damage(checkpoint)
    with pytest.raises(Exception, match=message):
        Translator(checkpoint, device="cpu")


def test_shard_index_cannot_point_outside_the_folder(sharded_checkpoint, tmp_path):
    model = shutil.copytree(sharded_checkpoint, tmp_path / "sharded")
    index = json.loads((model / "model.safetensors.index.json").read_text())
    first = next(iter(index["weight_map"]))
    index["weight_map"][first] = "../elsewhere.safetensors"
    (model / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match="outside the model folder"):
        load(model)


def rewrite_json(path, **changes):
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize(
    "changes, key",
    [
        ({"encoder_attention_heads": 0}, "encoder_attention_heads"),  # was "integer modulo by zero"
        ({"decoder_attention_heads": -4}, "decoder_attention_heads"),
        ({"d_model": 30}, "d_model 30 is not divisible by encoder_attention_heads"),
        ({"encoder_layers": -1}, "encoder_layers"),
        ({"decoder_layers": 10**9}, "decoder_layers"),  # would list 10**10 tensor names
        ({"encoder_ffn_dim": 0}, "encoder_ffn_dim"),
        ({"vocab_size": -5}, "vocab_size"),
        ({"max_position_embeddings": 10**9}, "max_position_embeddings"),  # its tables are computed, not stored
        ({"vocab_size": "1206"}, "vocab_size"),
        ({"d_model": True}, "d_model"),
        ({"decoder_ffn_dim": None}, "decoder_ffn_dim"),
        ({"encoder_layers": [2]}, "encoder_layers"),
        ({"d_model": 32.5}, "d_model"),
        ({"scale_embedding": "false"}, "scale_embedding"),  # a string, which bool() would call true
        ({"pad_token_id": 10**6}, "pad_token_id"),
    ],
)
def test_bad_config_values_are_named_in_one_line(checkpoint, changes, key):
    rewrite_json(checkpoint / "config.json", **changes)
    with pytest.raises(CheckpointError) as error:
        Translator(checkpoint, device="cpu")
    message = str(error.value)
    assert message.startswith(f"{checkpoint / 'config.json'}: {key}")
    assert "\n" not in message


@pytest.mark.parametrize(
    "changes, key",
    [
        ({"max_length": 10**9}, "max_length"),  # would size the position tables
        ({"max_length": 1}, "max_length"),
        ({"max_length": "200"}, "max_length"),
        ({"max_length": True}, "max_length"),
        ({"num_beams": 0}, "num_beams"),
        ({"num_beams": [4]}, "num_beams"),
        ({"length_penalty": math.nan}, "length_penalty"),
        ({"repetition_penalty": math.inf}, "repetition_penalty"),
        ({"no_repeat_ngram_size": -1}, "no_repeat_ngram_size"),
        ({"min_length": 2.5}, "min_length"),
        ({"early_stopping": "sometimes"}, "early_stopping"),
        ({"forced_eos_token_id": 10**6}, "forced_eos_token_id"),
    ],
)
def test_bad_generation_values_are_named_in_one_line(checkpoint, changes, key):
    rewrite_json(checkpoint / "generation_config.json", **changes)  # json writes NaN and Infinity as Python reads them
    with pytest.raises(CheckpointError) as error:
        Translator(checkpoint, device="cpu")
    assert str(error.value).startswith(f"{checkpoint / 'generation_config.json'}: {key} ")


def test_null_generation_values_are_unset_as_in_transformers(checkpoint):
    rewrite_json(checkpoint / "generation_config.json", max_length=None, num_beams=None, forced_eos_token_id=None)
    defaults = load_generation_defaults(checkpoint)
    assert (defaults.max_length, defaults.num_beams, defaults.forced_eos_id) == (200, None, None)


def test_a_vocabulary_larger_than_the_weights_is_refused_from_the_headers(checkpoint):
    # 10 million rows of 32 floats (1.3 GB) are compared with the stored shape, never allocated.
    rewrite_json(checkpoint / "config.json", vocab_size=10_000_000)
    with pytest.raises(CheckpointError, match=r"model\.safetensors: tensor 'model\.shared\.weight' has shape \(1206, 32\), "
                                              r"expected \(10000000, 32\)"):
        Translator(checkpoint, device="cpu")


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_weights_that_are_not_finite_are_named(checkpoint, value):
    tensors = load_file(checkpoint / "model.safetensors")
    tensors["model.decoder.layers.1.fc2.weight"][3, 5] = value
    save_file(tensors, checkpoint / "model.safetensors", metadata={"format": "pt"})
    before = set(threading.enumerate())
    with pytest.raises(CheckpointError, match=r"model\.safetensors: tensor 'model\.decoder\.layers\.1\.fc2\.weight' "
                                              r"holds NaN or infinite values$"):
        Translator(checkpoint, device="cpu", dtype="float32")
    assert set(threading.enumerate()) <= before  # the engine's thread, which read them, has ended


def test_weights_too_large_for_the_engine_dtype_are_named(checkpoint):
    tensors = load_file(checkpoint / "model.safetensors")
    tensors["model.encoder.layers.0.fc1.bias"][0] = 1e6  # float16 ends at 65504
    save_file(tensors, checkpoint / "model.safetensors", metadata={"format": "pt"})
    load_weights(checkpoint, load_config(checkpoint), torch.float32, CPU)  # fine in float32
    with pytest.raises(CheckpointError, match=r"'model\.encoder\.layers\.0\.fc1\.bias' holds NaN or infinite values "
                                              r"\(or values beyond the range of torch\.float16\)"):
        load_weights(checkpoint, load_config(checkpoint), torch.float16, CPU)


def test_weights_of_an_integer_dtype_are_refused(checkpoint):
    tensors = load_file(checkpoint / "model.safetensors")
    tensors["model.encoder.layer_norm.weight"] = tensors["model.encoder.layer_norm.weight"].to(torch.int32)
    save_file(tensors, checkpoint / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match=r"tensor 'model\.encoder\.layer_norm\.weight' has dtype I32"):
        load(checkpoint)


@pytest.mark.parametrize("content", [b"", b"\x00garbage" * 100, "truncated"])
def test_a_corrupt_tokenizer_is_named(checkpoint, content):
    path = checkpoint / "sentencepiece.bpe.model"
    path.write_bytes(path.read_bytes()[:5000] if content == "truncated" else content)
    with pytest.raises(CheckpointError, match=rf"^{re.escape(str(path))}: not a readable sentencepiece model"):
        Translator(checkpoint, device="cpu")


@pytest.mark.parametrize("content", ["[" * 100_000, " " * (5 << 20)])
def test_a_config_nested_too_deeply_or_too_large_is_refused(checkpoint, content):
    (checkpoint / "config.json").write_text(content)
    with pytest.raises(CheckpointError, match=r"config\.json: not readable JSON \((nested too deeply|larger than 4 MiB)"):
        Translator(checkpoint, device="cpu")


def test_a_vocabulary_smaller_than_the_tokenizer_is_refused(checkpoint):
    rewrite_json(checkpoint / "config.json", vocab_size=1000)
    with pytest.raises(CheckpointError, match=r"config\.json: vocab_size is 1000 but the tokenizer has 1204 tokens"):
        Translator(checkpoint, device="cpu")
