import json
import sys

from bench import ocr


def test_a_scanned_pdf_is_timed_through_the_apps_reading(monkeypatch, capsys):
    """`python -m bench.ocr --scanned-pdf 2`: two scanned pages read by the app, timed, as JSON."""
    monkeypatch.setattr(sys, "argv", ["ocr", "--scanned-pdf", "2"])
    ocr.main()
    out = json.loads(capsys.readouterr().out)
    # each rounded from the unrounded time: 5.25 s may be 2.63 s a page
    assert out["pages"] == 2 and out["seconds"] > 0 and abs(out["seconds_per_page"] - out["seconds"] / 2) <= 0.01
    assert out["pages_at_once"] >= 1
