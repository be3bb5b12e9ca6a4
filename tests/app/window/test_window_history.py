"""What the window keeps between uses: the history of translations (searchable, can be turned off
and cleared), its size, place and text at relaunch, translate-as-you-type off, the text size.
The real window, worker and tiny model."""

from PySide6.QtCore import QRect, Qt, QTimer
from PySide6.QtWidgets import QApplication

from dragoman.app.history import TranslationHistory
from dragoman.app.settings import Settings
from recorder import WAIT_MS, translated_in


def with_history_dialog(window, act):
    """Open the History dialog and run `act(dialog)` in it once it shows."""
    def run():
        dialog = QApplication.activeModalWidget()
        act(dialog)
    QTimer.singleShot(0, run)
    window.open_history()


def test_translations_are_kept_searched_reopened_turned_off_and_cleared(qtbot, open_window, settings, paths):
    window = open_window(settings)
    first = translated_in(qtbot, window, "Good morning.")
    translated_in(qtbot, window, "The cat sleeps.")

    def search_and_open(dialog):
        assert dialog.entries.count() == 2
        qtbot.keyClicks(dialog.search, "morning")
        assert dialog.entries.count() == 1 and first in dialog.entries.item(0).text()
        qtbot.keyClick(dialog.entries, Qt.Key.Key_Return)

    with_history_dialog(window, search_and_open)
    assert window.source.toPlainText() == "Good morning."
    window.events.wait(qtbot, "translated", window.job_id)

    def turn_off_and_clear(dialog):
        dialog.keep.setChecked(False)
        dialog.ask = lambda title, text: True
        dialog.clear_button.click()
        assert dialog.entries.count() == 0
        dialog.reject()

    with_history_dialog(window, turn_off_and_clear)
    assert window.settings.keep_history is False and Settings.load(paths.settings_file).keep_history is False
    translated_in(qtbot, window, "Nothing is kept now.")
    history = TranslationHistory(paths.history_file)
    try:
        assert history.search("") == []
    finally:
        history.close()


def test_the_window_comes_back_with_its_size_place_and_text(qtbot, open_window, settings, paths):
    window = open_window(settings)
    window.setGeometry(QRect(40, 30, 700, 480))
    window.source.setPlainText("Left here at the last quit.")
    window.close()
    again = open_window()
    assert again.source.toPlainText() == "Left here at the last quit."
    assert again.geometry().size() == window.geometry().size() and again.geometry().topLeft() == window.geometry().topLeft()
    again.events.wait(qtbot, "translated")  # translated once its model was loaded
    qtbot.waitUntil(lambda: again.target.toPlainText() != "", timeout=WAIT_MS)
    again.settings.keep_history = False  # no history: no text kept either
    again.close()
    assert open_window().source.toPlainText() == ""


def test_translate_as_you_type_off_waits_for_ctrl_return_and_the_text_size_changes(qtbot, open_window, settings):
    settings.translate_as_you_type = False
    window = open_window(settings)
    qtbot.keyClicks(window.source, "Hello")
    assert not window.typing_timer.isActive()
    qtbot.wait(window.typing_timer.interval() + 100)
    assert window.events.find("translated") is None and window.job_id == 0
    qtbot.keyClick(window.source, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert window.job_id != 0
    size = window.source.font().pointSize()
    qtbot.keyClick(window.source, Qt.Key.Key_Equal, Qt.KeyboardModifier.ControlModifier)
    assert window.source.font().pointSize() == window.target.font().pointSize() == size + 1
    assert window.settings.text_size == size + 1
