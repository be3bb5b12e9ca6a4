"""A first launch's kernels built in another process (engine/kernel_build.py): the stand-in's
shapes, the process's life and its marker, on the CPU (a GPU's build: tests/engine/test_cuda.py)."""

import json
import logging
from types import SimpleNamespace

from dragoman import kernels
from dragoman.engine import kernel_build
from dragoman.engine.kernel_build import BuildSpec, KernelBuild, stand_in_layers
from dragoman.kernels import dispatch

BUILD_SECONDS = 300  # a spawned process imports torch and loads the model: slow on a shared CI machine


def cpu_spec(checkpoint, marker) -> BuildSpec:
    return BuildSpec(str(checkpoint), "cpu", "float32", 1, 1, max_rows=8, cache_tokens=1024, marker=str(marker))


def test_the_stand_in_keeps_few_layers_of_the_same_specialisation():
    """Triton specialises an integer on being 1 and on 16 dividing it: the stand-in's count must
    fall in the same class as the model's, or its kernels would not be the model's."""
    for layers in range(1, 65):
        kept = stand_in_layers(layers)
        assert 1 <= kept <= min(layers, 16)
        assert (kept == 1) == (layers == 1) and (kept % 16 == 0) == (layers % 16 == 0)


def test_a_translator_of_fewer_layers_keeps_the_checkpoint_s_shapes(make_translator, translator):
    stand_in = make_translator(layers=(1, 1))
    config = stand_in.config
    assert (config.encoder_layers, config.decoder_layers) == (1, 1)
    assert (config.d_model, config.vocab_size) == (translator.config.d_model, translator.config.vocab_size)
    assert translator.config.decoder_layers > 1
    [text] = stand_in.translate(["Hello."], "eng_Latn", "fra_Latn", stand_in.default_options(max_length=8))
    assert isinstance(text, str)


def test_the_references_serve_while_a_build_runs(monkeypatch):
    on_gpu = SimpleNamespace(is_cuda=True)
    monkeypatch.setattr(dispatch, "HAVE_TRITON", True)
    assert dispatch.use_triton(on_gpu)
    monkeypatch.setattr(dispatch, "_building", False)
    kernels.set_building(True)
    assert kernels.building() and not dispatch.use_triton(on_gpu)
    kernels.set_building(False)
    assert dispatch.use_triton(on_gpu)


def test_no_build_starts_on_the_cpu(make_translator):
    translator = make_translator(build_kernels_apart=True)
    assert translator.kernel_build is None and not translator.kernels_building()


def test_a_build_process_runs_the_stand_in_and_leaves_its_marker(tiny_checkpoint, tmp_path):
    marker = tmp_path / "cache" / "dragoman-kernels-x.built"
    build = KernelBuild(cpu_spec(tiny_checkpoint, marker)).launch()
    assert build is not None and build.running and kernels.building()
    assert build.wait(BUILD_SECONDS), "the build ended"
    assert build.succeeded and not kernels.building()
    assert json.loads(marker.read_text())["model_dir"] == str(tiny_checkpoint)
    assert [p.name for p in marker.parent.iterdir()] == [marker.name]  # written whole, by a rename


def test_a_failed_build_says_so_and_the_kernels_compile_where_used(tmp_path, caplog):
    marker = tmp_path / "dragoman-kernels-x.built"
    with caplog.at_level(logging.WARNING, logger=kernel_build.__name__):
        build = KernelBuild(cpu_spec(tmp_path / "no-such-model", marker)).launch()
        assert build is not None and build.wait(BUILD_SECONDS)
    assert not build.succeeded and not kernels.building() and not marker.exists()
    assert "building the GPU kernels apart failed (CheckpointError: " in caplog.text and "no-such-model" in caplog.text


def test_a_build_done_meanwhile_is_not_done_again(tmp_path):
    marker = tmp_path / "dragoman-kernels-x.built"
    marker.write_text("{}\n")
    kernel_build.build(cpu_spec(tmp_path / "no-such-model", marker))  # returns before loading anything
    assert marker.read_text() == "{}\n"
