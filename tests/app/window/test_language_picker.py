from PySide6.QtCore import Qt

from dragoman.app.settings import AUTO_DETECT
from dragoman.app.window.language_picker import DETECT_LABEL, LanguagePicker, search_languages


def test_search_finds_by_english_name_native_name_and_code():
    assert search_languages("French")[0] == "fra_Latn"
    assert search_languages("français")[0] == "fra_Latn"
    assert search_languages("fra_Latn")[0] == "fra_Latn"
    assert search_languages("FRA")[0] == "fra_Latn"
    assert search_languages("fr")[0] == "fra_Latn"  # ISO 639-1
    assert search_languages("deutsch")[0] == "deu_Latn"
    assert search_languages("中文")[:2] == ["zho_Hans", "zho_Hant"]
    assert search_languages("arab")[0] == "arb_Arab"  # the main variety before the regional ones
    assert search_languages("xx_nothing") == []


def test_search_prefers_recent_languages_among_equals():
    assert search_languages("norw")[:2] == ["nob_Latn", "nno_Latn"]
    assert search_languages("norw", recent=["nno_Latn"])[:2] == ["nno_Latn", "nob_Latn"]


def test_empty_search_lists_all_languages_alphabetically():
    codes = search_languages("")
    assert len(codes) == 202 and codes[:2] == ["ace_Arab", "ace_Latn"]


def test_popup_shows_detect_then_recent_first(qtbot):
    picker = LanguagePicker("eng_Latn", allow_detect=True)
    qtbot.addWidget(picker)
    picker.recent = ["deu_Latn", "jpn_Jpan"]
    picker.show()
    picker.open_popup()
    shown = picker.popup.shown_codes()
    assert shown[:3] == [AUTO_DETECT, "deu_Latn", "jpn_Jpan"]
    assert len(shown) == 1 + 2 + 202
    picker.popup.hide()


def test_typing_a_query_and_return_picks_the_best_match(qtbot):
    picker = LanguagePicker("eng_Latn")
    qtbot.addWidget(picker)
    picker.show()
    picker.open_popup()
    qtbot.keyClicks(picker.popup.search, "japan")
    assert picker.popup.shown_codes() == ["jpn_Jpan"]
    with qtbot.waitSignal(picker.changed) as changed:
        qtbot.keyClick(picker.popup.search, Qt.Key_Return)
    assert changed.args == ["jpn_Jpan"]
    assert picker.code() == "jpn_Jpan" and picker.text() == "Japanese"
    assert not picker.popup.isVisible()


def test_arrow_keys_move_through_matches(qtbot):
    picker = LanguagePicker("eng_Latn", allow_detect=True)
    qtbot.addWidget(picker)
    picker.show()
    picker.open_popup()
    qtbot.keyClicks(picker.popup.search, "norw")
    qtbot.keyClick(picker.popup.search, Qt.Key_Down)
    with qtbot.waitSignal(picker.changed) as changed:
        qtbot.keyClick(picker.popup.search, Qt.Key_Return)
    assert changed.args == ["nno_Latn"]


def test_detect_choice_is_labelled(qtbot):
    picker = LanguagePicker(AUTO_DETECT, allow_detect=True)
    qtbot.addWidget(picker)
    assert picker.text() == DETECT_LABEL


def test_the_popup_opens_on_the_current_language_and_return_keeps_it(qtbot):
    picker = LanguagePicker("fra_Latn", allow_detect=True)
    qtbot.addWidget(picker)
    picker.recent = ["deu_Latn", "fra_Latn"]
    picker.show()
    picker.open_popup()
    assert picker.popup.tree.currentItem().data(0, Qt.UserRole) == "fra_Latn"
    changes = []
    picker.changed.connect(changes.append)
    qtbot.keyClick(picker.popup.search, Qt.Key_Return)
    assert changes == [] and picker.code() == "fra_Latn" and not picker.popup.isVisible()
