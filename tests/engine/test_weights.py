"""Checkpoint loading: every published weight layout gives the same model; broken ones say what is wrong."""

import json
import pickle
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from engine.config import CheckpointError, load_config, load_generation_defaults
from engine.translator import Translator
from engine.weights import load_weights
from nllb_checkpoint import build_checkpoint

CPU = torch.device("cpu")


@pytest.fixture()
def checkpoint(tiny_checkpoint, tmp_path):
    """A private copy of the tiny checkpoint that a test may damage."""
    return shutil.copytree(tiny_checkpoint, tmp_path / "model")


def load(path):
    return load_weights(path, load_config(path), torch.float32, CPU)


@pytest.mark.parametrize("layout", ["bin", "sharded"])
def test_every_weight_layout_loads_the_same_tensors(tiny_checkpoint, tmp_path, layout):
    reference = load(tiny_checkpoint)
    other = load(build_checkpoint(tmp_path / layout, weights=layout))
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
        (lambda d: (d / "config.json").unlink(), "has no config.json"),
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


def test_shard_index_cannot_point_outside_the_folder(tiny_checkpoint, tmp_path):
    model = build_checkpoint(tmp_path / "sharded", weights="sharded")
    index = json.loads((model / "model.safetensors.index.json").read_text())
    first = next(iter(index["weight_map"]))
    index["weight_map"][first] = "../elsewhere.safetensors"
    (model / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match="outside the model folder"):
        load(model)
