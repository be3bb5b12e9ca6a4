"""Reading, translating and writing a document costs time linear in its size, however its text is
laid out: one paragraph of many sentences and formatted runs, inline elements nested deep.

The work is measured as the lines of app/documents executed (a trace count, not a clock): doubling
the document must about double it, where depth × elements or sentences × runs would quadruple it.
Costs hidden in C (regular expressions, lxml) are caught by a page too big for them to finish."""

import signal
import sys
from pathlib import Path

import pytest

import dragoman.app.documents
from dragoman.app.documents import translate_document

from document_fakes import upper_losing_tags

DOCUMENTS = str(Path(dragoman.app.documents.__file__).parent)


def lines_executed(action) -> int:
    count = 0

    def in_frame(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return in_frame

    def on_call(frame, event, arg):
        return in_frame if frame.f_code.co_filename.startswith(DOCUMENTS) else None

    previous = sys.gettrace()
    sys.settrace(on_call)
    try:
        action()
    finally:
        sys.settrace(previous)
    return count


def one_paragraph_page(n: int) -> str:
    sentences = "".join(f"Sentence {i} has <b>bold words</b> and <a href='#n{i}'>a link</a> in it. " for i in range(n))
    return f"<html><body><p>{sentences}</p></body></html>"


def nested_page(depth: int) -> str:
    """Paragraphs of `depth` nested inline elements, each holding a sentence."""
    inner = "".join(f"<span class='l{i}'>Level {i} says something. " for i in range(depth)) + "End." + "</span>" * depth
    return "<html><body>" + f"<p>{inner}</p>" * 5 + "</body></html>"


def one_paragraph_docx(path: Path, n: int) -> None:
    import docx

    d = docx.Document()
    p = d.add_paragraph()
    for i in range(n):
        p.add_run(f"Sentence {i} has ")
        p.add_run("bold words").bold = True
        p.add_run(" and ends. ")
    d.save(path)


def work(tmp_path: Path, name: str) -> int:
    return lines_executed(lambda: translate_document(tmp_path / name, tmp_path / f"out-{name}", upper_losing_tags))


@pytest.mark.parametrize("make, small", [(one_paragraph_page, 150), (nested_page, 60)], ids=["sentences×runs", "depth×elements"])
def test_html_work_grows_linearly(tmp_path, make, small):
    (tmp_path / "small.html").write_text(make(small), encoding="utf-8")
    (tmp_path / "large.html").write_text(make(2 * small), encoding="utf-8")
    ratio = work(tmp_path, "large.html") / work(tmp_path, "small.html")
    assert ratio < 2.4, f"doubling the page multiplied the work by {ratio:.2f}"


def test_docx_work_grows_linearly(tmp_path):
    one_paragraph_docx(tmp_path / "small.docx", 150)
    one_paragraph_docx(tmp_path / "large.docx", 300)
    ratio = work(tmp_path, "large.docx") / work(tmp_path, "small.docx")
    assert ratio < 2.4, f"doubling the paragraph multiplied the work by {ratio:.2f}"


def test_a_two_megabyte_paragraph_is_translated(tmp_path):
    """Quadratic in C it would take hours; the bound is generous for a slow, busy machine."""
    n = 27_000
    (tmp_path / "big.html").write_text(one_paragraph_page(n), encoding="utf-8")
    assert (tmp_path / "big.html").stat().st_size > 2_000_000

    def too_slow(signum, frame):
        raise TimeoutError("a 2 MB paragraph took over 300 s: some stage is not linear")

    previous = signal.signal(signal.SIGALRM, too_slow)
    signal.alarm(300)
    try:
        translate_document(tmp_path / "big.html", tmp_path / "out.html", upper_losing_tags)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    out = (tmp_path / "out.html").read_text(encoding="utf-8")
    assert out.count("<a href=") == n and out.count("<b>") == n and f"T:SENTENCE {n - 1} HAS" in out


def test_nesting_beyond_the_parsers_bound_is_refused_in_one_line(tmp_path):
    """libxml2 builds no deeper than 255 levels: HTML past that would lose its text, XML fails."""
    from dragoman.app.documents import DocumentError

    deep = "<b>word " * 1000 + "</b>" * 1000
    (tmp_path / "deep.html").write_text(f"<html><body><p>{deep}</p></body></html>", encoding="utf-8")
    with pytest.raises(DocumentError, match="nested more than 255 deep") as refused:
        translate_document(tmp_path / "deep.html", tmp_path / "out.html", upper_losing_tags)
    assert "\n" not in str(refused.value) and not (tmp_path / "out.html").exists()
