from dragoman.app.documents.segments import Run, Segment, translate_segments
from dragoman.app.documents.sentences import MAX_SENTENCE_CHARS, sentence_gap, split_sentences
from dragoman.engine import NO_SPACE_SCRIPTS


def sentences(text, script="Latn"):
    return [text[a:b] for a, b in split_sentences(text, script)]


def test_latin_keeps_abbreviations_initials_and_decimals():
    text = "Dr. Smith paid 3.5 dollars, e.g. in coins. J. R. R. Tolkien wrote it! Did he? Yes."
    assert sentences(text) == ["Dr. Smith paid 3.5 dollars, e.g. in coins.", "J. R. R. Tolkien wrote it!", "Did he?", "Yes."]


def test_closing_quotes_stay_with_their_sentence():
    assert sentences('He said "Go." Then he left.') == ['He said "Go."', "Then he left."]


def test_cjk_devanagari_and_others():
    assert sentences("我们明天去北京。你呢？好！", "Hans") == ["我们明天去北京。", "你呢？", "好！"]
    assert sentences("यह एक वाक्य है। यह दूसरा है।", "Deva") == ["यह एक वाक्य है।", "यह दूसरा है।"]
    assert sentences("Это первое. это не конец.", "Cyrl") == ["Это первое. это не конец."]
    assert sentences("مرحبا؟ كيف حالك.", "Arab") == ["مرحبا؟", "كيف حالك."]
    assert sentences("ဒါပထမ။ ဒါဒုတိယ။", "Mymr") == ["ဒါပထမ။", "ဒါဒုတိယ။"]


def test_thai_is_cut_at_spaces_into_pieces():
    text = " ".join(["ประโยคภาษาไทยที่ยาวพอสมควร"] * 20)
    pieces = sentences(text, "Thai")
    assert len(pieces) > 1 and "".join(pieces).replace(" ", "") == text.replace(" ", "")
    assert sentences("สวัสดีครับ", "Thai") == ["สวัสดีครับ"]


def test_long_sentences_are_split_safely_not_truncated():
    text = ", ".join(["word " * 12] * 20) + "end"
    pieces = sentences(text)
    assert all(len(p) <= MAX_SENTENCE_CHARS for p in pieces) and len(pieces) > 1
    assert "".join(pieces).replace(" ", "") == text.replace(" ", "")
    unbroken = "x" * 1000
    assert sentences(unbroken) == ["x" * 400, "x" * 400, "x" * 200]


def test_join_follows_the_target_script():
    assert sentence_gap(" ", "Hans") == "" and sentence_gap("", "Latn") == " " and sentence_gap("\n", "Latn") == "\n"


def test_each_distinct_sentence_is_translated_once_and_joined():
    calls = []

    def translate(texts):
        calls.extend(texts)
        return [f"<{t}>" for t in texts]

    segments = [Segment([Run("One. Two.")]), Segment([Run("Two. One.")]), Segment([Run("  42  ")])]
    out = translate_segments(segments, translate, "Latn", "Hans")
    assert sorted(calls) == ["One.", "Two."]
    assert ["".join(r.text for r in runs) for runs in out] == ["<One.><Two.>", "<Two.><One.>", "  42  "]


def test_formatting_follows_tags_or_falls_back_proportionally():
    bold, plain = "B", None
    segment = Segment([Run("Click ", plain), Run("this link", bold), Run(" to go on.", plain)])
    kept = translate_segments([segment], lambda ts: [t.replace("Click", "Klicken").replace("to go on", "weiter") for t in ts], "Latn", "Latn")[0]
    assert [(r.text, r.style) for r in kept] == [("Klicken ", None), ("this link", "B"), (" weiter.", None)]
    lost = translate_segments([segment], lambda ts: ["aaaa bbbb cccc dddd eeee ffff" for _ in ts], "Latn", "Latn")[0]
    assert [r.style for r in lost] == [None, "B", None] and "".join(r.text for r in lost) == "aaaa bbbb cccc dddd eeee ffff"
    atom = Run(atom="IMG")
    with_atom = Segment([Run("See "), atom, Run(" here and there.")])
    out = translate_segments([with_atom], lambda ts: ["xyz"] * len(ts), "Latn", "Latn")[0]
    assert sum(r is atom for r in out) == 1


def test_scripts_without_spaces_between_words_and_their_sentence_gaps():
    assert {"Hans", "Hant", "Jpan", "Thai", "Laoo", "Khmr", "Mymr", "Tibt"} <= NO_SPACE_SCRIPTS
    assert sentence_gap(" ", "Jpan") == "" and sentence_gap(" ", "Mymr") == ""
    assert sentence_gap(" ", "Thai") == " " and sentence_gap("", "Khmr") == " " and sentence_gap("  ", "Tibt") == "  "
