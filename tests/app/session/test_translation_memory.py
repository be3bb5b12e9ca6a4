"""The translation memory (app/session/translation_memory.py): TMX in and out, exact reuse, and its use by the CLI,
documents and the window's engine thread."""

import io
import os
import sys

import pytest
from lxml import etree

from dragoman.app.cli import main
from dragoman.app.documents import DocumentError
from dragoman.app.session.translation_memory import MAX_SEGMENT, TranslationMemory, flores_code, language_tag

# As a translation tool writes one: a header naming the source, inline formatting codes, a
# highlighted run, three languages in one unit, and one language NLLB does not have (Klingon).
TMX = """<?xml version="1.0" encoding="UTF-16"?>
<tmx version="1.4">
  <header creationtool="OmegaT" creationtoolversion="6.0" segtype="sentence" o-tmf="OmegaT TMX"
          adminlang="EN-US" srclang="EN-US" datatype="plaintext"/>
  <body>
    <tu>
      <tuv xml:lang="EN-US"><seg>Press <bpt i="1" x="1">&lt;b&gt;</bpt>Save<ept i="1">&lt;/b&gt;</ept> now.</seg></tuv>
      <tuv xml:lang="FR-FR"><seg>Appuyez sur <bpt i="1" x="1">&lt;b&gt;</bpt>Enregistrer<ept i="1">&lt;/b&gt;</ept> maintenant.</seg></tuv>
    </tu>
    <tu>
      <tuv xml:lang="en"><seg>The <hi type="x-italic">old</hi> town.</seg></tuv>
      <tuv xml:lang="fr"><seg>La <hi type="x-italic">vieille</hi>   ville.</seg></tuv>
      <tuv xml:lang="zh-TW"><seg>老城。</seg></tuv>
      <tuv xml:lang="tlh"><seg>veng qan.</seg></tuv>
    </tu>
  </body>
</tmx>
"""


@pytest.fixture
def memory(tmp_path):
    store = TranslationMemory(tmp_path / "memory.sqlite3")
    yield store
    store.close()


@pytest.mark.parametrize("tag, code", [
    ("en", "eng_Latn"), ("EN-us", "eng_Latn"), ("fr-FR", "fra_Latn"), ("pt-BR", "por_Latn"),
    ("zh-CN", "zho_Hans"), ("zh-TW", "zho_Hant"), ("zh-Hant", "zho_Hant"), ("ar-EG", "arb_Arab"),
    ("ace-Arab", "ace_Arab"), ("fra_Latn", "fra_Latn"), ("ckb", "ckb_Arab"),
    ("ace", None), ("sr-Latn", None), ("tlh", None), ("", None),  # ambiguous; a script NLLB lacks; unknown
])
def test_language_tags_map_to_the_flores_code_they_stand_for(tag, code):
    assert flores_code(tag) == code


def test_a_tools_tmx_is_imported_without_its_formatting_codes(memory, tmp_path):
    (tmp_path / "tool.tmx").write_bytes(TMX.encode("utf-16"))
    report = memory.import_tmx(tmp_path / "tool.tmx")
    assert (report.added, report.skipped) == (3, 1)  # en->fr twice, en->zh_Hant; the Klingon variant
    found = memory.find("eng_Latn", "fra_Latn", "", ["Press Save now.", "The old town.", "Something else."])
    assert found == {"Press Save now.": "Appuyez sur Enregistrer maintenant.", "The old town.": "La vieille ville."}
    assert memory.find("eng_Latn", "zho_Hant", "", ["The old town."]) == {"The old town.": "老城。"}
    assert memory.find("fra_Latn", "eng_Latn", "", ["La vieille ville."]) == {}  # the header names the source


def test_without_a_source_language_every_direction_is_imported(memory, tmp_path):
    (tmp_path / "all.tmx").write_text(TMX.replace('srclang="EN-US"', 'srclang="*all*"'), encoding="utf-16")
    memory.import_tmx(tmp_path / "all.tmx")
    assert memory.find("fra_Latn", "eng_Latn", "", ["La vieille ville."]) == {"La vieille ville.": "The old town."}
    assert memory.find("zho_Hant", "fra_Latn", "", ["老城。"]) == {"老城。": "La vieille ville."}


def test_an_entry_of_the_context_wins_and_others_see_only_the_imported_one(memory):
    memory.add("eng_Latn", "fra_Latn", {"Hello.": "Bonjour (importé)."})
    memory.add("eng_Latn", "fra_Latn", {"Hello.": "Salut !"}, context="model A")
    assert memory.find("eng_Latn", "fra_Latn", "model A", ["Hello."]) == {"Hello.": "Salut !"}
    assert memory.find("eng_Latn", "fra_Latn", "model B", ["Hello."]) == {"Hello.": "Bonjour (importé)."}
    assert memory.find("eng_Latn", "deu_Latn", "model A", ["Hello."]) == {}
    assert memory.find("eng_Latn", "fra_Latn", "model A", ["hello."]) == {}  # exact, not case-folded


def test_export_writes_tmx_that_imports_back_to_the_same_entries(memory, tmp_path):
    memory.add("eng_Latn", "fra_Latn", {"A <b> & c.": "Un <b> & c.", "Two.": "Deux."})
    memory.add("eng_Latn", "zho_Hans", {"Two.": "二。"}, context="model A")
    assert memory.export_tmx(tmp_path / "out.tmx") == 3
    tree = etree.parse(str(tmp_path / "out.tmx"))
    assert tree.getroot().get("version") == "1.4" and tree.find("header").get("srclang") == "*all*"
    assert {t.get("{http://www.w3.org/XML/1998/namespace}lang") for t in tree.iter("tuv")} == {"en-Latn", "fr-Latn", "zh-Hans"}
    again = TranslationMemory(tmp_path / "again.sqlite3")
    again.import_tmx(tmp_path / "out.tmx")
    assert again.find("eng_Latn", "fra_Latn", "", ["A <b> & c.", "Two."]) == {"A <b> & c.": "Un <b> & c.", "Two.": "Deux."}
    assert again.find("eng_Latn", "zho_Hans", "", ["Two."]) == {"Two.": "二。"}  # imported: for any model
    assert memory.export_tmx(tmp_path / "fr.tmx", "eng_Latn", "fra_Latn") == 2
    assert etree.parse(str(tmp_path / "fr.tmx")).find("header").get("srclang") == language_tag("eng_Latn") == "en-Latn"
    again.close()


@pytest.mark.parametrize("content, message", [
    ('<?xml version="1.0"?><!DOCTYPE tmx [<!ENTITY a "aaaa">]><tmx><body/></tmx>', "declares XML entities"),
    ("<tmx><body><tu>", "is not well-formed XML"),
    ("<xliff version='1.2'/>", "is not a TMX file (its root element is <xliff>)"),
    (f"<tmx><body><tu><tuv xml:lang='en'><seg>{'a' * (MAX_SEGMENT + 1)}</seg></tuv></tu></body></tmx>",
     "translation unit 1 has a segment of 10,001 characters"),
])
def test_bad_tmx_files_are_refused_in_one_line_naming_the_file(memory, tmp_path, content, message):
    (tmp_path / "bad.tmx").write_text(content, encoding="utf-8")
    with pytest.raises(DocumentError, match="^bad.tmx") as refusal:
        memory.import_tmx(tmp_path / "bad.tmx")
    assert message in str(refusal.value) and "\n" not in str(refusal.value)
    assert memory.pairs() == []


def run_cli(args, stdin_text, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin_text.encode()), encoding="utf-8"))
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_the_cli_imports_lists_exports_and_translates_with_the_memory(tiny_checkpoint, tmp_path, monkeypatch, capsys):
    translate = ["translate", "--model", str(tiny_checkpoint), "--from", "eng_Latn", "--to", "fra_Latn",
                 "--device", "cpu", "--dtype", "float32", "--max-length", "20"]
    lines = "The old town. A short sentence.\nPress Save now.\nA short sentence.\n"
    code, before, err = run_cli(translate, lines, monkeypatch, capsys)
    assert code == 0, err
    (tmp_path / "tool.tmx").write_bytes(TMX.encode("utf-16"))
    code, out, err = run_cli(["memory", "import", str(tmp_path / "tool.tmx")], "", monkeypatch, capsys)
    assert code == 0 and out.endswith("tool.tmx: 3 translations imported (1 in languages NLLB does not have, or empty, skipped)\n")
    code, out, _ = run_cli(["memory", "list"], "", monkeypatch, capsys)
    assert "3 translations in" in out and "eng_Latn -> fra_Latn  2\n" in out and "eng_Latn -> zho_Hant  1\n" in out
    code, after, err = run_cli(translate, lines, monkeypatch, capsys)
    assert code == 0, err
    first, second, third = after.split("\n")[:3]
    assert first == "La vieille ville. " + third and third == before.split("\n")[2]  # the rest from the model
    assert second == "Appuyez sur Enregistrer maintenant." and before.split("\n")[:2] != [first, second]
    code, out, _ = run_cli(["memory", "export", str(tmp_path / "out.tmx"), "--from", "eng_Latn", "--to", "zho_Hant"],
                           "", monkeypatch, capsys)
    assert code == 0 and out == f"{tmp_path / 'out.tmx'}: 1 translation exported\n"
    code, _, err = run_cli(["memory", "import", str(tmp_path / "missing.tmx")], "", monkeypatch, capsys)
    assert code == 1 and err.startswith("dragoman: error: ") and "missing.tmx" in err and err.count("\n") == 1


def test_a_document_takes_remembered_sentences_and_counts_them(tiny_checkpoint, tmp_path, monkeypatch, capsys):
    from dragoman.app.session.jobs import open_memory

    memory = open_memory()
    memory.add("eng_Latn", "fra_Latn", {"The old town.": "La vieille ville."})
    memory.close()
    (tmp_path / "in.txt").write_text("The old town.\nA short sentence.\n")
    code, out, err = run_cli(["translate", "--model", str(tiny_checkpoint), "--from", "eng_Latn", "--to", "fra_Latn",
                              "--device", "cpu", "--max-length", "20", str(tmp_path / "in.txt")], "", monkeypatch, capsys)
    assert code == 0, err
    lines = (tmp_path / "in.fra_Latn.txt").read_text().split("\n")
    assert lines[0] == "La vieille ville." and lines[1] and lines[1] != "A short sentence."
    assert "1 sentence translated, 1 from the translation memory" in err


def tmx(*units: str, doctype: str = "") -> str:
    return (f'<?xml version="1.0"?>{doctype}<tmx version="1.4"><header srclang="en"/><body>'
            + "".join(units) + "</body></tmx>")


def unit(english: str, french: str) -> str:
    return f'<tu><tuv xml:lang="en"><seg>{english}</seg></tuv><tuv xml:lang="fr"><seg>{french}</seg></tuv></tu>'


def test_comments_and_processing_instructions_in_a_segment_are_left_out(memory, tmp_path):
    (tmp_path / "odd.tmx").write_text(tmx(unit("Hello <!-- a note --> world<?tool mark?> again.", "<?x y?>Bonjour.")))
    assert memory.import_tmx(tmp_path / "odd.tmx").added == 1
    assert memory.find("eng_Latn", "fra_Latn", "", ["Hello world again."]) == {"Hello world again.": "Bonjour."}


@pytest.mark.parametrize("content, message", [
    (tmx(unit("Fine.", "Bien."), unit("Hello &undefined; world.", "Bonjour."), doctype='<!DOCTYPE tmx SYSTEM "tmx14.dtd">'),
     "bad.tmx: translation unit 2 refers to the entity &undefined;, which the file does not define"),
    (tmx(unit("Hello &undefined; world.", "Bonjour.")), "bad.tmx is not well-formed XML (Entity 'undefined' not defined"),
    (tmx(unit("Fine.", "Bien."), unit("Many." + "<hi/>" * 10_001, "Beaucoup.")),
     "bad.tmx: translation unit 2 holds over 10,000 elements"),
])
def test_a_segment_the_memory_cannot_read_is_one_line_and_nothing_is_imported(memory, tmp_path, content, message):
    (tmp_path / "bad.tmx").write_text(content)
    with pytest.raises(DocumentError) as refusal:
        memory.import_tmx(tmp_path / "bad.tmx")
    assert str(refusal.value).startswith(message) and "\n" not in str(refusal.value)
    assert memory.pairs() == []  # the units before the bad one are not kept either


def test_import_reads_a_stream_and_lets_go_what_it_read(memory, tmp_path, monkeypatch):
    from dragoman.app.session import translation_memory

    monkeypatch.setattr(translation_memory, "IMPORT_BATCH", 1_000)
    empty = "<prop/>" * 50_000  # millions of empty elements as hostile files hold them, in fewer
    units = [unit(f"Sentence {i}.", f"Phrase {i}.") for i in range(5_000)]
    (tmp_path / "big.tmx").write_text(tmx(*units, "<tu/>" * 50_000).replace("<body>", "<body>" + empty))
    held = []
    real_iterparse = translation_memory.iterparse_xml

    def watching(path):
        for event, element in real_iterparse(path):
            body = element.getroottree().getroot().find("body")
            held.append(len(body) if body is not None else 0)
            yield event, element

    monkeypatch.setattr(translation_memory, "iterparse_xml", watching)
    assert memory.import_tmx(tmp_path / "big.tmx").added == 5_000
    assert max(held) < 10_000  # of 105,000: what lxml parsed ahead of the reader, never the whole file
    assert memory.find("eng_Latn", "fra_Latn", "", ["Sentence 4999."]) == {"Sentence 4999.": "Phrase 4999."}
    monkeypatch.setattr(translation_memory, "MAX_ENTRIES", 4_999)
    with pytest.raises(DocumentError, match="^big.tmx holds more than 4,999 translations$"):
        TranslationMemory(tmp_path / "other.sqlite3").import_tmx(tmp_path / "big.tmx")


def test_export_streams_to_a_temporary_and_cleans_what_a_killed_export_left(memory, tmp_path):
    from dragoman.app.documents import create_temporary

    memory.add("eng_Latn", "fra_Latn", {f"Sentence {i}.": f"Phrase {i}." for i in range(5_000)})
    out = tmp_path / "out.tmx"
    left = create_temporary(out)  # as an export killed midway leaves it, under a process that is gone
    dead = left.with_name(left.name.replace(f"-{os.getpid()}-", "-999999999-"))
    left.rename(dead)
    assert memory.export_tmx(out) == 5_000
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".part") == []
    again = TranslationMemory(tmp_path / "again.sqlite3")
    assert again.import_tmx(out).added == 10_000  # srclang *all*: each language to the other
    assert again.find("eng_Latn", "fra_Latn", "", ["Sentence 7."]) == {"Sentence 7.": "Phrase 7."}
    again.close()
