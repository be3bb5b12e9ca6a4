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
    assert out["new_tokens"] == 4 and out["layout_only_seconds"] > 0 and out["engine_alone_seconds"] > 0
    assert out["texts_sent"] >= out["sentences"] and out["decoding_share_of_engine"] > 0
    assert 0 < out["decoding_seconds"] < out["seconds"] and 0 < out["seconds_before_first_texts"] < out["seconds"]


def test_the_layout_alone_needs_no_model(monkeypatch, capsys, tmp_path):
    """`--layout-only`: reading and writing the book, timed with the identity for a model."""
    monkeypatch.setattr(sys, "argv", ["pdf_book", "--pages", "2", "--layout-only", "--out", str(tmp_path)])
    pdf_book.main()
    out = json.loads(capsys.readouterr().out)
    assert out["pages"] == 2 and out["sentences"] == pdf_book.make_book(str(tmp_path / "two.pdf"), 2)
    assert out["texts_sent"] >= out["sentences"] and out["layout_only_seconds"] > 0
    assert json.loads((tmp_path / "pdf_layout_2.json").read_text()) == out
