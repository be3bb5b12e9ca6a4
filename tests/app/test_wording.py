"""Counts are said in words that agree with them ("1 translation looks wrong", "2 translations look
wrong"), and failures in one line."""

from dragoman.app.cli import report_doubts
from dragoman.app.wording import counted, one_line


def test_one_is_singular_and_others_plural():
    assert [counted(n, "translation") for n in (0, 1, 2)] == ["0 translations", "1 translation", "2 translations"]


def test_the_doubts_line_agrees_with_its_count(capsys):
    entry = {"file": "a.txt", "sentence": 0, "source": "A.", "translation": "B.", "score": -9.0, "reasons": []}
    report_doubts(None, [entry], "a.txt")
    report_doubts(None, [entry, entry], "b.txt")
    assert capsys.readouterr().err.splitlines() == [
        "dragoman: a.txt: 1 translation looks wrong (--report FILE lists them)",
        "dragoman: b.txt: 2 translations look wrong (--report FILE lists them)",
    ]


def test_a_failure_is_its_first_line_or_its_kind():
    assert one_line(ValueError("bad header\n  at byte 12")) == "bad header"
    assert one_line(ValueError("\n  padded\n")) == "padded"
    assert one_line(MemoryError()) == "MemoryError"
    assert one_line(OSError("  ")) == "OSError"
