"""Sentences that run across subtitle cues: translated once as one sentence, each cue given its share
(where the model put the cue marks, else by length), with cues, timings and line counts kept;
reading speed and line length noted."""

import re

import pytest

from dragoman.app.documents import translate_document
from dragoman.app.documents.subtitle_cues import Cue, CueBoundary, continues, cue_shares
from dragoman.app.session.jobs import DocumentJob, JobReport
from dragoman.app.session.session import TranslationSession

from document_fakes import TAG, Recording, no_spaces, upper_keeping_tags, upper_losing_tags
from test_subtitles import chinese_keeping_tags, cue_line_counts

# A sentence over two cues (tags in it), one over three, and cues that end their sentences.
CUES = [
    ("00:00:01,000", "00:00:04,000", ["We went to the <i>old market</i>", "early in the morning"]),
    ("00:00:04,200", "00:00:06,000", ["and bought some bread."]),
    ("00:00:07,000", "00:00:08,500", ["Yes."]),
    ("00:00:09,000", "00:00:12,000", ["The teacher who lives", "in the small house"]),
    ("00:00:12,000", "00:00:14,000", ["near the river writes"]),
    ("00:00:14,500", "00:00:18,000", ["a letter to his <b>friend</b>.", "Then he sleeps."]),
]

# What the model reads of CUES: each run-on once, a mark where each cue after its first starts.
SENT = [
    "We went to the <x1>old market</x1> early in the morning <x2/> and bought some bread.",
    "Yes.",
    "The teacher who lives in the small house <x1/> near the river writes <x2/> a letter to his <x3>friend</x3>.",
    "Then he sleeps.",
]


def srt(cues):
    return "".join(f"{n}\n{start} --> {end}\n" + "\n".join(lines) + "\n\n" for n, (start, end, lines) in enumerate(cues, 1))


def cues_of(text):
    """(timing line, text lines) of each cue of an SRT file."""
    blocks = [block.split("\n") for block in text.strip("\n").split("\n\n")]
    return [(block[1], block[2:]) for block in blocks]


def visible(line):
    return re.sub(r"<[^>]*>", "", line).strip()


def translate(tmp_path, source, fake, name="in.srt", **kw):
    (tmp_path / name).write_text(source, encoding="utf-8")
    out = tmp_path / ("out." + name.split(".")[-1])
    notes = []
    translate_document(tmp_path / name, out, fake, note=notes.append, overwrite=True, **kw)
    return out.read_text(encoding="utf-8"), notes


def assert_cues_kept(source, out):
    """Cue count, timings and line counts kept; no cue empty; no line empty."""
    before, after = cues_of(source), cues_of(out)
    assert [timing for timing, _ in after] == [timing for timing, _ in before]
    assert cue_line_counts(out) == cue_line_counts(source)
    assert all(visible(line) for _, lines in after for line in lines)


@pytest.mark.parametrize("fake, script", [(upper_keeping_tags, "Latn"), (chinese_keeping_tags, "Hans")],
                         ids=["spaces", "no-spaces"])
def test_a_sentence_over_two_and_three_cues_is_sent_once_and_cut_where_the_marks_are(tmp_path, fake, script):
    recording = Recording(fake)
    source = srt(CUES)
    out, notes = translate(tmp_path, source, recording, target_script=script)
    assert recording.sent == SENT
    assert_cues_kept(source, out)
    cues = [lines for _, lines in cues_of(out)]
    if script == "Latn":  # each cue holds its own words, its tags with them
        assert cues[0] == ["T:WE WENT TO THE <i>OLD MARKET</i>", "EARLY IN THE MORNING"]
        assert cues[1] == ["AND BOUGHT SOME BREAD."]
        assert cues[3:] == [["T:THE TEACHER WHO LIVES", "IN THE SMALL HOUSE"], ["NEAR THE RIVER WRITES"],
                            ["A LETTER TO HIS <b>FRIEND</b>.", "T:THEN HE SLEEPS."]]
    else:
        assert "".join(cues[0]).count("<i>") == 1 and "".join(cues[5]).count("<b>") == 1
        assert not any(" " in visible(line) for lines in cues for line in lines)
    # a Han character for each letter: too much to read at 9 characters a second, or to fit in 16 a line
    assert notes == ([] if script == "Latn" else [
        "4 of 6 cues read faster than 17 characters per second (9 in Chinese and Japanese; 0 in the source) "
        "and 4 have a line longer than 42 characters (16): timings are kept"])


@pytest.mark.parametrize("fake, script", [(upper_losing_tags, "Latn"), (no_spaces, "Hans")], ids=["spaces", "no-spaces"])
def test_lost_marks_share_the_sentence_out_by_the_cues_lengths(tmp_path, fake, script):
    proportional = []
    source = srt(CUES)
    out, _ = translate(tmp_path, source, fake, target_script=script, proportional=proportional.append)
    assert_cues_kept(source, out)
    assert len(proportional) == 2  # the two run-on sentences, counted as formatting placed by proportion
    cues = [lines for _, lines in cues_of(out)]
    if script == "Latn":  # cut at word starts
        words = " ".join(visible(line) for lines in cues[:2] for line in lines).split()
        assert words == "T:WE WENT TO THE OLD MARKET EARLY IN THE MORNING AND BOUGHT SOME BREAD.".split()
        assert visible(cues[1][0]) in ("BREAD.", "SOME BREAD.", "BOUGHT SOME BREAD.", "AND BOUGHT SOME BREAD.")


def marks_at_the_end(texts):
    """A model that writes every cue mark at the end of its translation: the cues after the first would be empty."""
    marks = re.compile(r"<x\d+/>")
    return ["T:" + marks.sub("", t).upper() + "".join(marks.findall(t)) for t in texts]


def test_marks_that_leave_a_cue_empty_give_way_to_shares_by_length(tmp_path):
    source = srt(CUES[:2])
    out, notes = translate(tmp_path, source, marks_at_the_end)
    assert_cues_kept(source, out)
    assert notes == ["1 of 1 sentences over several cues were shared out among their cues by length: "
                     "the model's cue marks were missing or left a cue too little"]


def test_what_ends_a_run_on():
    def cue(text, start, end, speaker=None):
        return Cue([text], [], text, start, end, speaker)

    going = cue("We went to the", 1.0, 2.0)
    assert continues(going, cue("market.", 2.5, 3.0))
    assert continues(going, cue("...market.", 2.5, 3.0))
    assert continues(going, cue("5 shops.", 2.0, 3.0))
    assert not continues(going, cue("Market Street.", 2.5, 3.0))  # a capital: perhaps a new sentence
    assert not continues(going, cue("market.", 3.5, 4.0))  # more than a second later
    assert not continues(going, cue("market.", 1.5, 3.0))  # on screen at once
    assert not continues(cue("We went to the", 1.0, 2.0, "<v Ann>"), cue("market.", 2.0, 3.0, "<v Bob>"))
    assert not continues(cue("We went there.", 1.0, 2.0), cue("and then home.", 2.0, 3.0))
    assert not continues(cue("Where is it?\"", 1.0, 2.0), cue("she asked.", 2.0, 3.0))
    assert continues(cue("I was going to...", 1.0, 2.0), cue("...go home.", 2.0, 3.0))
    assert continues(cue("I was going to...", 1.0, 2.0), cue("go home.", 2.0, 3.0))
    assert not continues(cue("I was going to...", 1.0, 2.0), cue("What?", 2.0, 3.0))
    assert continues(cue("我们明天", 1.0, 2.0), cue("去北京。", 2.0, 3.0))  # no case: goes on
    assert not continues(cue("我们明天去。", 1.0, 2.0), cue("他们也去。", 2.0, 3.0))


def test_a_run_on_stops_at_four_cues_a_dialogue_cue_a_gap_and_another_voice(tmp_path):
    words = ["one", "two", "three", "four", "five", "six"]
    cues = [(f"00:00:{n:02}.000", f"00:00:{n + 1:02}.000", [f"<v Ann>the {word} dogs"]) for n, word in enumerate(words)]
    cues += [("00:00:06.000", "00:00:07.000", ["- we run", "- and they"]), ("00:00:07.000", "00:00:08.000", ["walk far"]),
             ("00:00:09.500", "00:00:10.000", ["and more"]), ("00:00:10.000", "00:00:11.000", ["<v Bob>and less."])]
    source = "WEBVTT\n\n" + "".join(f"{start} --> {end}\n" + "\n".join(lines) + "\n\n" for start, end, lines in cues)
    recording = Recording(upper_keeping_tags)
    out, _ = translate(tmp_path, source, recording, name="in.vtt")
    assert recording.sent == [
        "the one dogs <x1/> the two dogs <x2/> the three dogs <x3/> the four dogs",
        "the five dogs <x1/> the six dogs", "we run", "and they", "walk far", "and more", "and less.",
    ]
    assert out.count("-->") == len(cues) and "<v Ann>T:THE ONE DOGS</v>" in out and "<v Ann>THE FOUR DOGS</v>" in out


ASS = (
    "[Script Info]\nScriptType: v4.00+\n\n[Events]\n"
    "Format: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text\n"
    "Dialogue: 0,0:00:01.00,0:00:03.00,Default,Ann,0,0,0,,We went to the {\\i1}old market{\\i0}\\Nearly in the morning\n"
    "Comment: 0,0:00:03.00,0:00:03.10,Default,,0,0,0,,a note\n"
    "Dialogue: 0,0:00:03.20,0:00:05.00,Default,Ann,0,0,0,,and bought some bread.\n"
    "Dialogue: 0,0:00:05.00,0:00:07.00,Default,Ann,0,0,0,,Then we went\n"
    "Dialogue: 0,0:00:07.00,0:00:09.00,Default,Bob,0,0,0,,home.\n"
)


def test_ass_dialogue_of_one_actor_runs_on(tmp_path):
    recording = Recording(upper_keeping_tags)
    out, _ = translate(tmp_path, ASS, recording, name="in.ass")
    assert recording.sent == ["We went to the <x1/>old market<x2/> early in the morning <x3/> and bought some bread.",
                              "Then we went", "home."]
    lines = out.split("\n")
    assert lines[5] == "Dialogue: 0,0:00:01.00,0:00:03.00,Default,Ann,0,0,0,,T:WE WENT TO THE {\\i1}OLD MARKET{\\i0}\\NEARLY IN THE MORNING"
    assert lines[6:8] == ["Comment: 0,0:00:03.00,0:00:03.10,Default,,0,0,0,,a note",
                          "Dialogue: 0,0:00:03.20,0:00:05.00,Default,Ann,0,0,0,,AND BOUGHT SOME BREAD."]


def wordy(texts):
    """A translation three times as long as its source."""
    return [" ".join([TAG.sub("", t)] * 3) for t in texts]


def test_cues_read_too_fast_or_with_lines_too_long_are_noted_and_timings_kept(tmp_path):
    source = srt([("00:00:01,000", "00:00:02,000", ["Run to the car."]), ("00:00:03,000", "00:00:09,000", ["Yes."])])
    out, notes = translate(tmp_path, source, wordy)
    assert [timing for timing, _ in cues_of(out)] == ["00:00:01,000 --> 00:00:02,000", "00:00:03,000 --> 00:00:09,000"]
    assert notes == ["1 of 2 cues read faster than 17 characters per second (9 in Chinese and Japanese; 0 in the "
                     "source) and 1 have a line longer than 42 characters (16): timings are kept"]


def recorded(translator, monkeypatch):
    """The texts the engine is asked for, as a list that fills as it is called."""
    sent = []
    translate = translator.translate

    def recording(texts, *args, **kwargs):
        sent.extend(texts)
        return translate(texts, *args, **kwargs)

    monkeypatch.setattr(translator, "translate", recording)
    return sent


@pytest.mark.parametrize("target, script", [("fra_Latn", "Latn"), ("zho_Hans", "Hans")])
@pytest.mark.parametrize("marks", ["forced", "free"])
def test_cues_come_back_whole_with_the_real_engine(translator, tmp_path, monkeypatch, target, script, marks):
    """The translation pipeline forces the cue marks (app.session.terms); the engine alone may lose them, as the
    random model's vocabulary cannot spell everything."""
    source = srt(CUES * 2)
    (tmp_path / "in.srt").write_text(source, encoding="utf-8")
    sent = recorded(translator, monkeypatch)
    options = {"num_beams": 1, "max_length": 48}
    if marks == "forced":
        TranslationSession(translator).translate_document(DocumentJob(tmp_path / "in.srt", tmp_path / "out.srt", "eng_Latn",
                                                                      target, options=options))
    else:
        translate_document(tmp_path / "in.srt", tmp_path / "out.srt", lambda texts: translator.translate(
            texts, "eng_Latn", target, translator.default_options(**options)), target_script=script)
    out = (tmp_path / "out.srt").read_text(encoding="utf-8")
    assert_cues_kept(source, out)
    assert sent == SENT  # each distinct sentence once, the run-ons among them


@pytest.mark.parametrize("target", ["fra_Latn", "zho_Hans"])
def test_the_engine_writes_the_cue_marks_back_and_each_cue_gets_its_share(tag_translator, tmp_path, monkeypatch, target):
    """With a vocabulary that can write placeholder tags, the pipeline's constrained search puts every
    cue mark in the translation, in order: formatting is never placed by proportion, and a run-on is
    cut where the model put its marks unless that leaves a cue without a word (the chain does not
    ask for words between two marks)."""
    source = srt(CUES)
    (tmp_path / "in.srt").write_text(source, encoding="utf-8")
    sent = recorded(tag_translator, monkeypatch)
    report = JobReport()
    TranslationSession(tag_translator).translate_document(
        DocumentJob(tmp_path / "in.srt", tmp_path / "out.srt", "eng_Latn", target, options={"num_beams": 2, "max_length": 60}),
        report=report)
    out = (tmp_path / "out.srt").read_text(encoding="utf-8")
    assert sent == SENT
    assert_cues_kept(source, out)
    assert report.proportional == 0
    assert not any(note.startswith("2 of 2 sentences over several cues") for note in report.notes)


def test_a_share_without_a_letter_is_no_translation_of_a_cue_with_words():
    """A random model's `(1) (1)` where the cue had words is no translation (as for any segment):
    the translation is shared by length instead, and a share still without a letter keeps the
    source cue's text."""
    from dragoman.app.documents.segments import Run

    cues = [Cue(["We went to the old"], [Run("We went to the old")], "We went to the old", 1.0, 2.0),
            Cue(["market early."], [Run("market early.")], "market early.", 2.2, 3.0)]
    translated = [Run("Nous sommes allés"), Run("", atom=CueBoundary(1)), Run(" (1) (1) (1)")]
    shares, by_length = cue_shares(translated, cues)
    texts = ["".join(run.text for run in share) for share in shares]
    assert by_length and all(any(ch.isalpha() for ch in text) for text in texts), texts  # not "(1) (1) (1)"
    shares, _ = cue_shares([Run("(1)"), Run("", atom=CueBoundary(1)), Run(" (1) (1) (1)")], cues)
    assert shares == [cue.runs for cue in cues]  # nothing to show in either: the source cues
