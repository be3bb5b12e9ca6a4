"""Documents in scripts without spaces (Chinese) or without sentence punctuation (Thai): sentences are
split by the source script's rules and joined with the target script's conventions."""

import pytest

from dragoman.app.documents import translate_document

ZH_EN = {
    "我们明天去北京。": "We go to Beijing tomorrow.",
    "你呢？": "And you?",
    "好！": "Good!",
    "使用说明": "Instructions",
    "先阅读手册。": "Read the manual first.",
    "然后开始。": "Then start.",
}
EN_ZH = {english: chinese for chinese, english in ZH_EN.items()}


def dictionary(table, calls):
    def translate(texts):
        calls.extend(texts)
        return [table[t] for t in texts]  # a KeyError names a sentence that was split wrongly

    return translate


def run(tmp_path, name, table, source, target):
    calls = []
    out = tmp_path / ("out-" + name)
    translate_document(tmp_path / name, out, dictionary(table, calls), source_script=source, target_script=target)
    return out, calls


def test_chinese_text_to_english_and_back(tmp_path):
    (tmp_path / "zh.txt").write_text("使用说明\n\n我们明天去北京。你呢？好！\n", encoding="utf-8")
    out, calls = run(tmp_path, "zh.txt", ZH_EN, "Hans", "Latn")
    assert calls == ["使用说明", "我们明天去北京。", "你呢？", "好！"]  # cut after 。？！ with no space after them
    assert out.read_text(encoding="utf-8") == "Instructions\n\nWe go to Beijing tomorrow. And you? Good!\n"

    (tmp_path / "en.txt").write_text("Instructions\n\nWe go to Beijing tomorrow. And you? Good!\n", encoding="utf-8")
    out, calls = run(tmp_path, "en.txt", EN_ZH, "Latn", "Hans")
    assert calls == ["Instructions", "We go to Beijing tomorrow.", "And you?", "Good!"]
    assert out.read_text(encoding="utf-8") == "使用说明\n\n我们明天去北京。你呢？好！\n"  # joined without spaces


def test_chinese_markdown(tmp_path):
    (tmp_path / "zh.md").write_text("# 使用说明\n\n先阅读**手册**。然后开始。\n\n- 你呢？\n", encoding="utf-8")
    calls = []

    def translate(texts):
        calls.extend(texts)
        table = {"先阅读<x1>手册</x1>。": "Read the <x1>manual</x1> first."}
        return [table.get(t) or ZH_EN[t] for t in texts]

    translate_document(tmp_path / "zh.md", tmp_path / "out.md", translate, source_script="Hans", target_script="Latn")
    assert calls == ["使用说明", "先阅读<x1>手册</x1>。", "然后开始。", "你呢？"]
    assert (tmp_path / "out.md").read_text(encoding="utf-8") == "# Instructions\n\nRead the **manual** first. Then start.\n\n- And you?\n"


@pytest.mark.parametrize("direction", ["zh-en", "en-zh"])
def test_chinese_docx(tmp_path, direction):
    import docx

    chinese = direction == "zh-en"
    table, source, target = (ZH_EN, "Hans", "Latn") if chinese else (EN_ZH, "Latn", "Hans")
    first, second = ("先阅读手册。", "然后开始。") if chinese else ("Read the manual first.", "Then start.")
    d = docx.Document()
    d.add_heading("使用说明" if chinese else "Instructions", 1)
    p = d.add_paragraph(first if chinese else first + " ")
    p.add_run(second).bold = True
    d.save(tmp_path / "in.docx")

    out, calls = run(tmp_path, "in.docx", table, source, target)
    assert calls == [("使用说明" if chinese else "Instructions"), first, second]
    doc = docx.Document(out)
    assert len(doc.paragraphs) == 2 and doc.paragraphs[0].style.name == "Heading 1"
    body = doc.paragraphs[1]
    if chinese:
        assert body.text == "Read the manual first. Then start."
        assert "".join(r.text for r in body.runs if r.bold) == "Then start."
    else:
        assert body.text == "先阅读手册。然后开始。"  # no space between Chinese sentences
        assert "".join(r.text for r in body.runs if r.bold) == "然后开始。"


def test_thai_text_is_cut_at_spaces_and_joined_with_spaces(tmp_path):
    from dragoman.app.documents.sentences import THAI_PIECE

    phrase = "วันนี้อากาศดีมากเราจะไปเที่ยวทะเลด้วยกัน"
    line = " ".join(phrase + "ก" * i for i in range(8))  # distinct pieces: each is translated once
    assert len(line) > 2 * THAI_PIECE
    (tmp_path / "th.txt").write_text(f"สวัสดีครับ\n\n{line}\n", encoding="utf-8")
    calls = []

    def translate(texts):
        calls.extend(texts)
        return [f"[{len(t.split())} phrases]" for t in texts]

    translate_document(tmp_path / "th.txt", tmp_path / "out.txt", translate, source_script="Thai", target_script="Latn")
    pieces = calls[1:]
    assert calls[0] == "สวัสดีครับ" and len(pieces) > 1  # a long line goes to the model in pieces cut at spaces
    assert " ".join(pieces) == line and all(" " not in (p[0], p[-1]) for p in pieces)
    out = (tmp_path / "out.txt").read_text(encoding="utf-8")
    assert out == "[1 phrases]\n\n" + " ".join(f"[{len(p.split())} phrases]" for p in pieces) + "\n"

    (tmp_path / "en.txt").write_text("Good morning. See you at the sea.\n", encoding="utf-8")
    calls.clear()
    translate_document(tmp_path / "en.txt", tmp_path / "out-th.txt", lambda ts: ["ไทย" for _ in ts], source_script="Latn", target_script="Thai")
    assert (tmp_path / "out-th.txt").read_text(encoding="utf-8") == "ไทย ไทย\n"  # Thai separates sentences with a space


@pytest.mark.parametrize("script, translation", [("Thai", "อ่านคู่มือก่อนแล้วเริ่มต้น"), ("Khmr", "អានសៀវភៅណែនាំជាមុនសិន")])
def test_bold_survives_a_translation_into_a_script_without_spaces(tmp_path, script, translation):
    import docx

    d = docx.Document()
    p = d.add_paragraph("Read the ")
    p.add_run("manual").bold = True
    p.add_run(" first and then start the program.")
    d.save(tmp_path / "in.docx")
    translate_document(tmp_path / "in.docx", tmp_path / "out.docx", lambda texts: [translation for _ in texts], target_script=script)
    body = docx.Document(tmp_path / "out.docx").paragraphs[0]
    bold = "".join(r.text for r in body.runs if r.bold)
    assert body.text == translation and bold and bold != translation  # a share of the characters, not none or all
