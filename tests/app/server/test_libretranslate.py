"""LibreTranslate's API, as libretranslatepy and LibreTranslate's own clients call it."""

import io
import json
import subprocess
import sys
from urllib.error import HTTPError

import pytest
import requests
from libretranslatepy import LibreTranslateAPI

from dragoman.app.server.pipeline import Text

KEY = "test-key-1234"

TEXTS = ["Hello world, how are you?", "The cat sleeps. The dog barks."]


def expected(server, texts, source="eng_Latn", target="fra_Latn", markup="text"):
    """What the pipeline gives for these texts on the server's own engine thread."""
    return server.server.worker.translate(source, target, [Text(t, markup) for t in texts]).result()


def cli_translation(tiny_checkpoint, text, tmp_path):
    """`dragoman translate`'s stdout for `text` on stdin."""
    result = subprocess.run(
        [sys.executable, "-m", "dragoman.app.cli", "translate", "--model", str(tiny_checkpoint), "--from", "eng_Latn",
         "--to", "fra_Latn", "--device", "cpu", "--dtype", "float32"],
        input=text + "\n", capture_output=True, text=True, check=True)
    return result.stdout[:-1]


def test_libretranslatepy_translates_as_dragoman_translate_does(server, tiny_checkpoint, tmp_path):
    api = LibreTranslateAPI(server.url)
    text = "Hello world, how are you?\nThe cat sleeps. The dog barks."
    translated = api.translate(text, "en", "fr")
    assert translated == cli_translation(tiny_checkpoint, text, tmp_path)
    assert translated.count("\n") == 1


def test_a_list_comes_back_as_a_list_in_order(server):
    answer = requests.post(server.url + "translate", json={"q": TEXTS, "source": "en", "target": "fr"}).json()
    assert answer["translatedText"] == expected(server, TEXTS)
    assert "detectedLanguage" not in answer


def test_html_keeps_its_tags(server):
    html = '<p>Hello <b>world</b>, how are <a href="https://example.org">you</a>?</p>'
    answer = requests.post(server.url + "translate",
                           data={"q": html, "source": "en", "target": "fr", "format": "html"}).json()
    translated = answer["translatedText"]
    assert translated == expected(server, [html], markup="html")[0]
    assert translated.startswith("<p>") and translated.endswith("</p>")
    assert "<b>" in translated and '<a href="https://example.org">' in translated


def test_auto_detects_the_source_language(server):
    text = "Bonjour tout le monde, comment allez-vous aujourd'hui ?"
    answer = requests.post(server.url + "translate", json={"q": text, "source": "auto", "target": "en"}).json()
    assert answer["detectedLanguage"]["language"] == "fr"
    assert 0 < answer["detectedLanguage"]["confidence"] <= 100
    assert answer["translatedText"] == expected(server, [text], "fra_Latn", "eng_Latn")[0]


def test_alternatives(server):
    answer = requests.post(server.url + "translate",
                           json={"q": TEXTS[0], "source": "en", "target": "fr", "alternatives": 2}).json()
    assert isinstance(answer["translatedText"], str) and answer["translatedText"]
    assert len(answer["alternatives"]) <= 2 and answer["translatedText"] not in answer["alternatives"]
    too_many = requests.post(server.url + "translate",
                             json={"q": TEXTS[0], "source": "en", "target": "fr", "alternatives": 4})
    assert too_many.status_code == 400 and "alternatives" in too_many.json()["error"]


def test_languages_and_detect(server):
    api = LibreTranslateAPI(server.url)
    languages = api.languages()
    codes = {language["code"] for language in languages}
    assert {"en", "fr", "zh-Hans", "zh-Hant", "ace_Arab"} <= codes and len(languages) == 202
    english = next(language for language in languages if language["code"] == "en")
    assert english["name"] == "English" and "fr" in english["targets"]
    assert requests.post(server.url + "languages").json() == languages
    detected = api.detect("Dies ist ein deutscher Satz über das Wetter.")
    assert detected[0]["language"] == "de"


def test_frontend_settings(server):
    settings = requests.get(server.url + "frontend/settings").json()
    assert settings["keyRequired"] is False and ".docx" in settings["supportedFilesFormat"]


@pytest.mark.parametrize("body, message", [
    ({"source": "en", "target": "fr"}, "missing q parameter"),
    ({"q": "Hi", "target": "fr"}, "missing source parameter"),
    ({"q": "Hi", "source": "en", "target": "xx"}, "xx is not supported"),
    ({"q": "Hi", "source": "en", "target": "fr", "format": "pdf"}, "pdf format is not supported"),
    ({"q": "Hi", "source": "en", "target": "fr", "alternatives": "many"}, "alternatives parameter is not a number"),
    ({"q": "x" * 5001, "source": "en", "target": "fr"}, "exceeds text limit (5000)"),
    ({"q": [1, 2], "source": "en", "target": "fr"}, "list of strings"),
])
def test_bad_requests_get_400_and_libretranslates_error(server, body, message):
    answer = requests.post(server.url + "translate", json=body)
    assert answer.status_code == 400
    assert message in answer.json()["error"]


def test_malformed_and_oversize_requests(server):
    malformed = requests.post(server.url + "translate", data=b"{not json", headers={"Content-Type": "application/json"})
    assert malformed.status_code == 400 and malformed.json() == {"error": "Invalid JSON format"}
    oversize = requests.post(server.url + "translate", data={"q": "x" * 70_000, "source": "en", "target": "fr"})
    assert oversize.status_code == 413 and "larger than" in oversize.json()["error"]
    missing = requests.get(server.url + "no/such/route")
    assert missing.status_code == 404 and set(missing.json()) == {"error"}


@pytest.mark.parametrize("server", [{"api_keys": (KEY,)}], indirect=True)
def test_keys(server):
    with pytest.raises(HTTPError) as wrong:
        LibreTranslateAPI(server.url, api_key="wrong").translate("Hello", "en", "fr")
    assert wrong.value.code == 403 and json.load(wrong.value) == {"error": "Invalid API key"}
    missing = requests.post(server.url + "translate", json={"q": "Hello", "source": "en", "target": "fr"})
    assert missing.status_code == 400 and "API key" in missing.json()["error"]
    assert LibreTranslateAPI(server.url, api_key=KEY).translate("Hello", "en", "fr") == expected(server, ["Hello"])[0]
    assert requests.get(server.url + "frontend/settings").json()["keyRequired"] is True


def test_translate_file_gives_the_document_back_in_its_format(server, tiny_checkpoint, tmp_path):
    import docx

    source = tmp_path / "letter.docx"
    document = docx.Document()
    paragraph = document.add_paragraph("Hello ")
    paragraph.add_run("world").bold = True
    paragraph.add_run(". The cat sleeps.")
    document.add_paragraph("Second paragraph here.")
    document.save(source)
    answer = requests.post(server.url + "translate_file", data={"source": "en", "target": "fr"},
                           files={"file": ("letter.docx", source.read_bytes())}).json()
    url = answer["translatedFileUrl"]
    assert url.startswith(server.url + "download_file/") and url.endswith("letter.fra_Latn.docx")
    downloaded = requests.get(url)
    assert downloaded.status_code == 200
    assert 'filename="letter.fra_Latn.docx"' in downloaded.headers["content-disposition"]
    subprocess.run([sys.executable, "-m", "dragoman.app.cli", "translate", "--model", str(tiny_checkpoint),
                    "--from", "eng_Latn", "--to", "fra_Latn", "--device", "cpu", "--dtype", "float32",
                    "--output-dir", str(tmp_path / "cli"), str(source)], check=True, capture_output=True)
    ours = docx.Document(io.BytesIO(downloaded.content))
    theirs = docx.Document(tmp_path / "cli" / "letter.fra_Latn.docx")
    assert [p.text for p in ours.paragraphs] == [p.text for p in theirs.paragraphs]
    assert [[r.bold for r in p.runs] for p in ours.paragraphs] == [[r.bold for r in p.runs] for p in theirs.paragraphs]
    unsupported = requests.post(server.url + "translate_file", data={"source": "en", "target": "fr"},
                                files={"file": ("a.exe", b"MZ")})
    assert unsupported.status_code == 400 and unsupported.json()["error"] == "Invalid request: file format not supported"
    assert requests.get(server.url + "download_file/nothing.docx").status_code == 400
