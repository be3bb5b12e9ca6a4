"""app/history.py: the typed translations kept in a local SQLite file, one entry per text, searchable, cleared."""

from dragoman.app.history import TranslationHistory


def sources(history, query=""):
    return [(e.source, e.translation) for e in history.search(query)]


def test_entries_are_searchable_one_per_text_being_typed_and_cleared(paths):
    history = TranslationHistory(paths.history_file)
    try:
        history.add("eng_Latn", "fra_Latn", "Good mor", "Bon mor")
        history.add("eng_Latn", "fra_Latn", "Good morning", "Bonjour")  # the same text, typed on: replaces it
        history.add("eng_Latn", "deu_Latn", "Good morning", "Guten Morgen")  # another language: another entry
        history.add("eng_Latn", "fra_Latn", "The 100% sure_thing", "La chose sûre à 100 %")
        history.add("eng_Latn", "fra_Latn", "  ", "")  # nothing to keep
        assert sources(history) == [("The 100% sure_thing", "La chose sûre à 100 %"), ("Good morning", "Guten Morgen"),
                                    ("Good morning", "Bonjour")]
        history.add("eng_Latn", "fra_Latn", "Good morning", "Bonjour")  # translated again: on top, once
        assert sources(history)[0] == ("Good morning", "Bonjour") and len(sources(history)) == 3
        assert sources(history, "MORGEN") == [("Good morning", "Guten Morgen")]
        assert sources(history, "100%") == [("The 100% sure_thing", "La chose sûre à 100 %")]
        assert sources(history, "0%s") == [] and sources(history, "s_r") == []  # % and _ are plain characters
        history.clear()
        assert sources(history) == []
    finally:
        history.close()
    assert b"Guten Morgen" not in paths.history_file.read_bytes()  # gone from the file, not only hidden
