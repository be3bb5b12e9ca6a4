import json
import sys

from bench import document_pace
from dragoman.app.session.document_batch import part_sizes


def test_each_book_goes_through_the_document_path_to_an_engine_at_the_given_pace(tiny_checkpoint, monkeypatch, capsys,
                                                                                  tmp_path):
    """`python -m bench.document_pace` on small books: each reaches the paced engine in parts of
    the pipeline's sizes, the job takes at least as long as the engine's pace allows, and the
    engine's idle time and the time before and after it are counted."""
    monkeypatch.setenv("DRAGOMAN_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(sys, "argv", ["document_pace", "--checkpoint", str(tiny_checkpoint), "--pages", "10",
                                      "--rate", "2000", "--runs", "1", "--out", str(tmp_path)])
    document_pace.main()
    out = json.loads(capsys.readouterr().out)
    for name in ("docx", "txt"):
        parts = [texts for _, texts in out[f"{name}_parts"]]
        assert len(parts) > 2 and all(0 < texts <= size for texts, size in zip(parts, part_sizes()))
        assert [at for at, _ in out[f"{name}_parts"]] == sorted(at for at, _ in out[f"{name}_parts"])
        assert out[f"{name}_paced_s"] == sum(parts) / 2000 <= out[f"{name}_job_s"]
        assert 0 <= out[f"{name}_engine_idle_s"] < out[f"{name}_job_s"]
        assert 0 < out[f"{name}_before_first_text_s"] + out[f"{name}_after_last_text_s"] < out[f"{name}_job_s"]
    assert json.loads((tmp_path / "document_pace_10.json").read_text()) == out
