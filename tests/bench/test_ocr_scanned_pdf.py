import json
import sys

from bench import ocr


def test_a_scanned_pdf_is_timed_through_the_apps_reading(monkeypatch, capsys):
    """`python -m bench.ocr --scanned-pdf 2`: two scanned pages read by the app, timed, as JSON."""
    monkeypatch.setattr(sys, "argv", ["ocr", "--scanned-pdf", "2"])
    ocr.main()
    out = json.loads(capsys.readouterr().out)
    assert out["pages"] == 2 and out["seconds"] > 0 and out["seconds_per_page"] == round(out["seconds"] / 2, 2)
    assert out["pages_at_once"] >= 1
