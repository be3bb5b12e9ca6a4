import json
import sys

from bench import pdf_book


def test_the_book_is_translated_through_the_whole_pdf_path(tiny_checkpoint, monkeypatch, capsys, tmp_path):
    """The lead's one command (`python -m bench.pdf_book --pages N --checkpoint DIR --device D`), on
    the CPU with the tiny test model: the book is written, translated into PDF and timed, and the
    figures printed are those kept where `--out DIR` says."""
    monkeypatch.setattr(sys, "argv", ["pdf_book", "--pages", "1", "--checkpoint", str(tiny_checkpoint), "--device", "cpu",
                                      "--beams", "1", "--new-tokens", "4", "--out", str(tmp_path / "results")])
    pdf_book.main()
    out = json.loads(capsys.readouterr().out)
    assert json.loads((tmp_path / "results" / "pdf_book_1.json").read_text()) == out
    assert out["pages"] == 1 and out["sentences"] == pdf_book.make_book(str(tmp_path / "one.pdf"), 1)
    assert out["pages_per_s"] > 0 and out["sentences_per_s"] > 0 and out["output_MB"] > 0
    assert out["new_tokens"] == 4 and out["layout_only_seconds"] > 0
