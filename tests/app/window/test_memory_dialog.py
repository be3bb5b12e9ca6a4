"""Remembered edits: the translations a person accepted in the window are listed (not the imported
ones), searched, and deleted, after which the model translates the sentence again. The real window,
worker and tiny model."""

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication

from dragoman.app.session.jobs import open_memory
from recorder import translated_in
from test_post_editing_completion import SOURCE, type_into_target


def with_memory_dialog(window, act):
    """Open the dialog and run `act(dialog)` in it once it shows; what `act` raises fails the test once the
    dialog is closed (it is closed whatever happens)."""
    raised = []

    def run():
        dialog = QApplication.activeModalWidget()
        try:
            act(dialog)
        except BaseException as e:
            raised.append(e)
        finally:
            if dialog is not None:
                dialog.reject()
    QTimer.singleShot(0, run)
    window.open_memory()
    if raised:
        raise raised[0]


def test_remembered_edits_are_listed_searched_and_deleted(qtbot, open_window, settings, paths):
    memory = open_memory(paths)
    memory.add("eng_Latn", "fra_Latn", {"Imported sentence.": "Phrase importée."})  # from a TMX file: no context
    memory.close()
    window = open_window(settings)
    model_translation = translated_in(qtbot, window, SOURCE)
    type_into_target(qtbot, window, 0, "Mon texte. ")
    mine = window.target.toPlainText().strip()
    window.post_editing.completion_timer.stop()
    qtbot.keyClick(window.target, Qt.Key_Return, Qt.ControlModifier)
    window.events.wait(qtbot, "remembered")
    seen = []

    def search_and_delete(dialog):
        assert dialog.windowTitle() == "Remembered edits"
        seen.append([dialog.entries.item(i).text() for i in range(dialog.entries.count())])
        qtbot.keyClicks(dialog.search, "nothing like it")
        assert dialog.entries.count() == 0 and dialog.count.text() == "None found"
        dialog.search.clear()
        qtbot.keyClicks(dialog.search, "mon TEXTE")
        assert dialog.entries.count() == 1
        dialog.entries.setCurrentRow(0)
        dialog.entries.setFocus()
        qtbot.keyClick(dialog.entries, Qt.Key_Delete)
        assert dialog.entries.count() == 0
        dialog.search.clear()
        assert dialog.count.text() == "No edits remembered yet"

    with_memory_dialog(window, search_and_delete)
    [[entry]] = seen
    assert entry.startswith(f"{SOURCE}\n{mine}\nEnglish → French, ")
    memory = open_memory(paths)
    try:
        assert [e.source for e in memory.edits()] == []
        assert memory.find("eng_Latn", "fra_Latn", "", ["Imported sentence."])  # imported ones stay
    finally:
        memory.close()
    window.source.clear()
    assert translated_in(qtbot, window, SOURCE) == model_translation  # the model's again
