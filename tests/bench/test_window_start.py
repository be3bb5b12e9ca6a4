import gc
import json
import sys

import pytest

from bench import window_start


@pytest.mark.qt_log_ignore(r"^This plugin does not support propagateSizeHints\(\)")  # the offscreen platform's note
def test_the_window_is_timed_from_launch_to_its_first_translation(tiny_checkpoint, qapp, monkeypatch, capsys, tmp_path):
    """`python -m bench.window_start` on the CPU with the tiny test model: the window comes up, its
    model loads, the sentence typed at once comes back translated, in that order; a second run finds
    the weights the first one kept."""
    monkeypatch.setenv("DRAGOMAN_HOME", str(tmp_path / "home"))  # the script sets its own: restored after
    argv = ["window_start", "--checkpoint", str(tiny_checkpoint), "--device", "cpu",
            "--weights-cache", str(tmp_path / "weights"), "--out", str(tmp_path / "results")]
    monkeypatch.setattr(sys, "argv", argv)
    gc.disable()  # widgets are freed on this thread, never an engine thread (as tests/app/conftest.py does)
    try:
        window_start.main()
        first = capsys.readouterr().out
        window_start.main()
        second = capsys.readouterr().out
    finally:
        gc.enable()
        gc.collect()
    out = json.loads(first)
    assert out["translated"] and "on CPU" in out["device"]
    assert out["window_shown_s"] <= out["model_loaded_s"] <= out["first_words_s"] <= out["first_translation_s"]
    assert out["longest_gui_stall_s"] > 0 and not out["weights_cache_was_warm"]
    again = json.loads(second)
    assert again["translated"] and again["weights_cache_was_warm"]
    assert json.loads((tmp_path / "results" / "window_start.json").read_text()) == again
