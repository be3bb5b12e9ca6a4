import json
import os
import sys

from bench import kernel_coverage


def test_the_kernels_a_cache_holds_are_counted(tmp_path):
    for name in ("a1/beam_advance.cubin", "b2/beam_advance.json", "c3/slot_attention.cubin", "d4/lora.hsaco"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"")
    assert kernel_coverage.compiled(tmp_path) == {"a1/beam_advance.cubin", "c3/slot_attention.cubin", "d4/lora.hsaco"}


def test_the_paths_run_after_the_build_on_a_cache_of_their_own(tiny_checkpoint, monkeypatch, capsys, tmp_path):
    """`python -m bench.kernel_coverage` on the CPU with the tiny test model: a .docx book, its .txt and
    a typed line with a glossary go through the app's paths on an engine opened twice, the first on
    an empty Triton cache; on the CPU nothing is built or compiled."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "theirs"))
    monkeypatch.setattr(sys, "argv", ["kernel_coverage", "--checkpoint", str(tiny_checkpoint), "--device", "cpu",
                                      "--pages", "1", "--out", str(tmp_path)])
    kernel_coverage.main()
    out = json.loads(capsys.readouterr().out)
    assert os.environ["TRITON_CACHE_DIR"] != str(tmp_path / "theirs")  # a fresh one, as on a first launch
    assert not out["built_apart"] and not out["built_again"] and out["compiled_since_build"] == []
    assert out["compiled_after_docx"] == out["compiled_after_txt"] == out["compiled_after_typed_glossary"] == 0
    assert json.loads((tmp_path / "kernel_coverage.json").read_text()) == out
