"""File names that differ only by case, and counts said in words: the command line with the engine."""

from dragoman.app.cli import main

from document_fakes import pdf_bytes
from test_cli_documents import translate_args


def test_names_differing_only_by_case_are_both_translated(tiny_checkpoint, tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.pdf").write_bytes(pdf_bytes([["The first report of the year."]]))
    (docs / "a.PDF").write_bytes(pdf_bytes([["The second report, in capitals."]]))
    (docs / "b.txt").write_text("A text beside them.", encoding="utf-8")
    code = main(translate_args(tiny_checkpoint, str(docs)))
    out, err = capsys.readouterr()
    assert code == 0, err
    written = sorted(p.name for p in docs.iterdir() if p.name not in ("a.pdf", "a.PDF", "b.txt"))
    assert written == ["a.PDF.fra_Latn.pdf", "a.fra_Latn.pdf", "b.fra_Latn.txt"]
