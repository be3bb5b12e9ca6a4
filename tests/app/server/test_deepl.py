"""DeepL's API v2, through the official `deepl` client pointed at the local server."""

import subprocess
import sys

import deepl
import pytest
import requests

from dragoman.app.server.pipeline import Text

KEY = "test-key-1234"
AUTH = {"Authorization": f"DeepL-Auth-Key {KEY}"}


@pytest.fixture
def client(server):
    deepl.http_client.max_network_retries = 0  # the client retries 429 and 5xx: the test wants the answer
    translator = deepl.Translator(KEY, server_url=server.url)
    yield translator
    translator.close()


def expected(server, texts, source="eng_Latn", target="deu_Latn", markup="text", glossary=None, glossary_id=""):
    return server.server.worker.translate(source, target, [Text(t, markup) for t in texts], glossary,
                                          glossary_id).result()


def test_text_and_lists(server, client):
    one = client.translate_text("Hello world, how are you?", source_lang="EN", target_lang="DE")
    assert one.text == expected(server, ["Hello world, how are you?"])[0]
    assert one.detected_source_lang == "EN"
    texts = ["The cat sleeps.", "The dog barks. It is late."]
    many = client.translate_text(texts, source_lang="EN", target_lang="PT-BR")
    assert [r.text for r in many] == expected(server, texts, target="por_Latn")


def test_detects_the_source_language(server, client):
    result = client.translate_text("Bonjour tout le monde, comment allez-vous aujourd'hui ?", target_lang="EN-GB")
    assert result.detected_source_lang == "FR"


@pytest.mark.parametrize("tag_handling, text", [
    ("html", '<p>Hello <b>world</b>, how are you?</p>'),
    ("xml", 'Hello <keep id="1">world</keep>, how are you?'),
])
def test_tags_come_back(server, client, tag_handling, text):
    result = client.translate_text(text, source_lang="EN", target_lang="DE", tag_handling=tag_handling)
    assert result.text == expected(server, [text], markup=tag_handling)[0]
    assert ("<b>" in result.text) if tag_handling == "html" else ('<keep id="1">' in result.text)


def test_form_bodies_as_older_clients_send_them(server):
    answer = requests.post(server.url + "v2/translate", data={"text": ["One.", "Two."], "target_lang": "DE",
                                                              "source_lang": "EN"},
                           headers={"Authorization": f"DeepL-Auth-Key {KEY}"})
    assert [t["text"] for t in answer.json()["translations"]] == expected(server, ["One.", "Two."])


def test_languages_and_usage(client):
    sources = {language.code for language in client.get_source_languages()}
    targets = {language.code for language in client.get_target_languages()}
    assert {"EN", "DE", "ZH", "PT"} <= sources and "EN-GB" not in sources
    assert {"EN-GB", "EN-US", "PT-BR", "ZH-HANS", "ZH-HANT"} <= targets and "EN" not in targets
    client.translate_text("Hello", source_lang="EN", target_lang="DE")
    usage = client.get_usage()
    assert usage.character.count >= 5 and not usage.any_limit_reached


def test_glossaries(server, client):
    glossary = client.create_glossary("Pets", "EN", "DE", {"cat": "Katze", "dog": "Hund"})
    assert glossary.entry_count == 2 and glossary.source_lang == "EN" and glossary.ready
    assert client.get_glossary(glossary.glossary_id).name == "Pets"
    assert [g.glossary_id for g in client.list_glossaries()] == [glossary.glossary_id]
    assert client.get_glossary_entries(glossary) == {"cat": "Katze", "dog": "Hund"}
    result = client.translate_text("The cat sleeps.", source_lang="EN", target_lang="DE", glossary=glossary)
    assert "Katze" in result.text  # a term the tiny model would never write unforced
    stored = server.server.state.glossaries.get(glossary.glossary_id).dictionaries[0]
    assert result.text == expected(server, ["The cat sleeps."], glossary=stored.glossary,
                                   glossary_id=f"{glossary.glossary_id}:en-de")[0]
    from_csv = client.create_glossary_from_csv("CSV", "EN", "DE", "sun,Sonne\nmoon,Mond\n")
    assert from_csv.entry_count == 2
    client.delete_glossary(glossary)
    with pytest.raises(deepl.GlossaryNotFoundException):
        client.get_glossary(glossary.glossary_id)
    with pytest.raises(deepl.DeepLException, match="Invalid glossary entries"):
        client.create_glossary_from_csv("Bad", "EN", "DE", "only-one-cell,\n")


def test_multilingual_glossaries_of_the_v3_api(server):
    """DeepL's v3 glossaries through the official client: a dictionary per language pair, each used
    for its pair; merged, replaced and deleted dictionaries; v2 sees a one-pair glossary only."""
    import requests
    from deepl.api_data import MultilingualGlossaryDictionaryEntries as Dictionary

    client = deepl.DeepLClient(KEY, server_url=server.url)
    try:
        pets = client.create_multilingual_glossary("Pets", [
            Dictionary("EN", "DE", {"cat": "Katze"}),
            Dictionary("EN", "FR", {"cat": "chat"})])
        assert sorted((d.source_lang, d.target_lang, d.entry_count) for d in pets.dictionaries) == [
            ("EN", "DE", 1), ("EN", "FR", 1)]
        assert [g.glossary_id for g in client.list_multilingual_glossaries()] == [pets.glossary_id]
        assert "Katze" in client.translate_text("The cat sleeps.", source_lang="EN", target_lang="DE", glossary=pets).text
        assert "chat" in client.translate_text("The cat sleeps.", source_lang="EN", target_lang="FR", glossary=pets).text
        with pytest.raises(deepl.DeepLException, match="no dictionary"):
            client.translate_text("The cat sleeps.", source_lang="EN", target_lang="ES", glossary=pets.glossary_id)
        with pytest.raises(deepl.DeepLException, match="several dictionaries"):
            client.get_glossary(pets.glossary_id)

        client.update_multilingual_glossary_dictionary(
            pets, Dictionary("EN", "DE", {"dog": "Hund", "cat": "Kater"}))
        def entries(source, target):  # the client hands them on as the server's TSV
            tsv = client.get_multilingual_glossary_entries(pets, source, target).dictionaries[0].entries
            return dict(line.split("\t") for line in tsv.splitlines())

        assert entries("EN", "DE") == {"cat": "Kater", "dog": "Hund"}  # merged: the new entry wins
        replaced = client.replace_multilingual_glossary_dictionary(
            pets, Dictionary("EN", "DE", {"bird": "Vogel"}))
        assert replaced.entry_count == 1
        assert client.update_multilingual_glossary_name(pets, "Animals").name == "Animals"
        client.delete_multilingual_glossary_dictionary(pets, source_lang="EN", target_lang="FR")
        one_pair = client.get_glossary(pets.glossary_id)  # one dictionary left: v2 shows it
        assert (one_pair.source_lang, one_pair.target_lang, one_pair.entry_count) == ("EN", "DE", 1)
        bad = requests.patch(f"{server.url.rstrip('/')}/v3/glossaries/{pets.glossary_id}", headers=AUTH, timeout=30, json={
            "dictionaries": [{"source_lang": "en", "target_lang": "de", "entries": "only-one-cell", "entries_format": "tsv"}]})
        assert bad.status_code == 400 and "Invalid glossary entries" in bad.json()["message"]
        assert entries("EN", "DE") == {"bird": "Vogel"}  # a refused change changes nothing
        client.delete_multilingual_glossary(pets)
        with pytest.raises(deepl.GlossaryNotFoundException):
            client.get_multilingual_glossary(pets.glossary_id)
    finally:
        client.close()


def test_document_equal_to_dragoman_translate(server, client, tiny_checkpoint, tmp_path):
    import docx

    source = tmp_path / "report.docx"
    document = docx.Document()
    paragraph = document.add_paragraph("The weather is ")
    paragraph.add_run("very").italic = True
    paragraph.add_run(" nice today.")
    document.save(source)
    out = tmp_path / "report.de.docx"
    client.translate_document_from_filepath(source, out, source_lang="EN", target_lang="DE")
    subprocess.run([sys.executable, "-m", "dragoman.app.cli", "translate", "--model", str(tiny_checkpoint),
                    "--from", "eng_Latn", "--to", "deu_Latn", "--device", "cpu", "--dtype", "float32",
                    "--output-dir", str(tmp_path / "cli"), str(source)], check=True, capture_output=True)
    ours, theirs = docx.Document(out), docx.Document(tmp_path / "cli" / "report.deu_Latn.docx")
    assert [p.text for p in ours.paragraphs] == [p.text for p in theirs.paragraphs]
    assert [[r.italic for r in p.runs] for p in ours.paragraphs] == [[r.italic for r in p.runs] for p in theirs.paragraphs]
    handle = client.translate_document_upload(b"not a zip", target_lang="DE", source_lang="EN",
                                              filename="broken.docx")
    status = client.translate_document_wait_until_done(handle)
    assert status.status == deepl.DocumentStatus.Status.ERROR and status.error_message
    wrong_key = requests.post(f"{server.url}v2/document/{handle.document_id}", json={"document_key": "x"},
                              headers={"Authorization": f"DeepL-Auth-Key {KEY}"})
    assert wrong_key.status_code == 404


@pytest.mark.parametrize("server", [{"api_keys": (KEY,)}], indirect=True)
def test_keys(server):
    with pytest.raises(deepl.AuthorizationException):
        deepl.Translator("wrong", server_url=server.url).translate_text("Hello", source_lang="EN", target_lang="DE")
    missing = requests.post(server.url + "v2/translate", json={"text": ["Hi"], "target_lang": "DE"})
    assert missing.status_code == 403 and set(missing.json()) == {"message"}
    good = deepl.Translator(KEY, server_url=server.url).translate_text("Hello", source_lang="EN", target_lang="DE")
    assert good.text == expected(server, ["Hello"])[0]


def test_bad_and_oversize_requests(server, client):
    with pytest.raises(deepl.DeepLException, match="target_lang"):
        client.translate_text("Hello", target_lang="XX")
    with pytest.raises(deepl.DeepLException, match="tag_handling"):
        client.translate_text("Hello", target_lang="DE", tag_handling="json")
    with pytest.raises(deepl.DeepLException, match="413"):
        client.translate_text("x" * 70_000, source_lang="EN", target_lang="DE")
    with pytest.raises(deepl.DeepLException, match="not well-formed"):
        client.translate_text("<a>unclosed", source_lang="EN", target_lang="DE", tag_handling="xml")
    headers = {"Authorization": f"DeepL-Auth-Key {KEY}", "Content-Type": "application/json"}
    malformed = requests.post(server.url + "v2/translate", data=b"[1,", headers=headers)
    assert malformed.status_code == 400 and set(malformed.json()) == {"message"}
    assert requests.post(server.url + "v2/translate", json={"target_lang": "DE"}, headers=headers).status_code == 400


def test_binds_to_loopback_by_default():
    from dragoman.app.cli import build_parser

    args = build_parser().parse_args(["serve", "--model", "m"])
    assert (args.host, args.port) == ("127.0.0.1", 5000)
