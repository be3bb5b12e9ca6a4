"""Alt+Down (or the context menu) on a translated sentence lists its alternatives; picking one
replaces it and is remembered as an accepted edit. A plain click only places the cursor, to edit.
The real window, worker and tiny model."""

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QTextCursor

from dragoman.app.session.jobs import open_memory
from dragoman.app.session.session import TranslationSession
from recorder import WAIT_MS, translated_in

SOURCES = ["Please call me later.", "The quick brown fox jumps over the lazy dog."]
OPTIONS = {"num_beams": 4, "max_length": 30}


@pytest.fixture
def settings(settings):
    settings.num_beams, settings.max_length = OPTIONS["num_beams"], OPTIONS["max_length"]
    return settings


def ask_alternatives(qtbot, window, position):
    """Put the cursor at character `position` of the target pane and press Alt+Down there."""
    cursor = window.target.textCursor()
    cursor.setPosition(position)
    window.target.setTextCursor(cursor)
    window.target.setFocus()
    qtbot.keyClick(window.target, Qt.Key.Key_Down, Qt.KeyboardModifier.AltModifier)


def click(qtbot, window, position):
    """A plain left click on the target pane at character `position`."""
    cursor = QTextCursor(window.target.document())
    cursor.setPosition(position)
    qtbot.mouseClick(window.target.viewport(), Qt.MouseButton.LeftButton, pos=window.target.cursorRect(cursor).center())


def engine_alternatives(window, sentence):
    """What the engine finds for `sentence` with the shown job's options: its 4 best, best first."""
    translator, job = window.worker.translator, window.post_editing.shown_job
    [found] = translator.translate_full([sentence], job.source, job.target, translator.default_options(**job.options),
                                        alternatives=4)
    return [found.text] + [t.text for t in found.alternatives]


def test_a_picked_alternative_replaces_the_sentence_and_is_remembered(qtbot, open_window, settings, paths):
    window = open_window(settings)
    shown = translated_in(qtbot, window, "\n".join(SOURCES)).split("\n")
    second = len(shown[0]) + 1  # where the second line starts
    ask_alternatives(qtbot, window, second + 2)
    request = window.post_editing.alternatives_asked[0]
    assert "Finding other translations" in window.activity_label.text()  # something shows while they are found
    found = window.events.wait(qtbot, "alternatives_found", request)[2]
    qtbot.waitUntil(lambda: window.post_editing.alternatives_menu is not None and window.post_editing.alternatives_menu.isVisible(),
                    timeout=WAIT_MS)
    best = engine_alternatives(window, SOURCES[1])
    assert [t.text for t in found] == best and best[0] == shown[1]
    entries = [action.text().split("\t") for action in window.post_editing.alternatives_menu.actions()]
    others = {}
    for t in found:  # each text once, at its best score, the one shown left out
        if t.text != shown[1]:
            others.setdefault(t.text, t.score)
    assert [text for text, _ in entries] == list(others) and entries
    assert [float(score) for _, score in entries] == pytest.approx(list(others.values()), abs=0.006)

    menu = window.post_editing.alternatives_menu
    assert menu.activeAction() is menu.actions()[0]  # the keyboard walks it: Return picks the first
    assert menu.width() <= window.width()
    qtbot.keyClick(menu, Qt.Key.Key_Return)
    chosen = entries[0][0]
    assert window.target.toPlainText() == shown[0] + "\n" + chosen
    assert window.events.wait(qtbot, "remembered")[1:] == (SOURCES[1], chosen)
    job = window.post_editing.shown_job
    translator = window.worker.translator
    context = TranslationSession(translator).context(job.adapter, job.source, job.target, translator.default_options(**job.options))
    memory = open_memory(paths)
    try:
        assert memory.find(job.source, job.target, context, SOURCES) == {SOURCES[1]: chosen}
    finally:
        memory.close()
    window.source.clear()
    assert translated_in(qtbot, window, SOURCES[1]) == chosen  # the memory gives it back


def test_a_click_into_the_translation_edits_it_and_asks_for_no_alternatives(qtbot, open_window, settings):
    window = open_window(settings)
    shown = translated_in(qtbot, window, SOURCES[0])
    click(qtbot, window, 2)
    assert window.post_editing.alternatives_asked is None and window.post_editing.alternatives_menu is None
    qtbot.keyClicks(window.target, "Oui")  # the typed letters go into the text, no menu takes them
    window.post_editing.completion_timer.stop()
    assert window.target.toPlainText() == shown[:2] + "Oui" + shown[2:]
    assert window.post_editing.editing is not None
    ask_alternatives(qtbot, window, 1)  # not for the sentence being edited
    assert window.post_editing.alternatives_asked is None
    window.source.clear()
    translated_in(qtbot, window, SOURCES[0])
    start = window.target.cursorRect(QTextCursor(window.target.document())).center()
    cursor = window.target.textCursor()
    cursor.movePosition(QTextCursor.MoveOperation.End)
    end = window.target.cursorRect(cursor).center()
    qtbot.mousePress(window.target.viewport(), Qt.MouseButton.LeftButton, pos=start)
    qtbot.mouseMove(window.target.viewport(), end)
    qtbot.mouseRelease(window.target.viewport(), Qt.MouseButton.LeftButton, pos=end)
    assert window.target.textCursor().hasSelection()
    assert window.post_editing.alternatives_asked is None


def test_a_long_alternative_fits_the_window_with_its_score(qtbot, open_window, settings):
    window = open_window(settings)
    window.resize(700, 500)
    translated_in(qtbot, window, SOURCES[1])
    long_text = "word " * 400
    window.post_editing.alternatives_asked = (-1, 0, 0, 0, window.post_editing._sentence_text(0, 0))
    from dragoman.engine import Translation
    window.post_editing._on_alternatives_found(-1, [Translation(long_text.strip(), -0.5), Translation("court", -1.25)])
    menu = window.post_editing.alternatives_menu
    assert menu is not None and menu.isVisible()
    assert menu.sizeHint().width() <= window.width() and menu.width() <= window.width()
    assert [action.text().split("\t")[1] for action in menu.actions()] == ["-0.50", "-1.25"]
    assert long_text.strip() in menu.actions()[0].toolTip()
