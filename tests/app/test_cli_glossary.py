"""`dragoman translate --glossary FILE` and `--no-protect`: the terms that reach the engine, and bad files."""

import io
import re
import sys

import pytest

from dragoman.app.cli import main
from dragoman.engine.translator import Translator


def translate_args(checkpoint, *more):
    return ["translate", "--model", str(checkpoint), "--from", "eng_Latn", "--to", "fra_Latn", "--device", "cpu",
            "--dtype", "float32", "--beams", "1", "--max-length", "24", *more]


@pytest.fixture
def engine_terms(monkeypatch):
    """The texts and terms of each call into the engine, which translates as it would."""
    calls = []
    submit = Translator.submit

    def recording(self, request):
        calls.append((list(request.texts), request.terms))
        return submit(self, request)

    monkeypatch.setattr(Translator, "submit", recording)
    return calls


def run(args, stdin, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode()), encoding="utf-8"))
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_glossaries_and_protected_spans_reach_the_engine_as_terms(tiny_checkpoint, tmp_path, engine_terms,
                                                                   monkeypatch, capsys):
    csv = tmp_path / "ui.csv"
    csv.write_text("source,target\nsave,enregistrer\n", encoding="utf-8")
    tbx = tmp_path / "terms.tbx"
    tbx.write_text('<?xml version="1.0"?><martif type="TBX"><text><body><termEntry>'
                   '<langSet xml:lang="en"><tig><term>report</term></tig></langSet>'
                   '<langSet xml:lang="fr"><tig><term>rapport</term></tig></langSet>'
                   '</termEntry></body></text></martif>', encoding="utf-8")
    code, out, err = run(translate_args(tiny_checkpoint, "--glossary", str(csv), "--glossary", str(tbx)),
                         "Save the report.\nIt weighs 5 kg.\nNothing here.\n", monkeypatch, capsys)
    assert code == 0, err
    assert len(out.splitlines()) == 3
    assert engine_terms == [(["Save the report.", "It weighs (1).", "Nothing here."],  # 5 kg as a mark, put back
                             [["enregistrer", "rapport"], ["(1)"], []])]
    assert out.splitlines()[1].count("5 kg") == 1

    engine_terms.clear()
    code, out, err = run(translate_args(tiny_checkpoint, "--no-protect"), "It weighs 5 kg.\n", monkeypatch, capsys)
    assert code == 0, err
    assert engine_terms == [(["It weighs 5 kg."], [[]])]


@pytest.mark.parametrize("name, content, problem", [
    ("bad.csv", "source,target\nsave\n", "bad.csv: line 2: the target term is empty"),
    ("bad.tsv", "save\tenregistrer\nx\ty\tz\tw\tv\n",
     "bad.tsv: line 2: 5 cells, but at most 4 (source, target, source_lang, target_lang)"),
    ("bad.tbx", "<martif><text><body><termEntry><langSet><tig><term>a</term></tig></langSet>"
                "</termEntry></body></text></martif>", "bad.tbx: line 1: <langSet> has no xml:lang"),
])
def test_a_bad_glossary_is_one_line_naming_the_file_and_line_and_exit_code_2(
        tmp_path, monkeypatch, capsys, engine_terms, name, content, problem):
    (tmp_path / name).write_text(content, encoding="utf-8")
    # the model folder does not exist: the glossary is refused before anything loads
    code, out, err = run(translate_args(tmp_path / "no-model", "--glossary", str(tmp_path / name)), "Hello.\n",
                         monkeypatch, capsys)
    assert code == 2
    assert out == ""
    assert err.splitlines() == [f"dragoman: error: --glossary {problem}"]
    assert engine_terms == []


def test_a_missing_glossary_is_named(tmp_path, monkeypatch, capsys):
    code, _, err = run(translate_args(tmp_path, "--glossary", str(tmp_path / "none.csv")), "", monkeypatch, capsys)
    assert code == 2
    assert len(err.splitlines()) == 1 and "none.csv" in err


def test_documents_get_their_tags_as_terms_and_the_proportional_count_is_said(
        tiny_checkpoint, tmp_path, monkeypatch, capsys):
    calls = []

    def losing_tags(self, texts, *args, terms=None, **kwargs):  # as a model that drops the tags would
        calls.append(terms)
        return [re.sub(r"</?x\d+/?>", "", t).upper() for t in texts]

    monkeypatch.setattr(Translator, "translate", losing_tags)
    doc = tmp_path / "a.md"
    doc.write_text("Click **here** to go on.\n\nPress *Save* and **wait** a bit.\n\nPlain words.\n", encoding="utf-8")
    code, out, err = run(translate_args(tiny_checkpoint, str(doc)), "", monkeypatch, capsys)
    assert code == 0, err
    assert out.splitlines() == [str(tmp_path / "a.fra_Latn.md")]
    # the second sentence's four tags might not all fit in 24 positions: none is forced
    assert calls == [[[("<x1>", None, "</x1>")], [], []]]
    assert f"dragoman: {doc}: formatting placed by proportion in 2 sentences (the translation lost their tags)" in err

    def keeping_tags(self, texts, *args, terms=None, **kwargs):
        calls.append(terms)
        return list(texts)

    calls.clear()
    monkeypatch.setattr(Translator, "translate", keeping_tags)
    code, out, err = run(translate_args(tiny_checkpoint, "--overwrite", "--max-length", "40", str(doc)), "",
                         monkeypatch, capsys)
    assert code == 0, err
    assert calls == [[[("<x1>", None, "</x1>")], [("<x1>", None, "</x1>", "<x2>", None, "</x2>")], []]]
    assert "proportion" not in err
