"""Doubts about translations (app/session/confidence.py), and how the CLI reports them."""

import io
import json
import sys
import threading
import time

import pytest

from dragoman.app.cli import main
from dragoman.app.session.confidence import LOW_SCORE, DoubtsAlongside, doubts, letters, longest_loop, units

SOURCE = "The weather is lovely today in the old town."


@pytest.mark.parametrize("items, repeats", [
    ("a b c d".split(), 1), ("a a b".split(), 2), ("x a b a b a b y".split(), 3),
    ("a b c a b c a b c a b c".split(), 4), (list("哈哈哈哈哈"), 5), ("a b a c a b".split(), 1),
])
def test_the_longest_loop_counts_back_to_back_runs_of_up_to_four_items(items, repeats):
    assert longest_loop(items) == repeats


@pytest.mark.parametrize("text", [
    "Héllo, wörld 1984!", "नमस्ते दुनिया", "مرحبا بالعالم ١٢٣", "你好，世界。", "𝐀𝐁 𠀀 😀 x", "", "\u0301a\u200b",
])
def test_letters_and_units_count_every_plane_by_category(text):
    """The translate tables of the first plane give what a character-by-character look at each
    category gives, beyond it too (a mathematical letter, a CJK extension, an emoji)."""
    import unicodedata

    def category(ch: str) -> str:
        return unicodedata.category(ch)[0]

    assert letters(text) == sum(1 for ch in text if category(ch) in "LM")
    words = ["".join(ch for ch in w if category(ch) in "LMN") for w in text.casefold().split()]
    assert units(text, "Latn") == [w for w in words if w]
    assert units(text, "Hans") == [ch for ch in text.casefold() if category(ch) in "LMN"]


@pytest.mark.parametrize("translation, target, reasons", [
    ("Il fait très beau aujourd'hui dans la vieille ville.", "fra_Latn", []),
    ("今天老城的天气很好。", "zho_Hans", []),  # few characters, as Chinese writes it
    ("Le temps, le temps, le temps est beau.", "fra_Latn", ["the same words 3 times in a row"]),
    ("天天天天气很好。", "zho_Hans", ["the same words 4 times in a row"]),
    ("Beau.", "fra_Latn", ["much shorter than the source"]),
    ("Il fait beau. " * 12, "fra_Latn", ["the same words 12 times in a row", "much longer than the source"]),
    (SOURCE, "fra_Latn", ["the source, not translated"]),
    ("Das Wetter ist heute in der Altstadt wunderschön.", "fra_Latn", ["looks like German, not French"]),
])
def test_each_sign_of_a_failed_translation_is_said(translation, target, reasons):
    assert doubts(SOURCE, translation, "eng_Latn", target) == reasons


def test_a_low_score_is_a_doubt_and_an_unknown_score_is_none():
    good = "Il fait très beau aujourd'hui dans la vieille ville."
    assert doubts(SOURCE, good, "eng_Latn", "fra_Latn", -1.6) == ["the model was unsure of it (score -1.60)"]
    assert doubts(SOURCE, good, "eng_Latn", "fra_Latn", LOW_SCORE) == []
    assert doubts(SOURCE, good, "eng_Latn", "fra_Latn", -0.4) == doubts(SOURCE, good, "eng_Latn", "fra_Latn") == []


def test_what_the_source_repeats_or_too_short_a_source_is_not_doubted():
    assert doubts("Ha ha ha, very very very funny.", "Ha ha ha, très très très drôle.", "eng_Latn", "fra_Latn") == []
    assert doubts("Chapter 1", "Chapter 1", "eng_Latn", "fra_Latn") == []  # a heading or a name proves nothing
    assert doubts("今天老城的天气很好，我们去散步吧。", "The weather in the old town is lovely today, let us go for a walk.",
                  "zho_Hans", "eng_Latn") == []


def run_cli(args, stdin_text, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin_text.encode()), encoding="utf-8"))
    code = main(args)
    return code, *capsys.readouterr()


def read_report(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


LINES = ["The quick brown fox jumps over the lazy dog.", "", "Ein kurzer Satz, aber nicht zu kurz.",
         "We went to the market early and bought some bread."]


def test_the_report_lists_every_doubtful_line_of_stdin(tiny_checkpoint, translator, tmp_path, monkeypatch, capsys):
    """The random test model writes gibberish, so most of its translations look wrong: each entry
    must be what `doubts` says of that line's sentence, and no doubtful sentence may be missing."""
    lines = LINES
    args = ["translate", "--model", str(tiny_checkpoint), "--from", "eng_Latn", "--to", "fra_Latn", "--device", "cpu",
            "--dtype", "float32", "--max-length", "24", "--report", str(tmp_path / "report.jsonl")]
    code, out, err = run_cli(args, "\n".join(lines) + "\n", monkeypatch, capsys)
    assert code == 0, err
    translations = out.split("\n")[:-1]
    scores = [t.score for t in translator.translate_full(lines, "eng_Latn", "fra_Latn",
                                                         translator.default_options(max_length=24))]
    expected = [{"line": n + 1, "source": line, "translation": translations[n], "score": scores[n],
                 "reasons": doubts(line, translations[n], "eng_Latn", "fra_Latn", scores[n])}
                for n, line in enumerate(lines) if line and doubts(line, translations[n], "eng_Latn", "fra_Latn", scores[n])]
    assert read_report(tmp_path / "report.jsonl") == expected
    assert expected, "the random model's gibberish should look wrong somewhere"
    assert f"stdin: {len(expected)} translation" in err and ("look wrong: see" in err or "looks wrong: see" in err)


def test_the_report_names_each_documents_doubtful_sentences(tiny_checkpoint, translator, tmp_path, monkeypatch,
                                                             capsys):
    """With the engine's score where it gave one: b.txt's sentence comes from the cache, which keeps none."""
    sentences = ["The quick brown fox jumps over the lazy dog.", "We went to the market early and bought bread."]
    (tmp_path / "a.txt").write_text("\n".join(sentences) + "\n")
    (tmp_path / "b.txt").write_text(sentences[1] + "\n")
    args = ["translate", "--model", str(tiny_checkpoint), "--from", "eng_Latn", "--to", "fra_Latn", "--device", "cpu",
            "--dtype", "float32", "--max-length", "24", "--report", str(tmp_path / "report.jsonl"),
            str(tmp_path / "a.txt"), str(tmp_path / "b.txt")]
    scores = {"a": [t.score for t in translator.translate_full(sentences, "eng_Latn", "fra_Latn",
                                                               translator.default_options(max_length=24))],
              "b": [None]}
    code, out, err = run_cli(args, "", monkeypatch, capsys)
    assert code == 0, err
    translated = {"a": (tmp_path / "a.fra_Latn.txt").read_text().splitlines(),
                  "b": (tmp_path / "b.fra_Latn.txt").read_text().splitlines()}
    expected = []
    for name, sources in (("a", sentences), ("b", sentences[1:])):
        for number, (source, translation, score) in enumerate(zip(sources, translated[name], scores[name]), 1):
            if reasons := doubts(source, translation, "eng_Latn", "fra_Latn", score):
                expected.append({"file": str(tmp_path / f"{name}.txt"), "sentence": number, "source": source,
                                 "translation": translation, "score": score, "reasons": reasons})
    assert read_report(tmp_path / "report.jsonl") == expected and expected


def test_stdin_without_a_report_says_nothing_on_stderr(tiny_checkpoint, monkeypatch, capsys):
    """The same lines as above, some of whose translations look wrong: a pipe's stderr stays clean."""
    args = ["translate", "--model", str(tiny_checkpoint), "--from", "eng_Latn", "--to", "fra_Latn", "--device", "cpu",
            "--dtype", "float32", "--max-length", "24"]
    code, out, err = run_cli(args, "\n".join(LINES) + "\n", monkeypatch, capsys)
    assert code == 0 and len(out.split("\n")) == len(LINES) + 1 and err == ""


def test_nothing_and_a_word_sixty_times_are_doubted_even_for_a_short_source():
    assert doubts("Hello", " ".join(["bonjour"] * 60), "eng_Latn", "fra_Latn") == ["the same words 60 times in a row"]
    assert doubts(SOURCE, "", "eng_Latn", "fra_Latn") == ["nothing came out"]
    assert doubts("Yes", " ", "eng_Latn", "fra_Latn") == ["nothing came out"]
    assert doubts("OK", "D'accord", "eng_Latn", "fra_Latn") == []  # short, and rightly longer
    assert doubts("42", "", "eng_Latn", "fra_Latn") == []  # no letters: nothing to lose


def test_doubts_alongside_judge_each_sentence_as_doubts_does_and_let_go_of_the_interpreter_after_each(monkeypatch):
    untranslated = "The bridge over the river is closed for repairs until the spring."
    pairs = [(SOURCE, "Il fait très beau aujourd'hui dans la vieille ville."), (untranslated, untranslated),
             ("Chapter 1", "Chapter 1")]
    real_sleep, yields = time.sleep, []

    def sleep(seconds: float) -> None:
        if threading.current_thread().name == "dragoman-doubts":
            yields.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", sleep)
    judge = DoubtsAlongside("eng_Latn", "fra_Latn")
    for sentence, translation in pairs:
        judge.add(sentence, translation, -0.5)
    judged = judge.close()
    assert judged == {s: doubts(s, t, "eng_Latn", "fra_Latn", -0.5) for s, t in pairs}
    assert judged[untranslated] != [] and judged[SOURCE] == []
    assert yields == [0] * len(pairs)  # the engine's thread gets the interpreter at once, not after 5 ms
