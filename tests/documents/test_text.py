"""Plain text: only prose is translated; layout, addresses, encoding and line ends come back as they were."""

import codecs

import pytest

from dragoman.app.documents import translate_document

from document_fakes import Recording, upper_keeping_tags


def translated(tmp_path, data: bytes, name="in.txt", **kw) -> bytes:
    (tmp_path / name).write_bytes(data)
    out = tmp_path / ("out." + name.split(".")[-1])
    translate_document(tmp_path / name, out, upper_keeping_tags, **kw)
    assert (tmp_path / name).read_bytes() == data
    return out.read_bytes()


def test_rulers_tables_indentation_and_lines_without_letters_are_kept(tmp_path):
    source = (
        "Report\n"
        "======\n"
        "\n"
        "+--------+-------+\n"
        "| Name   | Size  |\n"
        "+========+=======+\n"
        "| apples |  12   |\n"
        "+--------+-------+\n"
        "\n"
        "    indented line\n"
        "\t- a point\n"
        "-----\n"
        "***\n"
        "2024-01-05 12:30   42 %\n"
        "   \n"
        "The end.\n"
    )
    out = translated(tmp_path, source.encode()).decode()
    assert out == (
        "T:REPORT\n"
        "======\n"
        "\n"
        "+--------+-------+\n"
        "| T:NAME   | T:SIZE  |\n"
        "+========+=======+\n"
        "| T:APPLES |  12   |\n"
        "+--------+-------+\n"
        "\n"
        "    T:INDENTED LINE\n"
        "\t- T:A POINT\n"
        "-----\n"
        "***\n"
        "2024-01-05 12:30   42 %\n"
        "   \n"
        "T:THE END.\n"
    )


def test_urls_and_email_addresses_are_kept_and_never_sent(tmp_path):
    translate = Recording(upper_keeping_tags)

    source = "Read https://example.org/Docs_(v2) or mail Ann.Lee@example.com, then visit www.Example.org.\n"
    (tmp_path / "in.txt").write_text(source)
    translate_document(tmp_path / "in.txt", tmp_path / "out.txt", translate)
    assert not any("xample" in text for text in translate.sent)
    out = (tmp_path / "out.txt").read_text()
    assert out == "T:READ https://example.org/Docs_(v2) T:OR MAIL Ann.Lee@example.com, T:THEN VISIT www.Example.org.\n"


def test_hard_wrapped_paragraphs_are_wrapped_again_and_short_lines_stay_lines(tmp_path):
    wrapped = (
        "This paragraph was wrapped by an editor at a width of\n"
        "about fifty-five columns, so that its lines are all\n"
        "nearly full, and see https://example.org/a/long/path\n"
        "for more.\n"
    )
    lines = "A short first line of a list of lines\nInstall it with the installer script now:\npip install it\n"
    out = translated(tmp_path, (wrapped + "\n" + lines).replace("\n", "\r\n").encode()).decode()
    paragraph, rest = out.split("\r\n\r\n")
    assert "https://example.org/a/long/path" in paragraph.split()
    assert "\n" not in paragraph.replace("\r\n", "")
    assert paragraph.count("\r\n") >= 3 and all(len(line) <= 55 for line in paragraph.split("\r\n") if "https" not in line)
    assert rest == "T:A SHORT FIRST LINE OF A LIST OF LINES\r\nT:INSTALL IT WITH THE INSTALLER SCRIPT NOW:\r\nT:PIP INSTALL IT\r\n"


@pytest.mark.parametrize("codec, bom", [
    ("utf-8", b""), ("utf-8", codecs.BOM_UTF8), ("utf-16-le", codecs.BOM_UTF16_LE), ("utf-16-be", codecs.BOM_UTF16_BE),
    ("utf-32-le", codecs.BOM_UTF32_LE), ("utf-32-be", codecs.BOM_UTF32_BE),
])
def test_the_encoding_bom_and_crlf_line_ends_come_back_as_they_were(tmp_path, codec, bom):
    out = translated(tmp_path, bom + "Grüße\r\n\r\n-----\r\nZürich".encode(codec))
    assert out == bom + "T:GRÜSSE\r\n\r\n-----\r\nT:ZÜRICH".encode(codec)
