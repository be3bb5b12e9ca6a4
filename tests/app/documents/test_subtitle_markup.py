"""Subtitle markup that is broken or hostile: unclosed tags and override blocks by the hundred
thousand are read in linear time (the tag patterns never rescan a line), and an ASS script whose
events have only a Text field keeps its Dialogue lines' shape; with the stand-in and the engine."""

import re

import pytest

from dragoman.app.documents import translate_document

from document_fakes import upper_keeping_tags

SRT_HEAD = "1\n00:00:01,000 --> 00:00:02,000\n"
ASS_HEAD = ("[Script Info]\nScriptType: v4.00+\n\n[Events]\n"
            "Format: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text\n"
            "Dialogue: 0,0:00:01.00,0:00:02.00,Default,,0,0,0,,")


# Each line is 200 KB: a pattern that rescans the rest of the line from every `<` or `{` would take minutes.
@pytest.mark.parametrize("name, source", [
    ("unclosed-angles.srt", SRT_HEAD + "Hello " + "<" * 200_000 + " world.\n"),
    ("one-long-tag.srt", SRT_HEAD + "Hello <" + "a" * 200_000 + " world.\n"),
    ("closing-marks.vtt", "WEBVTT\n\n00:01.000 --> 00:02.000\n你好" + "</" * 100_000 + "世界。\n"),
    ("spaces.srt", SRT_HEAD + "Hello" + " \t" * 100_000 + "world.\n"),
    ("many-lines.srt", SRT_HEAD + "<b>word</b>\n" * 2_000),
    ("unclosed-braces.ass", ASS_HEAD + "Hello " + "{" * 200_000 + " world.\n"),
    ("unclosed-block.ass", ASS_HEAD + "Hello {\\i1" + "a" * 200_000 + " world.\n"),
])
def test_unclosed_markup_is_read_in_linear_time(tmp_path, translate, name, source):
    (tmp_path / name).write_text(source, encoding="utf-8")
    out = translate_document(tmp_path / name, tmp_path / ("out." + name), translate)
    text = out.read_text(encoding="utf-8")
    assert text.count("\n") == source.count("\n")  # every cue keeps its lines
    assert text.split("\n")[0] == source.split("\n")[0]


def test_an_ass_script_with_only_a_text_field_keeps_its_dialogue_lines(tmp_path, translate):
    source = ("[Script Info]\nScriptType: v4.00+\n\n[Events]\nFormat: Text\nDialogue: We went to the market.\n"
              "Dialogue:The bread was fresh.\nComment: not shown\n")
    (tmp_path / "in.ass").write_text(source, encoding="utf-8")
    out = translate_document(tmp_path / "in.ass", tmp_path / "out.ass", translate).read_text(encoding="utf-8").split("\n")
    assert out[:5] == source.split("\n")[:5] and out[7:] == source.split("\n")[7:]
    assert re.fullmatch(r"Dialogue: [^,\s].*", out[5]) and re.fullmatch(r"Dialogue:[^,\s].*", out[6])
    if translate is upper_keeping_tags:
        assert out[5:7] == ["Dialogue: T:WE WENT TO THE MARKET.", "Dialogue:T:THE BREAD WAS FRESH."]
