"""`dragoman translate --alternatives N`: one JSON line per stdin line, the engine's translation,
score and alternatives; N refused in one line when below 1 or above the beams."""

import io
import json
import sys

import pytest

from dragoman.app.cli import main

LINES = ["The quick brown fox jumps over the lazy dog. It was late.", "", "Привет, как дела?", "Please call me later."]


def run_cli(args, stdin_text, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin_text.encode()), encoding="utf-8"))
    code = main(args)
    return code, *capsys.readouterr()


def args_for(tiny_checkpoint, *flags):
    return ["translate", "--model", str(tiny_checkpoint), "--from", "eng_Latn", "--to", "fra_Latn", "--device", "cpu",
            "--dtype", "float32", "--max-length", "24", *flags]


def test_each_line_prints_its_translation_score_and_alternatives(tiny_checkpoint, translator, monkeypatch, capsys):
    code, out, err = run_cli(args_for(tiny_checkpoint, "--beams", "4", "--alternatives", "3"),
                             "\n".join(LINES) + "\n", monkeypatch, capsys)
    assert code == 0, err
    printed = [json.loads(line) for line in out.splitlines()]
    # Each line whole, as the engine translates it (the first line's two sentences in one segment).
    expected = translator.translate_full(LINES, "eng_Latn", "fra_Latn",
                                         translator.default_options(num_beams=4, max_length=24), alternatives=3)
    assert printed == [{"source": line, "translation": t.text, "score": t.score,
                        "alternatives": [{"translation": a.text, "score": a.score} for a in t.alternatives]}
                       for line, t in zip(LINES, expected)]
    assert printed[1] == {"source": "", "translation": "", "score": None, "alternatives": []}
    assert all(len(p["alternatives"]) == 2 and p["score"] < 0 for p in printed if p["source"])


def test_a_remembered_line_has_no_score_and_no_alternatives(tiny_checkpoint, translator, monkeypatch, capsys):
    from dragoman.app.session.jobs import open_memory
    from dragoman.app.session.session import TranslationSession

    options = translator.default_options(num_beams=2, max_length=24)
    memory = open_memory()
    try:
        memory.add("eng_Latn", "fra_Latn", {LINES[3]: "Appelle-moi plus tard."},
                   TranslationSession(translator).context("", "eng_Latn", "fra_Latn", options))
    finally:
        memory.close()
    code, out, err = run_cli(args_for(tiny_checkpoint, "--beams", "2", "--alternatives", "2"), LINES[3] + "\n",
                             monkeypatch, capsys)
    assert code == 0, err
    assert json.loads(out) == {"source": LINES[3], "translation": "Appelle-moi plus tard.", "score": None,
                               "alternatives": []}


@pytest.mark.parametrize("flags, message", [
    (["--alternatives", "0"], "--alternatives 0: at least 1"),
    (["--beams", "2", "--alternatives", "3"], "--alternatives 3: more than the 2 beams (--beams)"),
])
def test_a_count_out_of_range_is_refused_before_the_model_loads(tmp_path, capsys, flags, message):
    args = ["translate", "--model", str(tmp_path / "no-model"), "--from", "eng_Latn", "--to", "fra_Latn", *flags]
    assert main(args) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"dragoman: error: {message}\n"


def test_more_alternatives_than_the_model_s_default_beams_are_refused(tiny_checkpoint, monkeypatch, capsys):
    code, out, err = run_cli(args_for(tiny_checkpoint, "--alternatives", "5"), "Hello\n", monkeypatch, capsys)
    assert (code, out) == (2, "")
    assert err == "dragoman: error: --alternatives 5: more than the 4 beams (--beams)\n"
