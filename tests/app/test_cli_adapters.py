"""`dragoman translate --adapter` against PEFT, and `dragoman adapters`."""

import io
import json
import shutil
import sys

import pytest
from peft_adapters import ADAPTER_CONFIGS, peft_generate

from dragoman.app.cli import main

LINES = ["The quick brown fox jumps over the lazy dog.", "", "Привет, как дела?"]


def run_cli(args, stdin_text, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin_text.encode()), encoding="utf-8"))
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def translate_args(checkpoint, *flags):
    return ["translate", "--model", str(checkpoint), "--from", "eng_Latn", "--to", "fra_Latn", "--device", "cpu",
            "--dtype", "float32", "--beams", "3", "--max-length", "25", *flags]


@pytest.mark.parametrize("name", list(ADAPTER_CONFIGS))
def test_translate_with_an_adapter_equals_peft(tiny_checkpoint, peft_adapters, hf_tokenizer, monkeypatch, capsys, name):
    folder, models = peft_adapters
    args = translate_args(tiny_checkpoint, "--adapters", str(folder), "--adapter", name)
    code, out, err = run_cli(args, "\n".join(LINES) + "\n", monkeypatch, capsys)
    assert code == 0, err
    expected = [peft_generate(models[name], hf_tokenizer, line, "eng_Latn", "fra_Latn", num_beams=3, max_length=25)[1]
                if line else "" for line in LINES]
    assert out.split("\n")[:-1] == expected


def test_the_default_adapters_folder_is_the_apps(tiny_checkpoint, peft_adapters, paths, monkeypatch, capsys):
    shutil.copytree(peft_adapters[0] / "attn", paths.default_adapters_dir / "attn")
    code, out, err = run_cli(translate_args(tiny_checkpoint, "--adapter", "attn"), "Hello\n", monkeypatch, capsys)
    assert code == 0 and out.strip(), err


def test_unknown_and_broken_adapters_are_one_line_errors(tiny_checkpoint, peft_adapters, tmp_path, monkeypatch, capsys):
    shutil.copytree(peft_adapters[0] / "attn", tmp_path / "broken")
    (tmp_path / "broken" / "adapter_config.json").unlink()
    for name, message in [("nope", f"adapter 'nope': no such folder in {tmp_path}"),
                          ("broken", f"{tmp_path / 'broken' / 'adapter_config.json'}: missing")]:
        args = translate_args(tiny_checkpoint, "--adapters", str(tmp_path), "--adapter", name)
        code, out, err = run_cli(args, "Hello\n", monkeypatch, capsys)
        assert code == 1 and out == "" and err.count("\n") == 1 and message in err


def test_adapters_lists_rank_targets_size_and_what_is_broken(tiny_checkpoint, peft_adapters, tmp_path, monkeypatch,
                                                             capsys):
    for name in ("attn", "ffn-rslora"):
        shutil.copytree(peft_adapters[0] / name, tmp_path / name)
    shutil.copytree(peft_adapters[0] / "attn", tmp_path / "dora")
    config = json.loads((tmp_path / "dora" / "adapter_config.json").read_text())
    (tmp_path / "dora" / "adapter_config.json").write_text(json.dumps(config | {"use_dora": True}))
    (tmp_path / "empty").mkdir()
    code, out, err = run_cli(["adapters", "--adapters", str(tmp_path), "--model", str(tiny_checkpoint)], "", monkeypatch,
                             capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"4 adapter folders in {tmp_path}, checked against {tiny_checkpoint}"
    size = (tmp_path / "attn" / "adapter_model.safetensors").stat().st_size
    assert lines[1] == (f"attn        rank 4, alpha 8  {size / 1000:.1f} KB  "
                        "encoder q_proj v_proj; decoder q_proj v_proj cross_attn.q_proj cross_attn.v_proj")
    assert lines[2].startswith("dora        BROKEN: ") and "DoRA (use_dora) is not supported" in lines[2]
    assert lines[3].startswith("empty       BROKEN: ") and "adapter_config.json: missing" in lines[3]
    assert lines[4].startswith("ffn-rslora  rank 8, alpha 16, rsLoRA  ")


def test_adapters_without_a_folder_is_an_error(tmp_path, monkeypatch, capsys):
    code, _, err = run_cli(["adapters", "--adapters", str(tmp_path / "missing")], "", monkeypatch, capsys)
    assert code == 2 and "no such folder" in err


def test_adapters_lists_hostile_configs_at_once_each_on_one_line(tiny_checkpoint, peft_adapters, tmp_path, monkeypatch,
                                                                capsys):
    """A target regex that backtracks for hours under `re`, and alphas that are not numbers a scaling can use."""
    for name, changes in [("backtracking", {"target_modules": r"([a-z_.0-9]+)+X"}),
                          ("nan-alpha", {"lora_alpha": float("nan")}),
                          ("huge-alpha", {"lora_alpha": 1e300})]:
        shutil.copytree(peft_adapters[0] / "attn", tmp_path / name)
        config = json.loads((tmp_path / name / "adapter_config.json").read_text())
        (tmp_path / name / "adapter_config.json").write_text(json.dumps(config | changes))
    code, out, err = run_cli(["adapters", "--adapters", str(tmp_path), "--model", str(tiny_checkpoint)], "", monkeypatch,
                             capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 4
    assert lines[1].startswith("backtracking  BROKEN: ") and "select no module of NLLB" in lines[1]
    assert lines[2].startswith("huge-alpha    BROKEN: ") and "adapter_config.json: lora_alpha must be" in lines[2]
    assert lines[3].startswith("nan-alpha     BROKEN: ") and "lora_alpha must be a number above 0 and at most" in lines[3]
    assert "not nan" in lines[3] and "not 1e+300" in lines[2]
