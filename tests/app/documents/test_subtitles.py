"""Subtitles: cues keep their lines, timings, settings, tags and identifiers; cues are found without blank lines."""

import re

import pytest

from dragoman.app.documents import DocumentError, translate_document
from dragoman.app.documents.subtitles import rewrap

from document_fakes import TAG, Recording, upper_keeping_tags


def chinese_keeping_tags(texts):
    """A translation into a script without spaces: each letter becomes a Han character, spaces go."""
    def han(piece):
        return "".join(chr(0x4E00 + ord(ch.lower()) % 200) for ch in piece if ch.isalnum()) + "。" * piece.endswith(".")
    return ["".join(p if TAG.fullmatch(p) else han(p) for p in TAG.split(t)) for t in texts]


def translated(tmp_path, name, source, fake=upper_keeping_tags, **kw):
    (tmp_path / name).write_text(source, encoding="utf-8")
    out = tmp_path / ("out." + name.split(".")[-1])
    translate_document(tmp_path / name, out, fake, **kw)
    return out.read_text(encoding="utf-8")


def test_a_cue_keeps_its_line_count_balanced_and_words_whole(tmp_path):
    source = "1\n00:00:01,000 --> 00:00:04,000\nWe went to the market early\nand bought some bread\nfor the whole family.\n"
    out = translated(tmp_path, "in.srt", source).split("\n")
    assert out[:2] == ["1", "00:00:01,000 --> 00:00:04,000"] and out[5:] == [""]
    lines = out[2:5]
    assert " ".join(lines) == "T:WE WENT TO THE MARKET EARLY AND BOUGHT SOME BREAD FOR THE WHOLE FAMILY."
    assert max(map(len, lines)) - min(map(len, lines)) < 12


def test_a_translation_without_spaces_is_cut_between_characters(tmp_path):
    source = "00:01.000 --> 00:03.000\nWe went to the market early\nand bought some <i>bread</i>.\n"
    out = translated(tmp_path, "in.vtt", "WEBVTT\n\n" + source, chinese_keeping_tags, target_script="Hans")
    cue = out.split("\n")[3:5]
    assert out.split("\n")[5:] == [""] and all(cue)
    assert abs(len(re.sub("<[^>]*>", "", cue[0])) - len(re.sub("<[^>]*>", "", cue[1]))) <= 2
    assert "".join(cue).count("<i>") == 1 and "".join(cue).count("</i>") == 1 and not cue[1].startswith("。")


def test_rewrap_cuts_inside_a_word_or_a_tag_only_when_there_are_fewer_words_than_lines():
    assert rewrap("one <i>two three</i> four", 2) == ["one <i>two", "three</i> four"]
    assert rewrap("我们明天<b>去</b>北京。", 2) == ["我们明天", "<b>去</b>北京。"]
    assert rewrap("unbreakable", 2) == ["unbre", "akable"]
    assert rewrap("<i>deux</i> mots", 3) == ["<i>deu", "x</i> m", "ots"]
    assert rewrap("नमस्ते", 3) == ["नम", "स्", "ते"]  # never before a combining mark
    assert rewrap("one line\nthe model wrote", 3) == ["one line", "the model", "wrote"]
    assert rewrap("a", 2) == ["a"]  # fewer characters than lines: the cue keeps its source lines


def cue_line_counts(text: str) -> list[int]:
    """The number of text lines of each cue: the lines after its timing up to a blank line."""
    counts, lines = [], text.split("\n")
    for i, line in enumerate(lines):
        if "-->" in line:
            counts.append(next((k for k, rest in enumerate(lines[i + 1 :]) if not rest.strip()), len(lines) - i - 1))
    return counts


@pytest.mark.parametrize("target, script", [("fra_Latn", "Latn"), ("zho_Hans", "Hans")])
def test_cues_keep_their_line_counts_with_the_real_engine(translator, tmp_path, target, script):
    cues = [["The cat reads a book", "by the river."], ["Yes."], ["We went to the city", "in the morning with",
            "the children."], ["- Where is the dog?", "- In the house."], ["<i>The small green house</i>", "is old."],
            ["Go!", "Now!"], ["The teacher writes a letter", "to his friend tomorrow."]]
    source = "".join(f"{n}\n00:00:{n:02},000 --> 00:00:{n + 1:02},000\n" + "\n".join(lines) + "\n\n"
                     for n, lines in enumerate(cues * 4, 1))
    options = translator.default_options(num_beams=1, max_length=24)
    out = translated(tmp_path, "in.srt", source, lambda texts: translator.translate(texts, "eng_Latn", target, options),
                     target_script=script)
    assert cue_line_counts(out) == cue_line_counts(source) == [len(lines) for lines in cues * 4]
    assert out.count("-->") == len(cues) * 4


def test_webvtt_tags_settings_blocks_and_identifiers_are_kept(tmp_path):
    source = (
        "WEBVTT Kind: captions\n\n"
        "STYLE\n::cue(.loud) { color: red }\n\n"
        "REGION\nid:fred width:40%\n\n"
        "NOTE a note\nover two lines\n\n"
        "intro-1\n00:00:16.500 --> 00:00:18.500 align:start position:0% region:fred\n"
        "<v Ann>When the moon <00:17.500>hits your <c.loud>eye</c></v>\n\n"
        "00:18.500 --> 00:20.500 line:84%\nLike a <00:19.000>big <00:19.500>pizza <00:20.000>pie\n"
    )
    out = translated(tmp_path, "in.vtt", source).split("\n")
    assert out[:13] == source.split("\n")[:13]
    assert out[13] == "<v Ann>T:WHEN THE MOON <00:17.500>HITS YOUR <c.loud>EYE</c></v>"
    assert out[14:16] == ["", "00:18.500 --> 00:20.500 line:84%"]
    assert out[16:] == ["T:LIKE A <00:19.000>BIG <00:19.500>PIZZA <00:20.000>PIE", ""]


def test_cues_not_separated_by_blank_lines_are_separate_cues(tmp_path):
    source = (
        "WEBVTT\n\n"
        "00:04:46.070 --> 00:04:46.470 align:start position:0%\nyeah\n"
        "00:04:46.470 --> 00:05:04.080 align:start position:0%\nyeah\n<c.colorCCCCCC>what</c>\n"
        "00:05:04.080 --> 00:05:05.069 align:start position:0%\nthis<00:05:04.199><c> will</c> happen\n"
    )
    out = translated(tmp_path, "in.vtt", source).split("\n")
    assert out == [
        "WEBVTT", "",
        "00:04:46.070 --> 00:04:46.470 align:start position:0%", "T:YEAH",
        "00:04:46.470 --> 00:05:04.080 align:start position:0%", "YEAH", "<c.colorCCCCCC>WHAT</c>",
        "00:05:04.080 --> 00:05:05.069 align:start position:0%", "THIS<00:05:04.199><c> WILL</c> HAPPEN", "",
    ]  # unpunctuated cues back to back: one sentence ("T:" once), each cue its share
    srt = "1\n00:00:01,000 --> 00:00:02,000\nFirst cue\n2\n00:00:02,000 --> 00:00:03,000\nSecond cue\n"
    assert translated(tmp_path, "in.srt", srt) == "1\n00:00:01,000 --> 00:00:02,000\nT:FIRST CUE\n2\n00:00:02,000 --> 00:00:03,000\nT:SECOND CUE\n"


@pytest.mark.parametrize("fake", [upper_keeping_tags, chinese_keeping_tags], ids=["spaces", "no-spaces"])
def test_dialogue_lines_keep_their_dashes(tmp_path, fake):
    source = "1\n00:02:15,000 --> 00:02:20,000\n- Take a cup of tea.\n- It is not hot.\n\n2\n00:02:20,000 --> 00:02:25,000\n♪ ♪\n"
    out = translated(tmp_path, "in.srt", source, fake).split("\n")
    assert out[2].startswith("- ") and out[3].startswith("- ") and out[4:] == ["", "2", "00:02:20,000 --> 00:02:25,000", "♪ ♪", ""]


ASS = (
    "[Script Info]\r\n; made by hand\r\nTitle: Test, with a comma\r\nScriptType: v4.00+\r\n\r\n"
    "[V4+ Styles]\r\nFormat: Name, Fontname, Fontsize\r\nStyle: Default,Arial,20\r\n\r\n"
    "[Events]\r\nFormat: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text\r\n"
    "Dialogue: 0,0:00:01.00,0:00:03.00,Default,Ann,0,0,0,,{\\pos(10,20)}We went to the {\\i1}market{\\i0}, early\\Nand bought some bread.\r\n"
    "Comment: 0,0:00:03.00,0:00:04.00,Default,,0,0,0,,Not shown, not translated\r\n"
    "Dialogue: 0,0:00:04.00,0:00:05.00,Default,,0,0,0,,{\\k20}Sing{\\k30} along\\hnow\r\n"
    "Dialogue: 0,0:00:05.00,0:00:06.00,Default,,0,0,0,,♪ ♪\r\n"
)


def test_ass_dialogue_text_is_translated_and_everything_else_kept(tmp_path):
    translate = Recording(upper_keeping_tags)

    (tmp_path / "in.ass").write_bytes(ASS.encode("utf-8-sig"))
    translate_document(tmp_path / "in.ass", tmp_path / "out.ass", translate)
    out = (tmp_path / "out.ass").read_bytes().decode("utf-8-sig").split("\r\n")
    source = ASS.split("\r\n")
    assert [line for i, line in enumerate(out) if i not in (11, 13)] == [line for i, line in enumerate(source) if i not in (11, 13)]
    first = out[11]
    assert first.startswith("Dialogue: 0,0:00:01.00,0:00:03.00,Default,Ann,0,0,0,,{\\pos(10,20)}T:WE WENT TO THE ")
    assert first.count("\\N") == 1 and "{\\i1}" in first and "{\\i0}" in first and "BREAD." in first
    assert out[13].startswith("Dialogue: 0,0:00:04.00,0:00:05.00,Default,,0,0,0,,{\\k20}") and "{\\k30}" in out[13]
    assert "\\h" in out[13] and "ALONG" in out[13]
    assert not any("pos(" in text or "Not shown" in text or "Title" in text for text in translate.sent)


def test_a_file_without_dialogue_is_refused(tmp_path):
    (tmp_path / "in.ssa").write_text("[Script Info]\nTitle: nothing\n")
    with pytest.raises(DocumentError, match="no Dialogue lines"):
        translate_document(tmp_path / "in.ssa", tmp_path / "out.ssa", upper_keeping_tags)


def test_a_translation_cut_into_a_blank_line_keeps_the_source_lines():
    """A blank line would end the cue (a random model's text cut between two breaks with nothing
    between them): the cue keeps its source lines instead."""
    from dragoman.app.documents.subtitles import kept_line_count

    source = ["Implementation is the same", "{\\an8}This text should be at the", "top and centered"]
    assert kept_line_count(["{\\an8}", " ", "пиччччччче"], source) == source
    assert kept_line_count(["Une", "deux", "trois"], source) == ["Une", "deux", "trois"]
