"""`dragoman models import|list|remove|download` and `--model NAME`: the window's model code from the
command line, for headless machines and scripts."""

import io
import os
import subprocess
import sys

import pytest

from dragoman.app.cli import main
from dragoman.app.settings import Settings
from fake_hub import FakeHub


def run(args, monkeypatch, capsys, stdin=b""):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def translate(model, monkeypatch, capsys):
    return run(["translate", *(["--model", model] if model else []), "--from", "eng_Latn", "--to", "fra_Latn",
                "--device", "cpu", "--dtype", "float32", "--max-length", "8"], monkeypatch, capsys, b"Hello world.\n")


def test_a_bin_checkpoint_is_imported_listed_used_by_name_and_removed(bin_checkpoint, paths, monkeypatch, capsys):
    code, out, err = run(["models", "list"], monkeypatch, capsys)
    assert (code, out.splitlines()[0]) == (0, f"0 models in {paths.models_dir}")

    code, out, err = run(["models", "import", str(bin_checkpoint), "--name", "nllb-tiny"], monkeypatch, capsys)
    assert code == 0, err
    installed = paths.models_dir / "nllb-tiny"
    assert out.startswith(f"nllb-tiny: installed in {installed}")
    assert (installed / "model.safetensors").is_file() and not (installed / "pytorch_model.bin").exists()
    assert Settings.load(paths.settings_file).model_dir == str(installed)  # the first one is the one in use

    code, out, err = run(["models", "list"], monkeypatch, capsys)
    assert out.splitlines()[1].split()[0] == "nllb-tiny" and out.rstrip().endswith("(in use)")

    by_name = translate("nllb-tiny", monkeypatch, capsys)
    by_folder = translate(str(bin_checkpoint), monkeypatch, capsys)
    in_use = translate(None, monkeypatch, capsys)
    assert by_name[0] == 0 and by_name[1].strip() and by_name == by_folder == in_use

    code, out, err = run(["models", "remove", "nllb-tiny"], monkeypatch, capsys)
    assert (code, out) == (0, "nllb-tiny: removed\n") and not installed.exists()
    assert Settings.load(paths.settings_file).model_dir == ""
    code, out, err = translate(None, monkeypatch, capsys)
    assert code == 1 and err == ("dragoman: error: no model installed: add one with `dragoman models import DIR` or "
                                 "`dragoman models download REPO`, or name a checkpoint folder with --model\n")


def test_an_unknown_model_name_says_what_is_installed(tiny_checkpoint, monkeypatch, capsys):
    run(["models", "import", str(tiny_checkpoint)], monkeypatch, capsys)
    code, out, err = translate("nllb-huge", monkeypatch, capsys)
    assert code == 1
    assert err == f"dragoman: error: nllb-huge: neither a model folder nor an installed model (installed: {tiny_checkpoint.name})\n"
    code, out, err = run(["models", "remove", "nllb-huge"], monkeypatch, capsys)
    assert code == 2 and "nllb-huge: no installed model of that name" in err


def test_a_truncated_bin_is_one_line_naming_the_file(bin_checkpoint, tmp_path, paths, monkeypatch, capsys):
    folder = tmp_path / "truncated"
    folder.mkdir()
    for file in bin_checkpoint.iterdir():
        (folder / file.name).write_bytes(file.read_bytes())
    weights = folder / "pytorch_model.bin"
    weights.write_bytes(weights.read_bytes()[:-4096])
    code, out, err = run(["models", "import", str(folder)], monkeypatch, capsys)
    assert code == 1 and out == ""
    assert err.startswith(f"dragoman: error: {weights}: the file is truncated") and err.count("\n") == 1
    assert not paths.models_dir.exists() or not [p for p in paths.models_dir.iterdir() if not p.name.startswith(".")]


def cli(args, home, **env):
    return subprocess.run([sys.executable, "-m", "dragoman.app.cli", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "DRAGOMAN_HOME": str(home), **env})


def test_download_from_the_hub_and_offline(bin_checkpoint, tmp_path):
    """In a process of its own: huggingface_hub reads HF_ENDPOINT (a mirror, here a fake hub) when imported."""
    with FakeHub("facebook/nllb-tiny", bin_checkpoint) as hub:
        done = cli(["models", "download", "facebook/nllb-tiny"], tmp_path, HF_ENDPOINT=hub.endpoint)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"nllb-tiny: installed in {tmp_path / 'data' / 'models' / 'nllb-tiny'}")
    offline = cli(["models", "download", "nllb-200-distilled-600M"], tmp_path, HF_ENDPOINT="http://127.0.0.1:9")
    assert offline.returncode == 1 and offline.stderr.count("\n") == 1
    assert offline.stderr.startswith("dragoman: error: Dragoman could not reach the Hugging Face hub")


@pytest.mark.parametrize("action", [[], ["list"]])
def test_list_is_the_default(action, monkeypatch, capsys):
    assert run(["models", *action], monkeypatch, capsys)[:2] == run(["models", "list"], monkeypatch, capsys)[:2]
