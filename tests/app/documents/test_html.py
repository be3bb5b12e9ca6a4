"""An HTML page's prolog and charset declarations come back as the page had them, and name the
encoding the translation is written in."""

import codecs

import lxml.html
import pytest

from dragoman.app.documents import translate_document

from document_fakes import upper_losing_tags

BODY = "<body><p>A short page. It has <b>two</b> sentences.</p></body></html>"


def translate(tmp_path, data: bytes) -> bytes:
    (tmp_path / "in.html").write_bytes(data)
    translate_document(tmp_path / "in.html", tmp_path / "out.html", upper_losing_tags)
    return (tmp_path / "out.html").read_bytes()


def test_a_page_without_a_doctype_gains_none_and_keeps_its_http_equiv_meta(tmp_path):
    page = '<html><head><meta http-equiv="Content-Type" content="text/html; charset=UTF-8"><title>Page</title></head>' + BODY
    out = translate(tmp_path, page.encode()).decode("utf-8")
    assert out.startswith("<html>")  # libxml2 puts a doctype in every tree: it is not written
    metas = lxml.html.fromstring(out).findall(".//meta")
    assert [(m.get("http-equiv"), m.get("content")) for m in metas] == [("Content-Type", "text/html; charset=UTF-8")]
    assert "T:A SHORT PAGE." in out


@pytest.mark.parametrize("doctype", [
    "<!doctype html>",
    '<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN" "http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">',
])
def test_the_doctype_is_kept_as_written(tmp_path, doctype):
    page = f"{doctype}\n<!-- saved from a site --><html><head><meta charset=\"utf-8\"><title>Page</title></head>" + BODY
    out = translate(tmp_path, page.encode()).decode("utf-8")
    assert out.startswith(doctype + "\n") and out.count("<!DOCTYPE") + out.count("<!doctype") == 1
    assert "<!-- saved from a site -->" in out


def test_the_xml_declaration_is_kept(tmp_path):
    page = '<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE html>\n<html xmlns="http://www.w3.org/1999/xhtml"><head><title>Page</title></head>' + BODY
    out = translate(tmp_path, page.encode()).decode("utf-8")
    assert out.startswith('<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE html>\n<html')


def test_a_charset_that_is_not_the_encoding_written_is_corrected(tmp_path):
    """A page labelled gb2312 whose bytes are UTF-8 (as saved pages often are) is written in UTF-8,
    and its declarations say so; a browser would otherwise show the translation as mojibake."""
    page = ('<html><head><meta http-equiv="Content-Type" content="text/html; charset=gb2312"><meta charset="gb2312">'
            "<title>Page</title></head><body><p>Un café. Très bon.</p></body></html>")
    out = translate(tmp_path, page.encode("utf-8"))
    root = lxml.html.fromstring(out.decode("utf-8"))
    assert [m.get("content") or m.get("charset") for m in root.findall(".//meta")] == ["text/html; charset=utf-8", "utf-8"]
    assert "T:UN CAFÉ." in out.decode("utf-8")


def test_a_utf16_page_is_written_in_utf16(tmp_path):
    page = '<html><head><meta charset="UTF-16"><title>Page</title></head><body><p>Grüße aus Köln.</p></body></html>'
    out = translate(tmp_path, codecs.BOM_UTF16_LE + page.encode("utf-16-le"))
    assert out.startswith(codecs.BOM_UTF16_LE) or out.startswith(codecs.BOM_UTF16_BE)
    text = out.decode("utf-16")
    assert '<meta charset="UTF-16">' in text and "T:GRÜSSE AUS KÖLN." in text


def test_a_page_in_the_gb2312_it_declares_is_written_in_it_where_it_holds_the_translation(tmp_path):
    page = ('<html><head><meta http-equiv="Content-Type" content="text/html; charset=gb2312"><title>新闻</title></head>'
            "<body><p>今天天气很好。我们去了公园。</p></body></html>")
    (tmp_path / "in.html").write_bytes(page.encode("gb2312"))
    notes = []
    translate_document(tmp_path / "in.html", tmp_path / "zh.html", lambda texts: ["中文" + t for t in texts],
                       "Hans", "Hans", note=notes.append)
    out = (tmp_path / "zh.html").read_bytes().decode("gb2312")
    assert 'content="text/html; charset=gb2312"' in out and "中文今天天气很好。" in out
    assert notes == ["read as GB2312 (the file is not UTF-8)"]
    notes.clear()
    translate_document(tmp_path / "in.html", tmp_path / "th.html", lambda texts: ["ไทย" + t for t in texts],
                       "Hans", "Thai", note=notes.append)
    out = (tmp_path / "th.html").read_bytes().decode("utf-8")
    assert 'content="text/html; charset=utf-8"' in out and "ไทย" in out
    assert notes[1] == "written as UTF-8: GB2312 cannot hold the translation"


def test_a_windows_1252_page_without_a_declaration_is_detected(tmp_path):
    page = "<html><head><title>Café</title></head><body><p>Le café où l'été dernier était très agréable.</p></body></html>"
    out = translate(tmp_path, page.encode("cp1252"))
    assert "T:LE CAFÉ OÙ L'ÉTÉ DERNIER ÉTAIT TRÈS AGRÉABLE." in out.decode("cp1252")


def test_a_utf16_page_without_a_byte_order_mark_is_read(tmp_path):
    page = '<html><head><title>Page</title></head><body><p>Grüße aus Köln.</p></body></html>'
    out = translate(tmp_path, page.encode("utf-16-le"))
    assert "T:GRÜSSE AUS KÖLN." in out.decode("utf-16-le")
