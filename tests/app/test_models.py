"""Installed models: import (with .bin conversion), refusals that say what is missing, download."""

import json
import shutil

import pytest
import torch
from safetensors import safe_open

from dragoman.app import models
from dragoman.app.models import Cancelled, CheckpointError, OfflineError
from dragoman.engine.translator import Translator
from fake_hub import FakeHub

TEXTS = ["Hello world, the cat reads a book.", "The small dog sees the river."]


def translate(model_dir):
    t = Translator(model_dir, device="cpu")
    return t.translate(TEXTS, "eng_Latn", "fra_Latn", t.default_options(num_beams=2, max_length=24))


def test_import_copies_a_safetensors_checkpoint(paths, tiny_checkpoint):
    reports = []
    model = models.import_model(tiny_checkpoint, paths.models_dir, lambda *r: reports.append(r))
    assert model.path == paths.models_dir / tiny_checkpoint.name
    assert (model.path / "model.safetensors").read_bytes() == (tiny_checkpoint / "model.safetensors").read_bytes()
    assert reports[-1][0] == reports[-1][1] > 0
    assert models.list_models(paths.models_dir) == [model]
    assert translate(model.path) == translate(tiny_checkpoint)


def test_import_converts_bin_to_safetensors_once(paths, bin_checkpoint):
    model = models.import_model(bin_checkpoint, paths.models_dir)
    files = sorted(p.name for p in model.path.iterdir())
    assert "pytorch_model.bin" not in files and "model.safetensors" in files
    original = torch.load(bin_checkpoint / "pytorch_model.bin", weights_only=True)
    with safe_open(str(model.path / "model.safetensors"), framework="pt") as f:
        names = set(f.keys())
        for name in names:
            assert torch.equal(f.get_tensor(name), original[name])
    # the tied embedding is stored once, under one of its names
    tied = {"model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight"}
    assert len(names & tied) == 1 and names | tied == set(original) | tied
    assert translate(model.path) == translate(bin_checkpoint)


def test_import_keeps_shards_and_their_index(paths, sharded_checkpoint):
    model = models.import_model(sharded_checkpoint, paths.models_dir)
    index = json.loads((model.path / "model.safetensors.index.json").read_text())
    assert sorted(set(index["weight_map"].values())) == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    assert translate(model.path) == translate(sharded_checkpoint)


def test_a_second_import_gets_its_own_name(paths, tiny_checkpoint):
    first = models.import_model(tiny_checkpoint, paths.models_dir)
    second = models.import_model(tiny_checkpoint, paths.models_dir)
    assert second.name == first.name + "-2"
    models.remove_model(first, paths.models_dir)
    assert models.list_models(paths.models_dir) == [second]


def test_hugging_face_cache_snapshots_are_named_after_the_repository(tmp_path):
    snapshot = tmp_path / "models--facebook--nllb-200-distilled-600M" / "snapshots" / "f8d333a0"
    snapshot.mkdir(parents=True)
    assert models.model_name_for(snapshot) == "nllb-200-distilled-600M"


@pytest.mark.parametrize(
    "remove, message",
    [
        (["config.json"], "is missing config.json."),
        (["model.safetensors"], "is missing the weights (model.safetensors or pytorch_model.bin)."),
        (["sentencepiece.bpe.model"], "is missing the tokenizer (sentencepiece.bpe.model)."),
        (["config.json", "sentencepiece.bpe.model"], "is missing config.json and the tokenizer (sentencepiece.bpe.model)."),
    ],
)
def test_a_folder_missing_files_is_refused_with_what_is_missing(paths, tiny_checkpoint, tmp_path, remove, message):
    folder = tmp_path / "incomplete"
    shutil.copytree(tiny_checkpoint, folder)
    for name in remove:
        (folder / name).unlink()
    with pytest.raises(CheckpointError) as error:
        models.import_model(folder, paths.models_dir)
    assert str(error.value) == f"{folder} is not an NLLB checkpoint: it {message}"
    assert models.list_models(paths.models_dir) == []


def test_a_config_of_another_model_is_refused(paths, tiny_checkpoint, tmp_path):
    folder = tmp_path / "bert"
    shutil.copytree(tiny_checkpoint, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "bert"}))
    with pytest.raises(CheckpointError, match="model_type is 'bert', expected 'm2m_100'"):
        models.import_model(folder, paths.models_dir)


def test_weights_of_the_wrong_shape_are_refused_and_nothing_is_left(paths, tiny_checkpoint, tmp_path):
    folder = tmp_path / "mismatch"
    shutil.copytree(tiny_checkpoint, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "encoder_ffn_dim": config["encoder_ffn_dim"] * 2}))
    with pytest.raises(CheckpointError, match=r"mismatch/model\.safetensors: tensor '.*fc1\.\w+' has shape \(64,?.*expected"):
        models.import_model(folder, paths.models_dir)
    assert not paths.models_dir.exists() or list(paths.models_dir.iterdir()) == []  # no staging folder either


@pytest.mark.parametrize(
    "file, changes, message",
    [
        ("config.json", {"encoder_attention_heads": 0}, "config.json: encoder_attention_heads must be an integer from 1"),
        ("config.json", {"decoder_layers": 10**9}, "config.json: decoder_layers must be an integer from 1 to 256"),
        ("generation_config.json", {"max_length": "200"}, "generation_config.json: max_length must be an integer"),
        ("config.json", {"vocab_size": 10_000_000}, "model.safetensors: tensor 'model.shared.weight' has shape"),
    ],
)
def test_bad_values_are_refused_in_one_line_before_anything_is_copied(paths, tiny_checkpoint, tmp_path, file, changes,
                                                                      message):
    """The import checks through the engine (engine/checkpoint.py): the same line the translator gives."""
    folder = tmp_path / "bad"
    shutil.copytree(tiny_checkpoint, folder)
    data = json.loads((folder / file).read_text())
    (folder / file).write_text(json.dumps({**data, **changes}))
    with pytest.raises(CheckpointError) as error:
        models.import_model(folder, paths.models_dir)
    assert str(error.value).startswith(f"{folder}/") and message in str(error.value)
    assert not paths.models_dir.exists()


def test_a_pickle_that_is_not_plain_tensors_is_refused(paths, tiny_checkpoint, tmp_path):
    folder = tmp_path / "pickled"
    shutil.copytree(tiny_checkpoint, folder)
    (folder / "model.safetensors").unlink()
    torch.save({"model.shared.weight": torch.zeros(2), "code": print}, folder / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match="not a plain tensor checkpoint"):
        models.import_model(folder, paths.models_dir)


def test_cancelled_import_installs_nothing(paths, tiny_checkpoint):
    with pytest.raises(Cancelled):
        models.import_model(tiny_checkpoint, paths.models_dir, should_stop=lambda: True)
    assert list(paths.models_dir.iterdir()) == []


def test_download_without_network_says_so(paths):
    with pytest.raises(OfflineError) as error:
        models.download_model("facebook/nllb-200-distilled-600M", paths.models_dir, endpoint="http://127.0.0.1:9")
    assert "offline" in str(error.value) and "import a model folder" in str(error.value)


def test_download_reports_progress_converts_and_installs(paths, bin_checkpoint):
    with FakeHub("facebook/nllb-tiny", bin_checkpoint) as hub:
        reports = []
        model = models.download_model("facebook/nllb-tiny", paths.models_dir, lambda *r: reports.append(r), endpoint=hub.endpoint)
    total = sum(p.stat().st_size for p in bin_checkpoint.iterdir())
    downloading = [r for r in reports if r[2] == "Downloading facebook/nllb-tiny"]
    assert downloading[-1][:2] == (total, total)
    assert [r[0] for r in downloading] == sorted(r[0] for r in downloading)
    assert model.name == "nllb-tiny" and (model.path / "model.safetensors").is_file()
    assert not (model.path / "pytorch_model.bin").exists()
    assert not (paths.models_dir / ".downloads" / "facebook--nllb-tiny").exists()
    assert translate(model.path) == translate(bin_checkpoint)


def test_a_cancelled_download_resumes_where_it_stopped(paths, bin_checkpoint, monkeypatch):
    monkeypatch.setattr(models, "DOWNLOAD_CHUNK", 16 << 10)
    with FakeHub("facebook/nllb-tiny", bin_checkpoint, chunk=16 << 10, delay=0.002) as hub:
        seen = []
        with pytest.raises(Cancelled):
            models.download_model("facebook/nllb-tiny", paths.models_dir, lambda done, *_: seen.append(done),
                                  should_stop=lambda: len(seen) > 4, endpoint=hub.endpoint)
        part = paths.models_dir / ".downloads" / "facebook--nllb-tiny" / "pytorch_model.bin.part"
        kept = part.stat().st_size
        assert 0 < kept < (bin_checkpoint / "pytorch_model.bin").stat().st_size
        assert models.list_models(paths.models_dir) == []
        model = models.download_model("facebook/nllb-tiny", paths.models_dir, endpoint=hub.endpoint)
        assert ("GET", "/facebook/nllb-tiny/resolve/main/pytorch_model.bin", f"bytes={kept}-") in hub.requests
    assert translate(model.path) == translate(bin_checkpoint)


def test_a_corrupt_download_is_caught(paths, bin_checkpoint, tmp_path):
    with FakeHub("facebook/nllb-tiny", bin_checkpoint) as hub:
        staging = paths.models_dir / ".downloads" / "facebook--nllb-tiny"
        staging.mkdir(parents=True)
        size = (bin_checkpoint / "pytorch_model.bin").stat().st_size
        (staging / "pytorch_model.bin.part").write_bytes(b"\0" * (size // 2))  # not the file's first half
        with pytest.raises(CheckpointError, match="SHA-256 mismatch"):
            models.download_model("facebook/nllb-tiny", paths.models_dir, endpoint=hub.endpoint)
        assert not (staging / "pytorch_model.bin.part").exists()
