"""Glossary files (CSV, TSV, TBX) as written on disk in every encoding allowed, refused in one line
when bad, and their terms found in sentences."""

import pytest

from dragoman.app.session.glossary import (
    MAX_ENTRIES,
    MAX_TBX_MARKUP,
    MAX_TERM_CHARS,
    Entry,
    GlossaryError,
    TermMatcher,
    language_code,
    read_glossary,
)


def write(tmp_path, name, text, encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return path


def pairs(glossary):
    return [(e.source, e.target, e.source_lang, e.target_lang, e.line) for e in glossary.entries]


# -- CSV and TSV ------------------------------------------------------------------------------------

@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16", "utf-16-be-bom", "utf-32"])
def test_a_two_column_csv_reads_alike_in_every_encoding(tmp_path, encoding):
    text = 'cat,chat\n"New York","New York"\n\nmachine learning,apprentissage automatique\r\n"a, b","« a, b »"\n'
    if encoding == "utf-16-be-bom":
        path = tmp_path / "g.csv"
        path.write_bytes(b"\xfe\xff" + text.encode("utf-16-be"))
    else:
        path = write(tmp_path, "g.csv", text, encoding)
    assert pairs(read_glossary(path)) == [
        ("cat", "chat", None, None, 1),
        ("New York", "New York", None, None, 2),
        ("machine learning", "apprentissage automatique", None, None, 4),
        ("a, b", "« a, b »", None, None, 5),
    ]


def test_a_header_names_the_columns_in_any_order_and_languages_are_resolved(tmp_path):
    path = write(tmp_path, "g.tsv", "target_lang\tsource\ttarget\tsource_lang\nfr\tcat\tchat\ten-GB\n"
                                    "zho_Hant\tcomputer\t電腦\teng_Latn\nde\tdog\tHund\n")
    assert pairs(read_glossary(path)) == [
        ("cat", "chat", "eng_Latn", "fra_Latn", 2),
        ("computer", "電腦", "eng_Latn", "zho_Hant", 3),
        ("dog", "Hund", None, "deu_Latn", 4),
    ]


def test_columns_a_header_does_not_know_are_read_past(tmp_path):
    path = write(tmp_path, "g.csv", "Source,Notes,Target\ncat,animal,chat\ndog\n")
    with pytest.raises(GlossaryError, match="g.csv: line 3: the target term is empty"):
        read_glossary(path)
    path = write(tmp_path, "g.csv", "Source,Notes,Target\ncat,animal,chat\n")
    assert pairs(read_glossary(path)) == [("cat", "chat", None, None, 2)]


def test_a_header_of_two_languages_gives_every_entry_its_pair(tmp_path):
    path = write(tmp_path, "g.csv", "eng_Latn;fra_Latn\ncat;chat\nsmall cat;petit chat\n")
    glossary = read_glossary(path)
    assert pairs(glossary) == [("cat", "chat", "eng_Latn", "fra_Latn", 2), ("small cat", "petit chat", "eng_Latn", "fra_Latn", 3)]
    assert glossary.matcher("eng_Latn", "fra_Latn").targets("A small cat.") == ["petit chat"]
    assert glossary.matcher("eng_Latn", "deu_Latn").targets("A small cat.") == []


def test_a_first_row_of_words_is_an_entry_not_a_header(tmp_path):
    assert pairs(read_glossary(write(tmp_path, "g.csv", "cat,dog\n")))[0][:2] == ("cat", "dog")


def test_whitespace_inside_terms_is_one_space(tmp_path):
    assert pairs(read_glossary(write(tmp_path, "g.tsv", "  New \u00a0 York \tNueva   York\n")))[0][:2] == ("New York", "Nueva York")


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("g.csv", "cat,chat\ndog,chien,fr,de,x\n", "g.csv: line 2: 5 cells, but at most 4"),
        ("g.csv", "cat,chat\ndog,\n", "g.csv: line 2: the target term is empty"),
        ("g.csv", "cat\n", "g.csv: line 1: the target term is empty"),
        ("g.csv", "cat,chat\n\n\ndog,chien,xx_Yyyy\n", "g.csv: line 4: unknown language 'xx_Yyyy'"),
        ("g.csv", 'cat,chat\n"dog\nhound",chien\n', "g.csv: line 2: the source term holds a line break"),
        ("g.csv", 'cat,chat\n"dog"x,chien\n', "g.csv: line 2: not a valid table row"),
        ("g.csv", "cat,chat\n" + "a" * (MAX_TERM_CHARS + 1) + ",b\n",
         f"g.csv: line 2: the source term is longer than {MAX_TERM_CHARS} characters"),
        ("g.csv", "source,target\n", "g.csv: no entries"),
        ("g.csv", "", "g.csv: the file is empty"),
        ("g.csv", "cat,chat\n" * (MAX_ENTRIES + 1), f"g.csv: line {MAX_ENTRIES + 1}: more than {MAX_ENTRIES:,} entries"),
    ],
)
def test_bad_tables_are_refused_in_one_line_naming_file_and_line(tmp_path, name, content, message):
    path = write(tmp_path, name, content)
    with pytest.raises(GlossaryError) as error:
        read_glossary(path)
    assert str(error.value).startswith(message)
    assert "\n" not in str(error.value)


def test_a_legacy_encoding_is_read_and_binary_content_refused(tmp_path):
    path = tmp_path / "g.csv"
    path.write_bytes("cat,chat\ncoffee shop,café très élégant\nsummer,été\n".encode("cp1252"))
    assert [e.target for e in read_glossary(path).entries] == ["chat", "café très élégant", "été"]
    path.write_bytes(b"cat\x00,chat\n")
    with pytest.raises(GlossaryError, match="g.csv: binary content"):
        read_glossary(path)


def test_a_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path, monkeypatch):
    import dragoman.app.session.glossary

    monkeypatch.setattr(dragoman.app.session.glossary, "MAX_FILE_BYTES", 100)
    path = write(tmp_path, "g.csv", "cat,chat\n" * 20)
    with pytest.raises(GlossaryError, match="g.csv: too large"):
        read_glossary(path)


def test_reading_leaves_the_file_as_it_was(tmp_path):
    path = write(tmp_path, "g.csv", "cat,chat\n")
    before = path.stat().st_mtime_ns, path.read_bytes()
    read_glossary(path)
    assert (path.stat().st_mtime_ns, path.read_bytes()) == before


# -- TBX -----------------------------------------------------------------------------------------

TBX_BASIC = """<?xml version="1.0" encoding="UTF-8"?>
<martif type="TBX-Basic" xml:lang="en">
  <martifHeader><fileDesc><sourceDesc><p>test</p></sourceDesc></fileDesc></martifHeader>
  <text><body>
    <termEntry id="c1">
      <descrip type="subjectField">animals</descrip>
      <langSet xml:lang="en"><tig><term>cat</term></tig><tig><term>house cat</term></tig></langSet>
      <langSet xml:lang="de"><ntig><termGrp><term>Hauskatze</term></termGrp>
        <termNote type="administrativeStatus">deprecatedTerm-admn-sts</termNote></ntig></langSet>
      <langSet xml:lang="fr"><tig><term>chat</term><termNote type="partOfSpeech">noun</termNote></tig></langSet>
      <langSet xml:lang="tlh"><tig><term>vIghro'</term></tig></langSet>
    </termEntry>
    <termEntry id="c2">
      <langSet xml:lang="en-US"><ntig><termGrp><term>computer</term></termGrp></ntig></langSet>
      <langSet xml:lang="zh-TW"><ntig><termGrp><term>電<hi>腦</hi></term></termGrp></ntig></langSet>
    </termEntry>
  </body></text>
</martif>
"""

TBX_3 = """<?xml version="1.0" encoding="UTF-8"?>
<tbx type="TBX-Core" style="dca" xml:lang="en" xmlns="urn:iso:std:iso:30042:ed-2">
  <tbxHeader><fileDesc><sourceDesc><p>test</p></sourceDesc></fileDesc></tbxHeader>
  <text><body>
    <conceptEntry id="c1">
      <langSec xml:lang="de"><termSec><term>Katze</term></termSec></langSec>
      <langSec xml:lang="es"><termSec><term>gato</term></termSec></langSec>
    </conceptEntry>
  </body></text>
</tbx>
"""


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16"])
def test_tbx_basic_gives_each_pair_of_a_concepts_languages(tmp_path, encoding):
    text = TBX_BASIC if encoding == "utf-8" else TBX_BASIC.replace('encoding="UTF-8"', 'encoding="UTF-16"')
    glossary = read_glossary(write(tmp_path, "g.tbx", text, encoding))
    entries = pairs(glossary)
    assert ("cat", "chat", "eng_Latn", "fra_Latn", 5) in entries
    assert ("house cat", "chat", "eng_Latn", "fra_Latn", 5) in entries
    assert ("chat", "cat", "fra_Latn", "eng_Latn", 5) in entries  # the first English term
    assert ("computer", "電腦", "eng_Latn", "zho_Hant", 13) in entries
    assert ("Hauskatze", "cat", "deu_Latn", "eng_Latn", 5) in entries  # deprecated: a source, never a target
    assert not any(target == "Hauskatze" for _, target, *_ in entries)
    assert len(entries) == 3 + 2 + 2  # Klingon is not an NLLB language
    assert glossary.matcher("eng_Latn", "fra_Latn").targets("My house cat and your cat.") == ["chat"]


def test_tbx_3_with_its_namespace(tmp_path):
    entries = pairs(read_glossary(write(tmp_path, "g.tbx", TBX_3)))
    assert entries == [("Katze", "gato", "deu_Latn", "spa_Latn", 5), ("gato", "Katze", "spa_Latn", "deu_Latn", 5)]


@pytest.mark.parametrize(
    "content, message",
    [
        ('<?xml version="1.0"?>\n<!DOCTYPE martif [<!ENTITY a "aaaa">]>\n<martif>&a;</martif>',
         "g.tbx: the file declares XML entities, which are refused"),
        ("<martif><text><body><termEntry>", "g.tbx: the file is not well-formed XML"),
        ("<html><body/></html>", "g.tbx: not a TBX file (its root element is <html>"),
        ("<martif><text><body><termEntry>\n<langSet><tig><term>x</term></tig></langSet></termEntry></body></text></martif>",
         "g.tbx: line 2: <langSet> has no xml:lang"),
        ("<martif>" + "<a>" * 300 + "</a>" * 300 + "</martif>", "g.tbx: the file is not well-formed XML"),
        ("<martif>" + "<a/>" * (MAX_TBX_MARKUP + 1) + "</martif>", f"g.tbx: over {MAX_TBX_MARKUP:,} XML tags"),
        ('<martif xml:lang="en"><text><body><termEntry><langSet xml:lang="en"><tig><term> </term></tig></langSet>'
         "</termEntry></body></text></martif>", "g.tbx: line 1: the TBX term is empty"),
    ],
    ids=["entities", "truncated", "not tbx", "no language", "too deep", "too much markup", "empty term"],
)
def test_bad_tbx_is_refused_in_one_line(tmp_path, content, message):
    with pytest.raises(GlossaryError) as error:
        read_glossary(write(tmp_path, "g.tbx", content))
    assert str(error.value).startswith(message)
    assert "\n" not in str(error.value)


def test_a_utf16_tbx_declaring_entities_is_refused(tmp_path):
    content = '<?xml version="1.0" encoding="UTF-16"?>\n<!DOCTYPE martif [<!ENTITY a "aaaa">]>\n<martif>&a;</martif>'
    with pytest.raises(GlossaryError, match="declares XML entities"):
        read_glossary(write(tmp_path, "g.tbx", content, "utf-16"))


def test_language_tags():
    assert [language_code(t) for t in ["eng_Latn", "en", "EN-us", "pt_BR", "zh", "zh-Hant", "zh-HK", "deu", "xx", "tlh"]] == [
        "eng_Latn", "eng_Latn", "eng_Latn", "por_Latn", "zho_Hans", "zho_Hant", "zho_Hant", "deu_Latn", None, None]


# -- matching ---------------------------------------------------------------------------------------

def matcher(*terms):
    return TermMatcher(Entry(source, target, None, None, i + 1) for i, (source, target) in enumerate(terms))


def spans(m, sentence):
    return [(sentence[x.start : x.end], x.entry.target) for x in m.find(sentence)]


def test_terms_match_whole_words_ignoring_case():
    m = matcher(("cat", "chat"), ("machine learning", "apprentissage automatique"))
    assert spans(m, "The Cat sat; (CAT), cat.") == [("Cat", "chat"), ("CAT", "chat"), ("cat", "chat")]
    assert spans(m, "concatenate cats scat cat_x") == []
    assert spans(m, "Machine\n  Learning rocks") == [("Machine\n  Learning", "apprentissage automatique")]
    assert m.targets("cat, machine learning and a cat") == ["chat", "apprentissage automatique"]


def test_the_leftmost_then_longest_term_wins_where_terms_overlap():
    m = matcher(("New York", "Nueva York"), ("York", "Iork"), ("York City", "Ciudad de York"))
    assert spans(m, "New York City and York City and York.") == [
        ("New York", "Nueva York"), ("York City", "Ciudad de York"), ("York", "Iork")]


def test_the_first_entry_for_a_term_wins():
    m = matcher(("cat", "chat"), ("CAT", "matou"))
    assert m.targets("a cat") == ["chat"]
    assert [e.target for e in m.entries] == ["chat"]


def test_in_scripts_without_spaces_a_term_matches_at_any_position():
    m = matcher(("北京", "Beijing"), ("東京", "Tokyo"), ("แมว", "cat"), ("ネコ", "cat"), ("GPU", "GPU"))
    assert spans(m, "我们明天去北京。") == [("北京", "Beijing")]
    assert spans(m, "東京に行きます") == [("東京", "Tokyo")]
    assert spans(m, "ฉันรักแมวมาก") == [("แมว", "cat")]
    assert spans(m, "私のネコです") == [("ネコ", "cat")]
    assert spans(m, "用GPU训练") == [("GPU", "GPU")]  # a Latin word beside Han characters
    assert spans(m, "GPUs and myGPU") == []


def test_case_folding_that_changes_lengths_keeps_the_offsets_of_the_sentence():
    m = matcher(("straße", "street"), ("İstanbul", "Istanbul"))
    assert spans(m, "Die STRASSE hier, die Straße dort") == [("STRASSE", "street"), ("Straße", "street")]
    assert spans(m, "Ich wohne in İstanbul.") == [("İstanbul", "Istanbul")]


def test_a_combining_mark_continues_a_word():
    m = matcher(("cafe", "coffee"))
    assert spans(m, "cafe\u0301 noir") == []
    assert spans(m, "un cafe noir") == [("cafe", "coffee")]


def test_a_long_sentence_against_terms_that_almost_match_everywhere():
    # The shape that makes backtracking matchers blow up: every word starts a near match.
    m = matcher(("a " * 49 + "b", "x"), ("a " * 30 + "c", "y"))
    sentence = "a " * 3000 + "b"
    found = m.find(sentence)
    assert [(x.start, x.end, x.entry.target) for x in found] == [(len(sentence) - 99, len(sentence), "x")]


def test_entries_for_a_pair_and_several_glossaries(tmp_path):
    first = read_glossary(write(tmp_path, "a.csv", "cat,chat,eng_Latn,fra_Latn\ncat,Katze,eng_Latn,deu_Latn\n"))
    second = read_glossary(write(tmp_path, "b.csv", "cat,minou\ndog,chien\n"))
    m = TermMatcher.for_pair([first, second], "eng_Latn", "fra_Latn")
    assert m.targets("cat and dog") == ["chat", "chien"]
    assert TermMatcher.for_pair([first, second], "eng_Latn", "deu_Latn").targets("cat and dog") == ["Katze", "chien"]
    assert TermMatcher.for_pair([second, first], "eng_Latn", "fra_Latn").targets("cat") == ["minou"]
