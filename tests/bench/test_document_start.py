import json
import sys

from bench import document_start
from dragoman.app.session.document_batch import FIRST_DOCUMENT_PART


def test_each_book_is_timed_until_its_first_texts_reach_the_engine(monkeypatch, capsys, tmp_path):
    """`python -m bench.document_start` on small books: both formats go through the document path,
    the first texts come before the job ends, and every distinct text is sent once, in parts."""
    monkeypatch.setenv("DRAGOMAN_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(sys, "argv", ["document_start", "--pages", "10", "--runs", "1", "--out", str(tmp_path)])
    document_start.main()
    out = json.loads(capsys.readouterr().out)
    for name in ("docx", "pdf"):
        assert 0 < out[f"{name}_first_texts_s"] < out[f"{name}_whole_s"]
        calls = out[f"{name}_texts_per_call"]
        assert calls[0] == min(FIRST_DOCUMENT_PART, sum(calls)) and sum(calls) > 100
    assert json.loads((tmp_path / "document_start_10.json").read_text()) == out
