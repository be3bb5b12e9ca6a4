"""Typed text is cut like a text document's lines: sentences on their own, the rest kept as typed."""

from dragoman.app.session.typed_text import TypedText


def marked(text: TypedText) -> list[str]:
    """The lines joined back, each sentence's translation standing for itself as <sentence>."""
    return text.lines([f"<{s}>" for s in text.sentences])


def test_a_line_is_translated_sentence_by_sentence_and_joined_with_spaces():
    text = TypedText(["The cat sleeps. The dog barks!  Does it?"], "Latn", "Latn")
    assert text.sentences == ["The cat sleeps.", "The dog barks!", "Does it?"]
    assert marked(text) == ["<The cat sleeps.> <The dog barks!>  <Does it?>"]


def test_scripts_without_spaces_join_sentences_with_nothing():
    text = TypedText(["The cat sleeps. The dog barks."], "Latn", "Hans")
    assert marked(text) == ["<The cat sleeps.><The dog barks.>"]
    text = TypedText(["我们明天去北京。你呢？"], "Hans", "Latn")
    assert text.sentences == ["我们明天去北京。", "你呢？"]
    assert marked(text) == ["<我们明天去北京。> <你呢？>"]


def test_rulers_tables_blank_lines_and_indentation_are_kept():
    lines = ["Title", "=====", "", "   ", "***", "  - first point. Second one", "| Name | Size |", "+------+------+", "42 %"]
    text = TypedText(lines, "Latn", "Latn")
    assert text.sentences == ["Title", "first point.", "Second one", "Name", "Size"]
    assert marked(text) == ["<Title>", "=====", "", "   ", "***", "  - <first point.> <Second one>",
                            "| <Name> | <Size> |", "+------+------+", "42 %"]


def test_urls_and_email_addresses_are_never_sent_to_the_model():
    text = TypedText(["See https://example.org/a_b?q=1, or write to ann.lee@example.com. Thanks (www.example.org)."],
                     "Latn", "Latn")
    assert not any("example" in s for s in text.sentences)
    assert marked(text) == ["<See> https://example.org/a_b?q=1, <or write to> ann.lee@example.com. <Thanks> (www.example.org)."]


def test_unsplit_a_line_is_one_text_as_typed():
    text = TypedText(["One. Two, see https://x.org", "", "-----"], "Latn", "Latn", split=False)
    assert text.sentences == ["One. Two, see https://x.org"]
    assert marked(text) == ["<One. Two, see https://x.org>", "", "-----"]


def test_a_line_shows_the_sentences_known_so_far():
    text = TypedText(["One. Two.", "Three."], "Latn", "Latn")
    assert text.line_of == [0, 0, 1]
    assert text.line(0, [None, "Deux.", None]) == " Deux."
    assert text.line(0, ["Un.", "Deux.", None]) == "Un. Deux."


def test_quotes_and_brackets_stay_with_their_sentence_away_from_addresses():
    text = TypedText(['He said "Go." (Then he left.)'], "Latn", "Latn")
    assert text.sentences == ['He said "Go."', "(Then he left.)"]


def test_spans_place_each_sentences_translation_within_its_line():
    text = TypedText(["  - The cat sleeps. The dog barks!", "Hi."], "Latn", "Latn")
    translations = ["Le chat dort.", "Le chien aboie !", "Salut."]
    line = text.line(0, translations)
    spans = text.spans(0, translations)
    assert [line[start:end] for _, start, end in spans] == translations[:2]
    assert [j for j, _, _ in spans] == [0, 1]
    assert text.spans(1, translations) == [(2, 0, len("Salut."))]
