"""How a sentence's formatting is put back on its translation (segments.py), on runs made by hand:
every run with text keeps some text whatever the translation looks like."""

import pytest

from dragoman.app.documents.segments import Run, Segment, translate_segments


def translated(runs, translation, target_script="Latn"):
    """The runs of one segment after `translation` came back for each of its sentences."""
    return translate_segments([Segment(runs)], lambda texts: [translation for _ in texts], "Latn", target_script)[0]


def styles_with_text(runs):
    return [r.style for r in runs if r.atom is None and r.text.strip()]


def test_a_footnote_marker_keeps_a_word_of_a_short_translation():
    runs = [Run("The ministers agreed on a long list of measures for next year"), Run("*", "sup"), Run(" today.")]
    out = translated(runs, "Les ministres sont d'accord aujourd'hui.")
    assert styles_with_text(out) == [None, "sup", None]  # the 1-character run gets a word, not nothing
    assert "".join(r.text for r in out) == "Les ministres sont d'accord aujourd'hui."


def test_every_run_gets_a_character_when_the_translation_has_fewer_words_than_runs():
    runs = [Run("Read "), Run("this", "b"), Run(" and "), Run("that", "i"), Run(" now.")]
    out = translated(runs, "SHORT")
    assert styles_with_text(out) == [None, "b", None, "i", None]
    assert "".join(r.text for r in out) == "SHORT"


def test_a_run_of_words_gets_letters_not_a_lone_number():
    runs = [Run("Chapter one begins", "b"), Run(" here and goes on for a while.")]
    out = translated(runs, "3 — Le chapitre commence ici.")
    bold = "".join(r.text for r in out if r.style == "b")
    assert any(ch.isalpha() for ch in bold)


def test_a_translation_without_letters_is_cut_between_words_not_inside_them():
    """A model's output of numbers and signs alone (a small vocabulary's, or a table's row): each run
    still starts at a word, so no word is half bold."""
    runs = [Run("As long as your files are "), Run("simple enough", "i"), Run(", this library should just work.")]
    translation = "Vu (1) (1) (1) (1) (1) (1) (1) (1) (1) (1) (1) (1) (1)"
    out = translated(runs, translation)
    assert styles_with_text(out) == [None, "i", None]
    assert "".join(r.text for r in out) == translation
    words = translation.split()
    assert all(r.text.split() and set(r.text.split()) <= set(words) for r in out)  # whole words only
    assert all(r.text[:1] != ")" for r in out)


@pytest.mark.parametrize("script, translation", [
    ("Hans", "我们明天去北京看看"),
    ("Jpan", "私たちは明日北京に行きます"),
    ("Thai", "วันนี้อากาศดีมากเราจะไปเที่ยว"),
    ("Laoo", "ມື້ນີ້ອາກາດດີຫຼາຍ"),
    ("Khmr", "ថ្ងៃនេះអាកាសធាតុល្អណាស់"),
    ("Tibt", "དེ་རིང་གནམ་གཤིས་ཡག་པོ་འདུག"),
    ("Mymr", "ဒီနေ့ရာသီဥတုအရမ်းကောင်းတယ်"),
])
def test_scripts_without_spaces_give_each_run_its_share(script, translation):
    runs = [Run("Today the "), Run("weather", "b"), Run(" is very good and we will travel.")]
    out = translated(runs, translation, script)
    assert styles_with_text(out) == [None, "b", None]
    assert "".join(r.text for r in out) == translation
    for run in out:  # a vowel sign or tone mark never starts a run: it stays on its consonant
        assert not run.text or not ("\u0e31" <= run.text[0] <= "\u0e4e" or "\u17b6" <= run.text[0] <= "\u17d3")


def test_a_tag_that_comes_back_empty_falls_back_to_proportional_placement():
    runs = [Run("Click "), Run("here", "link"), Run(" to start the program.")]
    out = translated(runs, "Cliquez <x1></x1> pour démarrer le programme.")
    assert styles_with_text(out) == [None, "link", None]


def test_tags_kept_place_each_run_exactly():
    runs = [Run("Click "), Run("here", "link"), Run(" to start.")]
    out = translated(runs, "Cliquez <x1>ici</x1> pour démarrer.")
    assert [(r.text, r.style) for r in out] == [("Cliquez ", None), ("ici", "link"), (" pour démarrer.", None)]


@pytest.mark.parametrize("translation", ["", "   ", "<x1></x1>"])
def test_an_empty_translation_keeps_the_source_sentence(translation):
    runs = [Run("First sentence. "), Run("Second", "b"), Run(" sentence.")]
    out = translate_segments(
        [Segment(runs)], lambda texts: ["Première phrase." if t == "First sentence." else translation for t in texts], "Latn", "Latn"
    )[0]
    assert "".join(r.text for r in out) == "Première phrase. Second sentence."
    assert [r.text for r in out if r.style == "b"] == ["Second"]


def test_a_translation_shorter_than_its_runs_leaves_the_last_ones_their_words():
    runs = [Run("One "), Run("two", "b"), Run(" three "), Run("four", "i"), Run(" five.")]
    out = translated(runs, "文", "Hans")
    assert styles_with_text(out) == [None, "b", None, "i", None]  # nothing lost, even with one character
    assert out[0].text == "文"


@pytest.mark.parametrize("name", ["in.html", "in.docx"])
def test_a_document_sentence_translated_empty_is_written_as_its_source(tmp_path, name):
    from dragoman.app.documents import translate_document

    first, second = "The first sentence stays.", "The second one comes back empty."
    if name.endswith(".html"):
        (tmp_path / name).write_text(f"<html><body><p>{first} <b>{second}</b></p></body></html>", encoding="utf-8")
    else:
        import docx

        d = docx.Document()
        p = d.add_paragraph(first + " ")
        p.add_run(second).bold = True
        d.save(tmp_path / name)
    translate_document(tmp_path / name, tmp_path / f"out-{name}", lambda texts: ["" if t == second else "T:" + t for t in texts])
    if name.endswith(".html"):
        text = (tmp_path / f"out-{name}").read_text(encoding="utf-8")
        assert f"T:{first} <b>{second}</b>" in text
    else:
        import docx

        p = docx.Document(tmp_path / f"out-{name}").paragraphs[0]
        assert p.text == f"T:{first} {second}" and [r.text for r in p.runs if r.bold] == [second]


def test_the_sentences_placed_by_proportion_are_reported_once_each():
    from document_fakes import upper_keeping_tags, upper_losing_tags

    segments = [Segment([Run("Click "), Run("here", "b"), Run(" now.")]), Segment([Run("Plain text.")]),
                Segment([Run("Click "), Run("here", "b"), Run(" now.")]), Segment([Run("A long "), Run("note", "i"), Run(" here.")])]
    for fake, expected in ((upper_keeping_tags, []), (upper_losing_tags, ["Click <x1>here</x1> now.", "A long <x1>note</x1> here."])):
        placed = []
        translate_segments(segments, fake, "Latn", "Latn", proportional=placed.append)
        assert placed == expected


def rebuilt(runs, translation):
    """The runs of one sentence's translation, and the sentences placed by proportion."""
    placed = []
    out = translate_segments([Segment(runs)], lambda texts: [translation for _ in texts], "Latn", "Latn",
                             proportional=placed.append)[0]
    return [(r.text, r.style) if r.atom is None else r.atom for r in out], placed


LINK_AND_BOLD = [Run("Click "), Run("here", "link"), Run(" or "), Run("there", "b"), Run(" now.")]


def test_extra_tags_beside_the_sources_in_order_are_removed_and_the_runs_placed_by_the_tags():
    out, placed = rebuilt(LINK_AND_BOLD, "Cliquez <x1>ici</x1> ou <x2>là</x2> <x1>maintenant</x2>.")
    assert out == [("Cliquez ", None), ("ici", "link"), (" ou ", None), ("là", "b"), (" maintenant.", None)]
    assert placed == []
    # a tag removed between two spaces leaves one
    out, _ = rebuilt(LINK_AND_BOLD, "Cliquez <x1>ici</x1> <x1> ou <x2>là</x2> maintenant.")
    assert out == [("Cliquez ", None), ("ici", "link"), (" ou ", None), ("là", "b"), (" maintenant.", None)]
    # the first opening tag is the one taken, whatever the model put after it
    out, _ = rebuilt(LINK_AND_BOLD, "<x1>Cliquez <x1>ici</x1> ou <x2>là</x2> maintenant.")
    assert out == [("Cliquez ici", "link"), (" ou ", None), ("là", "b"), (" maintenant.", None)]


def test_the_first_in_order_occurrence_of_each_tag_is_taken():
    # the first <x1> ... </x1> pair wins, and the later copies go with the words they held
    out, placed = rebuilt(LINK_AND_BOLD, "Cliquez <x1>ici</x1> <x1>ou</x1> <x2>là</x2> maintenant.")
    assert out == [("Cliquez ", None), ("ici", "link"), (" ou ", None), ("là", "b"), (" maintenant.", None)]
    assert placed == []


def test_an_atoms_extra_tag_is_removed_and_the_atom_kept_once():
    image = object()
    runs = [Run("See "), Run("this", "i"), Run(" and "), Run(atom=image), Run(" here.")]
    out, placed = rebuilt(runs, "Voir <x1>ceci</x1> et <x2/> ici <x2/>.")
    assert out == [("Voir ", None), ("ceci", "i"), (" et ", None), image, (" ici .", None)]
    assert placed == []


def test_a_closing_tag_around_no_words_is_passed_over_for_the_next_one():
    out, placed = rebuilt(LINK_AND_BOLD, "Cliquez <x1></x1>ici</x1> ou <x2>là</x2>.")
    assert out == [("Cliquez ", None), ("ici", "link"), (" ou ", None), ("là", "b"), (".", None)]
    assert placed == []


def test_a_run_with_text_that_the_in_order_tags_would_leave_empty_is_placed_by_proportion():
    out, placed = rebuilt(LINK_AND_BOLD, "Cliquez <x1></x1> ou <x2>là</x2> <x1>ici</x1>.")
    assert [style for _, style in out if _.strip()] == [None, "link", None, "b", None]  # every run keeps words
    assert placed == ["Click <x1>here</x1> or <x2>there</x2> now."]


def test_tags_each_once_in_another_order_still_place_the_runs_where_the_model_put_them():
    out, placed = rebuilt(LINK_AND_BOLD, "Maintenant <x2>là</x2> ou <x1>ici</x1>.")
    assert out == [("Maintenant ", None), ("là", "b"), (" ou ", None), ("ici", "link"), (".", None)]
    assert placed == []


def test_a_streamed_documents_segments_are_placed_in_order_once_read_whole_while_the_rest_decodes():
    """With a StreamingTranslator, each segment's runs go to `place` as soon as its translations are
    found, in order, and only once every segment is read (a document's tree is walked until then):
    here all are placed before the translator returns, and as translate_segments returns them."""
    import threading
    import time

    segments = [Segment([Run(f"Sentence {i} is "), Run("bold", "b"), Run(" here. And a second one.")])
                for i in range(40)]
    placed: list[tuple[int, list[Run]]] = []
    placed_before_read_whole: list[tuple[int, list[Run]]] = []
    all_placed = threading.Event()

    class Streaming:
        def __call__(self, texts):
            return [t.upper() for t in texts]

        def translate_stream(self, texts, found=None):
            pulled = []
            for text in texts:
                pulled.append(text)
                found(text, text.upper())
                if len(pulled) == 20:
                    time.sleep(0.1)  # time to place the first segments, were it allowed before the end
                    placed_before_read_whole.extend(placed)
            assert all_placed.wait(timeout=30), "nothing was placed while the document decoded"
            return [t.upper() for t in pulled]

    def place(index, runs):
        placed.append((index, runs))
        if index == len(segments) - 1:
            all_placed.set()

    out = translate_segments(segments, Streaming(), "Latn", "Latn", place=place)
    assert placed_before_read_whole == []
    assert [index for index, _ in placed] == list(range(len(segments)))
    assert [runs for _, runs in placed] == out  # the same runs
    unplaced = translate_segments(segments, Streaming(), "Latn", "Latn")
    assert [[(r.text, r.style) for r in runs] for runs in out] == [[(r.text, r.style) for r in runs] for runs in unplaced]
    assert out[3][0].text.startswith("SENTENCE 3 IS")
