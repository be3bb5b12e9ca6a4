import json
import sys

import pytest

from bench import typed_latency
from dragoman.engine.scheduler import PACED_ROWS


@pytest.mark.parametrize("through_app", [False, True], ids=["engine", "through the app"])
def test_typed_sentences_are_timed_alone_and_beside_a_running_document(tiny_checkpoint, monkeypatch, capsys,
                                                                       tmp_path, through_app):
    """`python -m bench.typed_latency` on the CPU with the tiny test model: the typed sentences beside
    the document come back while it still decodes, through the engine or the app's pipeline, and the
    threads' stacks meanwhile are sampled."""
    from dragoman.app.session.session import TranslationSession

    document = ["--through-app", "6"] if through_app else ["--sentences", "512", "--paced-rows", "64"]
    monkeypatch.setenv("DRAGOMAN_HOME", str(tmp_path / "home"))
    opened = []  # through the app, the pipeline has the window's stores, of a new data folder
    open_session = TranslationSession.open.__func__

    def recording(cls, translator, paths=None, **kwargs):
        opened.append(paths.data_dir)
        return open_session(cls, translator, paths, **kwargs)

    monkeypatch.setattr(TranslationSession, "open", classmethod(recording))
    monkeypatch.setattr(sys, "argv", ["typed_latency", "--checkpoint", str(tiny_checkpoint), "--device", "cpu",
                                      "--repeats", "2", *document, "--timeline", "--stacks", "--out", str(tmp_path)])
    typed_latency.main()
    out = json.loads(capsys.readouterr().out)
    assert out["typed_alone_ms"] > 0 and out["typed_beside_document_ms"] > 0
    assert out["ratio"] == pytest.approx(out["typed_beside_document_ms"] / out["typed_alone_ms"])
    assert out["document_still_running_after_the_last_typed"]
    assert out["paced_rows"] == (PACED_ROWS if through_app else 64)
    assert through_app or out["typed_beside_document_unannounced_ms"] > 0
    # Each typed sentence beside the document, as the engine's loop saw it: admitted, then its 31
    # steps after the first token (32 forced), within its whole time.
    assert len(out["beside_timeline"]) == 2
    for typed in out["beside_timeline"]:
        assert typed["steps"] == 31 and 0 <= typed["to_admission_ms"] < typed["ms"] <= out["typed_beside_document_ms"] * 3
        # The document's work before its admission, and its host time: none of either, or some of both.
        assert 0 <= typed["document_steps_before_new_graph"] <= typed["document_steps_before"]
        work = typed["document_steps_before"] + typed["document_admissions_before"]
        assert (work == 0) == (typed["document_work_before_host_ms"] == 0)
    if not through_app:  # and the typed sentences alone, summed up as those beside it are
        alone = out["alone_timeline_medians"]
        assert alone["steps"] == 31 and alone["document_steps_before"] == 0 and 0 < alone["ms"] < out["typed_alone_ms"] * 3
        assert out["beside_timeline_medians"]["steps"] == 31
    # Where the threads were meanwhile: the engine's among them, at work beside the typed text.
    assert any(stack["thread"] == "dragoman-engine" and stack["frames"] for stack in out["stacks"])
    assert all(stack["typed_text"] in ("waiting", "admitted") and stack["samples"] > 0 for stack in out["stacks"])
    if through_app:  # the slowest typed call sampled whole: the app's part of it too
        assert out["slowest_typed_ms"] >= out["typed_beside_document_ms"]
        slowest = out["slowest_typed_stacks"]
        assert any(stack["thread"] == "dragoman-engine" for stack in slowest)
        assert all(stack["typed_text"] in ("waiting", "admitted", "in the app") for stack in slowest)
    assert len(opened) == int(through_app) and all(not str(folder).startswith(str(tmp_path / "home")) for folder in opened)
    name = "typed_latency_through_app" if through_app else "typed_latency"
    assert json.loads((tmp_path / f"{name}.json").read_text()) == out
