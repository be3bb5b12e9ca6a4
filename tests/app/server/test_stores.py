"""What the server keeps between requests: DeepL glossaries on disk (app/server/stores.py)."""

import json

from dragoman.app.server.stores import GlossaryStore


def test_a_glossary_kept_before_glossaries_had_several_pairs_is_read_as_one_with_a_dictionary(tmp_path):
    glossary_id = "0123456789abcdef0123456789abcdef"
    (tmp_path / f"{glossary_id}.json").write_text(json.dumps({
        "glossary_id": glossary_id, "name": "Pets", "source_lang": "en", "target_lang": "de",
        "creation_time": "2026-12-04T10:00:00.000Z", "entry_count": 2, "ready": True}), encoding="utf-8")
    (tmp_path / f"{glossary_id}.csv").write_text("cat,Katze\ndog,Hund\n", encoding="utf-8")
    (tmp_path / "broken.json").write_text("{", encoding="utf-8")  # not ours: left as it is

    store = GlossaryStore(tmp_path)
    info = store.get(glossary_id)
    assert info is not None and info.name == "Pets" and info.as_v2_json()["entry_count"] == 2
    [dictionary] = info.dictionaries
    assert (dictionary.source_lang, dictionary.target_lang) == ("en", "de")
    assert dictionary.entries_tsv() == "cat\tKatze\ndog\tHund"
    assert not (tmp_path / f"{glossary_id}.csv").exists() and (tmp_path / "broken.json").read_text() == "{"
    assert store.delete(glossary_id) and sorted(p.name for p in tmp_path.iterdir()) == ["broken.json"]
