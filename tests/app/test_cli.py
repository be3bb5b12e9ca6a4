"""`dragoman translate` end to end: stdin lines in, the reference's translations out, clear errors."""

import io
import subprocess
import sys

import pytest
import torch

from dragoman.app import __version__
from dragoman.app.cli import main

LINES = ["Hello world, how are you?", "", "Привет, как дела?", "我们明天去北京。", "Ein kurzer Satz"]


def run_cli(args, stdin_bytes, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin_bytes), encoding="utf-8"))
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def reference(hf_model, hf_tokenizer, line, src, tgt, **options):
    if not line:
        return ""
    hf_tokenizer.src_lang = src
    with torch.no_grad():
        out = hf_model.generate(
            **hf_tokenizer(line, return_tensors="pt"),
            forced_bos_token_id=hf_tokenizer.convert_tokens_to_ids(tgt),
            **options,
        )
    return hf_tokenizer.decode(out[0], skip_special_tokens=True)


@pytest.mark.parametrize(
    "flags, options",
    [
        ([], dict(num_beams=4)),  # our default: beam 4, the checkpoint's max_length (200)
        (["--beams", "1", "--max-length", "30"], dict(num_beams=1, max_length=30)),
        (
            ["--beams", "3", "--length-penalty", "0.7", "--no-repeat-ngram-size", "2", "--repetition-penalty", "1.2"],
            dict(num_beams=3, length_penalty=0.7, no_repeat_ngram_size=2, repetition_penalty=1.2),
        ),
    ],
)
def test_translate_stdin_matches_the_reference(tiny_checkpoint, hf_model, hf_tokenizer, monkeypatch, capsys, flags, options):
    args = ["translate", "--model", str(tiny_checkpoint), "--from", "eng_Latn", "--to", "fra_Latn", "--device", "cpu"]
    args += ["--dtype", "float32", *flags]
    code, out, err = run_cli(args, "\n".join(LINES).encode() + b"\n", monkeypatch, capsys)
    assert code == 0, err
    expected = [reference(hf_model, hf_tokenizer, line, "eng_Latn", "fra_Latn", **options) for line in LINES]
    assert out.split("\n")[:-1] == expected
    assert out.split("\n")[1] == ""  # the empty line stayed empty


def test_unknown_language_is_a_usage_error_with_suggestions(tiny_checkpoint, monkeypatch, capsys):
    code, out, err = run_cli(
        ["translate", "--model", str(tiny_checkpoint), "--from", "english", "--to", "fra_Latn"], b"hi\n", monkeypatch, capsys
    )
    assert code == 2
    assert err.count("\n") == 1 and "english" in err and "eng_Latn" in err
    assert out == ""


def test_too_little_gpu_memory_is_a_usage_error(tiny_checkpoint, monkeypatch, capsys):
    args = ["translate", "--model", str(tiny_checkpoint), "--from", "eng_Latn", "--to", "fra_Latn", "--gpu-memory", "10"]
    code, out, err = run_cli(args, b"hi\n", monkeypatch, capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "--gpu-memory 10: at least 256 MB" in err


def test_wrong_model_folder_is_one_line_and_exit_1(tmp_path, monkeypatch, capsys):
    code, _, err = run_cli(
        ["translate", "--model", str(tmp_path), "--from", "eng_Latn", "--to", "fra_Latn"], b"hi\n", monkeypatch, capsys
    )
    assert code == 1
    assert err.startswith("dragoman: error:") and "config.json" in err and err.count("\n") == 1


def test_bad_option_and_bad_input_are_reported(tiny_checkpoint, monkeypatch, capsys):
    base = ["translate", "--model", str(tiny_checkpoint), "--from", "eng_Latn", "--to", "fra_Latn", "--device", "cpu"]
    code, _, err = run_cli(base + ["--beams", "0"], b"hi\n", monkeypatch, capsys)
    assert code == 2 and "num_beams" in err
    code, _, err = run_cli(base, b"fine\n\xff\xfe broken\n", monkeypatch, capsys)
    assert code == 1 and "line 2 is not valid UTF-8" in err
    code, _, err = run_cli(base + ["notes.docx"], b"", monkeypatch, capsys)
    assert code == 1 and "notes.docx: no such file" in err


def test_the_real_command_runs_as_a_process(tiny_checkpoint):
    version = subprocess.run([sys.executable, "-m", "dragoman.app.cli", "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.strip() == f"dragoman {__version__}"
    args = ["translate", "--model", str(tiny_checkpoint), "--from", "rus_Cyrl", "--to", "eng_Latn", "--beams", "2"]
    done = subprocess.run(
        [sys.executable, "-m", "dragoman.app.cli", *args, "--max-length", "20", "--device", "cpu", "--dtype", "float32"],
        input="Привет\n\nмир\n",
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split("\n")
    assert len(lines) == 4 and lines[1] == "" and lines[0] and lines[2]


def test_the_installed_command_ends_a_translation_after_what_an_exit_must_do(tiny_checkpoint, tmp_path):
    """`command` (the installed `dragoman`) leaves out the interpreter's teardown after a translate
    command: atexit's handlers still run, the output and the report are whole, the exit code kept."""
    ran = tmp_path / "atexit-ran"
    code = ("import atexit, sys\n"
            f"atexit.register(lambda: open({str(ran)!r}, 'w').close())\n"
            "sys.argv = ['dragoman', *sys.argv[1:]]\n"
            "from dragoman.app.cli import command\n"
            "command()\n")
    args = ["translate", "--model", str(tiny_checkpoint), "--from", "eng_Latn", "--to", "fra_Latn", "--device", "cpu",
            "--dtype", "float32", "--max-length", "20", "--report", str(tmp_path / "report.jsonl")]
    lines = ["The quick brown fox jumps over the lazy dog."] * 300  # more than one chunk of output
    done = subprocess.run([sys.executable, "-c", code, *args], input="\n".join(lines) + "\n", capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.split("\n")) == len(lines) + 1 and all(done.stdout.split("\n")[:-1])
    assert ran.exists() and (tmp_path / "report.jsonl").exists()
    ran.unlink()
    unknown = [a if a != "fra_Latn" else "xxx_Latn" for a in args]
    refused = subprocess.run([sys.executable, "-c", code, *unknown], input="Hello\n", capture_output=True, text=True)
    assert refused.returncode == 2 and "xxx_Latn" in refused.stderr and ran.exists()


def test_stdin_lines_are_translated_sentence_by_sentence_unless_no_split(tiny_checkpoint, translator, monkeypatch,
                                                                           capsys):
    options = translator.default_options(num_beams=2, max_length=30)
    base = ["translate", "--model", str(tiny_checkpoint), "--from", "eng_Latn", "--device", "cpu", "--dtype", "float32",
            "--beams", "2", "--max-length", "30"]
    line = "The cat reads a book. The dog sees https://example.org today."
    stdin = f"{line}\n=====\n\n".encode()
    pieces = ["The cat reads a book.", "The dog sees", "today."]
    one, two, three = translator.translate(pieces, "eng_Latn", "fra_Latn", options)
    code, out, err = run_cli(base + ["--to", "fra_Latn"], stdin, monkeypatch, capsys)
    assert code == 0, err
    assert out == f"{one} {two} https://example.org {three}\n=====\n\n"
    code, out, err = run_cli(base + ["--to", "zho_Hans"], b"The cat reads a book. The dog sleeps.\n", monkeypatch, capsys)
    assert out == "".join(translator.translate(["The cat reads a book.", "The dog sleeps."], "eng_Latn", "zho_Hans", options)) + "\n"
    code, out, err = run_cli(base + ["--to", "fra_Latn", "--no-split"], stdin, monkeypatch, capsys)
    from dragoman.app.session.terms import Marks, Terms

    masked = Terms().for_pair("eng_Latn", "fra_Latn").mask(line, Marks.for_translator(translator))
    (whole,) = translator.translate([masked.text], "eng_Latn", "fra_Latn", options, terms=[masked.terms])
    assert code == 0 and out == f"{masked.restore(whole)}\n=====\n\n"  # the URL as a mark, then as written (app.session.terms)
    assert out.count("https://example.org") == 1


def test_a_command_that_ends_while_the_kernels_build_says_why_it_waits(tiny_checkpoint, monkeypatch, capsys):
    """On a first launch on a GPU the kernels compile in another process, which the command waits
    for at exit: it says so then, once, and says nothing where the build ended first."""
    import atexit

    from dragoman.engine.translator import Translator

    building = [True]
    at_exit = []
    monkeypatch.setattr(Translator, "kernels_building", lambda self: building[0])
    monkeypatch.setattr(atexit, "register", lambda function, *args: at_exit.append((function, args)))
    args = ["translate", "--model", str(tiny_checkpoint), "--from", "eng_Latn", "--to", "fra_Latn", "--device", "cpu"]
    assert run_cli(args, b"Hello.\n", monkeypatch, capsys)[0] == 0
    from dragoman.app.cli import say_kernels_still_building

    [arguments] = [args for function, args in at_exit if function is say_kernels_still_building]
    say_kernels_still_building(*arguments)
    assert capsys.readouterr().err == (
        "dragoman: finishing the GPU kernels for later launches (the first launch on this GPU)\n")
    building[0] = False
    say_kernels_still_building(*arguments)
    assert capsys.readouterr().err == ""
