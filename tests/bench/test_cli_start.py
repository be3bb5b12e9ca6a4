import json
import sys
from pathlib import Path

from bench import cli_start


def test_launches_are_timed_to_the_translation_and_to_exit(tiny_checkpoint, monkeypatch, capsys, tmp_path):
    """`python -m bench.cli_start` on the CPU with the tiny test model: each launch, a process of its
    own, writes its translation before it exits, and the first runs on a Triton cache of its own;
    the launches keep one cache folder, where the first left the CPU's int8 weights for the next."""
    monkeypatch.setattr(sys, "argv", ["cli_start", "--checkpoint", str(tiny_checkpoint), "--device", "cpu",
                                      "--launches", "2", "--out", str(tmp_path)])
    cli_start.main()
    out = json.loads(capsys.readouterr().out)
    for launch in [out["first"], *out["warm"]]:
        assert launch["exit_code"] == 0 and launch["translated"]
        assert 0 < launch["to_translation_s"] <= launch["to_exit_s"]
    assert len(out["warm"]) == 1 and json.loads((tmp_path / "cli_start.json").read_text()) == out
    assert [p.name.endswith(".int8.safetensors") for p in (Path(out["cache_folder"]) / "weights").iterdir()] == [True]
