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


LEGACY = [
    ("cp1252", "windows-1252", "Le café où l'été dernier nous avons mangé des crêpes était très agréable.\n"
                               "Voilà « la fin » de l'histoire, dit-il à l'élève.\n"),
    ("shift_jis", "Shift_JIS", "今日は良い天気です。私たちは公園に行きました。\n子供たちは遊んでいます。\n"),
    ("euc_jp", "EUC-JP", "今日はとても良い天気ですね。私たちはみんなで公園に行きました。\n子供たちはそこでたのしく遊んでいます。\n"),
    ("big5", "Big5", "今天天氣很好。我們去了公園。\n孩子們在玩耍。這是一個美麗的城市。\n"),
    ("gb18030", "GB18030", "今天天气很好。我们去了公园。\n孩子们在玩耍。这是一个美丽的城市。\n"),
    ("koi8_r", "KOI8-R", "Сегодня хорошая погода. Мы пошли в парк.\nДети играют на улице весь день.\n"),
    ("cp1251", "windows-1251", "Сегодня хорошая погода. Мы пошли в парк.\nДети играют на улице весь день.\n"),
]


@pytest.mark.parametrize("codec, label, text", LEGACY, ids=[c for c, _, _ in LEGACY])
def test_a_legacy_encoding_is_detected_said_and_kept_where_it_holds_the_translation(tmp_path, codec, label, text):
    (tmp_path / "in.txt").write_bytes(text.encode(codec))
    notes = []
    script = "Hans" if "。" in text else "Latn"  # Chinese and Japanese: no space between sentences
    translate_document(tmp_path / "in.txt", tmp_path / "same.txt", list, script, script,  # each text its own translation
                       note=notes.append)
    assert (tmp_path / "same.txt").read_bytes() == text.encode(codec)
    assert notes == [f"read as {label} (the file is not UTF-8)"]
    notes.clear()
    translate_document(tmp_path / "in.txt", tmp_path / "thai.txt", lambda texts: ["ภาษาไทย " + t for t in texts],
                       note=notes.append)  # Thai: no legacy encoding here holds it
    if codec == "gb18030":  # a Unicode encoding: it holds any translation
        assert notes == [notes[0]] and "ภาษาไทย" in (tmp_path / "thai.txt").read_text(encoding="gb18030")
    else:
        assert notes[1] == f"written as UTF-8: {label} cannot hold the translation"
        assert "ภาษาไทย" in (tmp_path / "thai.txt").read_text(encoding="utf-8")


def test_utf16_without_a_byte_order_mark_is_read_and_written_so(tmp_path):
    text = "A page of text.\r\nIt has two lines.\r\n"
    (tmp_path / "in.txt").write_bytes(text.encode("utf-16-le"))
    notes = []
    translate_document(tmp_path / "in.txt", tmp_path / "out.txt", upper_keeping_tags, note=notes.append)
    assert (tmp_path / "out.txt").read_bytes() == "T:A PAGE OF TEXT.\r\nT:IT HAS TWO LINES.\r\n".encode("utf-16-le")
    assert notes == ["read as UTF-16-LE (UTF-16 without a byte order mark)"]
