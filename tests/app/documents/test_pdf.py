"""PDF: a hand-written text PDF (document_fakes.pdf_bytes) translated into STEM.<to>.txt (pdf_as="text")
and into a PDF; bad PDFs refused by name in both, with no log line of the PDF libraries."""

import io
import types

import pytest
from pypdf import PdfReader

from dragoman.app.documents import DocumentError, output_path, translate_document

from document_fakes import pdf_bytes, upper_keeping_tags

TEXT = {"pdf_as": "text"}
PAGES = [
    ["Installing the program takes a", "minute. Read the whole guide", "first.", None, "The second para-", "graph (with brackets) is short."],
    ["Page two has one line."],
]


def test_the_fake_pdf_is_read_by_pypdf():
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(pdf_bytes(PAGES)), strict=True)
    assert len(reader.pages) == 2
    assert reader.pages[0].extract_text().split("\n")[:3] == ["Installing the program takes a", "minute. Read the whole guide", "first."]
    assert "graph (with brackets) is short." in reader.pages[0].extract_text()


def test_pdf_to_text(tmp_path, fake):
    source = tmp_path / "guide.pdf"
    source.write_bytes(pdf_bytes(PAGES))
    out = output_path(source, "fra_Latn", options=TEXT)
    assert out == tmp_path / "guide.fra_Latn.txt"
    assert output_path(source, "fra_Latn") == tmp_path / "guide.fra_Latn.pdf"
    assert output_path(source, "fra_Latn", options={"bilingual": True}) == tmp_path / "guide.fra_Latn.bilingual.pdf"
    calls = []

    def translate(texts):
        calls.extend(texts)
        return fake(texts)

    translate_document(source, out, translate, options=TEXT)
    assert calls == [
        "Installing the program takes a minute.", "Read the whole guide first.",
        "The second paragraph (with brackets) is short.", "Page two has one line.",
    ]  # lines joined into paragraphs, the hyphenated word joined, one sentence at a time
    assert out.read_text(encoding="utf-8") == (
        "T:INSTALLING THE PROGRAM TAKES A MINUTE. T:READ THE WHOLE GUIDE FIRST.\n\n"
        "T:THE SECOND PARAGRAPH (WITH BRACKETS) IS SHORT.\n\n"
        "\n\f\n"
        "T:PAGE TWO HAS ONE LINE.\n\n"
    )
    assert source.read_bytes() == pdf_bytes(PAGES)


def refuse(tmp_path, name, data, match, capfd):
    path = tmp_path / name
    path.write_bytes(data)
    for options, out in ((TEXT, tmp_path / "out.txt"), ({}, tmp_path / "out.pdf")):
        with pytest.raises(DocumentError, match=match):
            translate_document(path, out, upper_keeping_tags, options=options)
        assert path.read_bytes() == data and not out.exists()
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left
        assert capfd.readouterr() == ("", "")  # the PDF libraries print nothing of their own


def encrypted(user_password):
    from pypdf import PdfWriter

    writer = PdfWriter(clone_from=io.BytesIO(pdf_bytes(PAGES)))
    writer.encrypt(user_password=user_password, owner_password="owner", algorithm="AES-128")
    buf = io.BytesIO()
    writer.write(buf)
    return buf.getvalue()


def test_encrypted_corrupt_and_fake_pdfs_are_refused(tmp_path, capfd):
    refuse(tmp_path, "secret.pdf", encrypted("secret"), "password-protected PDF", capfd)
    data = pdf_bytes(PAGES)
    refuse(tmp_path, "cut.pdf", data[: len(data) // 2], r"corrupt (or unreadable )?PDF \(.+\)", capfd)
    refuse(tmp_path, "garbage.pdf", b"%PDF-1.4\n" + b"garbage " * 100, r"corrupt (or unreadable )?PDF", capfd)
    refuse(tmp_path, "letter.pdf", b"Dear reader,\n", "not a PDF", capfd)
    refuse(tmp_path, "empty.pdf", b"", "empty", capfd)


def test_pdf_with_only_an_owner_password_is_translated(tmp_path):
    (tmp_path / "open.pdf").write_bytes(encrypted(""))
    translate_document(tmp_path / "open.pdf", tmp_path / "out.txt", upper_keeping_tags, options=TEXT)
    assert (tmp_path / "out.txt").read_text(encoding="utf-8").startswith("T:INSTALLING THE PROGRAM")
    translate_document(tmp_path / "open.pdf", tmp_path / "out.pdf", upper_keeping_tags)
    assert "T:INSTALLING THE PROGRAM" in PdfReader(tmp_path / "out.pdf").pages[0].extract_text()


class FakeTranslator:
    """What the CLI's document jobs need from the engine, translating with upper_keeping_tags."""

    device = types.SimpleNamespace(type="cpu")
    config = types.SimpleNamespace(max_position_embeddings=1024)
    model_identity = "fake-model"

    def default_options(self, **overrides):
        from dragoman.engine import DecodingOptions

        return DecodingOptions(num_beams=1, **overrides)

    def adapter_identity(self, name):
        return name

    def spells(self, text):
        return True

    def translate(self, texts, source, target, options, **kw):
        return upper_keeping_tags(texts)


def test_the_command_line_names_the_refused_pdf_and_goes_on(tmp_path, capsys):
    from dragoman.app.cli import translate_files

    tmp_path = tmp_path / "docs"  # tmp_path/home holds the translation cache
    tmp_path.mkdir()
    (tmp_path / "secret.pdf").write_bytes(encrypted("secret"))
    (tmp_path / "cut.pdf").write_bytes(pdf_bytes(PAGES)[:300])
    (tmp_path / "good.pdf").write_bytes(pdf_bytes(PAGES))
    args = types.SimpleNamespace(output_dir=None, adapter="", overwrite=False)
    files = [tmp_path / "secret.pdf", tmp_path / "cut.pdf", tmp_path / "good.pdf"]
    assert translate_files(args, files, FakeTranslator(), "eng_Latn", "fra_Latn", {}) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path / 'secret.pdf'}: password-protected PDF" in err
    assert f"{tmp_path / 'cut.pdf'}: corrupt or unreadable PDF" in err
    assert "2 of 3 documents failed" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.pdf", "good.fra_Latn.pdf", "good.pdf", "secret.pdf"]


@pytest.mark.parametrize("options, name, pages", [
    ([], "good.fra_Latn.pdf", 2), (["--bilingual"], "good.fra_Latn.bilingual.pdf", 4), (["--pdf-as", "text"], "good.fra_Latn.txt", 0),
], ids=["pdf", "bilingual", "text"])
def test_the_command_lines_pdf_options(tmp_path, options, name, pages):
    from dragoman.app.cli import build_parser, translate_files

    (tmp_path / "docs").mkdir()
    good = tmp_path / "docs" / "good.pdf"
    good.write_bytes(pdf_bytes(PAGES))
    args = build_parser().parse_args(["translate", "--model", "m", "--from", "eng_Latn", "--to", "fra_Latn", *options, str(good)])
    assert translate_files(args, [good], FakeTranslator(), "eng_Latn", "fra_Latn", {}) == 0
    out = tmp_path / "docs" / name
    if pages:
        reader = PdfReader(out)
        assert len(reader.pages) == pages and "T:PAGE TWO HAS ONE LINE." in reader.pages[-1].extract_text()
    else:
        assert out.read_text(encoding="utf-8").startswith("T:INSTALLING THE PROGRAM")


def test_pdf_to_pdf_sends_the_same_sentences(tmp_path):
    """Lines joined into paragraphs, the hyphenated word joined, in a PDF whose font has no widths
    (a standard font): the blocks give the model what the text path gives it."""
    source = tmp_path / "guide.pdf"
    source.write_bytes(pdf_bytes(PAGES))
    calls = []

    def translate(texts):
        calls.extend(texts)
        return upper_keeping_tags(texts)

    translate_document(source, tmp_path / "guide.fra_Latn.pdf", translate)
    assert calls == [
        "Installing the program takes a minute.", "Read the whole guide first.",
        "The second paragraph (with brackets) is short.", "Page two has one line.",
    ]
    reader = PdfReader(tmp_path / "guide.fra_Latn.pdf")
    assert "T:THE SECOND PARAGRAPH (WITH BRACKETS) IS SHORT." in " ".join(reader.pages[0].extract_text().split())


@pytest.mark.parametrize("bilingual", [False, True], ids=["translated", "bilingual"])
def test_the_same_pdf_translated_twice_is_the_same_file(tmp_path, bilingual):
    """No date, random name or random identifier in the output: the fonts' subsets keep their
    source's dates, each page names its fonts DrgF1, DrgF2... in order of first use, and the
    file's identifier comes from its content. The book has two fonts a page (bold headings)."""
    from bench.pdf_book import make_book

    source = tmp_path / "book.pdf"
    make_book(str(source), 3)
    options = {"bilingual": bilingual}
    first, second = tmp_path / "first.pdf", tmp_path / "second.pdf"
    translate_document(source, first, upper_keeping_tags, options=options)
    translate_document(source, second, upper_keeping_tags, options=options)
    assert first.read_bytes() == second.read_bytes()
    assert "/DrgF1" in PdfReader(first).pages[-1]["/Resources"]["/Font"]
