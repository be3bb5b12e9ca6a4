"""Editing the translation in the target pane: completion from the typed start, and accepted edits
going into the translation memory, with the real window, worker and tiny model."""

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QTextCursor

from dragoman.app.session.jobs import open_memory
from dragoman.app.session.session import TranslationSession
from recorder import WAIT_MS, translated_in

SOURCE = "Please call me later."
OPTIONS = {"num_beams": 4, "max_length": 40}


@pytest.fixture
def settings(settings):
    settings.num_beams, settings.max_length = OPTIONS["num_beams"], OPTIONS["max_length"]
    return settings


def type_into_target(qtbot, window, at, text):
    """Put the cursor `at` characters into the target pane and type `text` there."""
    window.target.setFocus()
    cursor = window.target.textCursor()
    cursor.setPosition(at)
    window.target.setTextCursor(cursor)
    qtbot.keyClicks(window.target, text)


def completed(qtbot, window):
    """Wait for the completion the pause in typing starts, and for its final text on screen."""
    qtbot.waitUntil(lambda: window.post_editing.completion_job != 0, timeout=WAIT_MS)
    job = window.post_editing.completion_job
    window.events.wait(qtbot, "translated", job)
    qtbot.waitUntil(lambda: window.post_editing.completion_job == 0, timeout=WAIT_MS)
    return job


def test_typing_into_the_translation_completes_the_sentence_from_the_typed_start(qtbot, open_window, settings,
                                                                                 translator):
    window = open_window(settings)
    translation = translated_in(qtbot, window, SOURCE)
    type_into_target(qtbot, window, 3, "zq")
    start = translation[:3] + "zq"
    job = completed(qtbot, window)
    [expected] = translator.translate([SOURCE], "eng_Latn", "fra_Latn", translator.default_options(**OPTIONS),
                                      starts=[start])
    assert expected.startswith(start)
    assert window.target.toPlainText() == expected
    assert window.target.textCursor().position() == len(start)  # the cursor stays after what was typed
    streamed = [e[2] for e in window.events.of(job) if e[0] == "completing"]
    assert streamed and all(text.startswith(start) for text in streamed)
    assert window.target.pending() is None  # greyed only while it streamed


def test_each_keystroke_in_the_translation_tells_the_engine_that_typed_text_is_coming(qtbot, open_window, settings):
    """As the source pane's do (engine/translator.py's `expect_typing`): the completion is typed text."""
    window = open_window(settings)
    translated_in(qtbot, window, SOURCE)
    loop = window.worker.translator.loop
    loop.expect_typing(0)
    type_into_target(qtbot, window, 3, "z")
    assert loop.typing_expected()


def test_an_accepted_edit_is_remembered_and_comes_back_for_the_same_sentence(qtbot, open_window, settings, paths):
    window = open_window(settings)
    translated_in(qtbot, window, SOURCE)
    type_into_target(qtbot, window, 0, "Mon texte. ")
    mine = window.target.toPlainText()
    window.post_editing.completion_timer.stop()  # accepted as typed, before any completion
    qtbot.keyClick(window.target, Qt.Key_Return, Qt.ControlModifier)
    remembered = window.events.wait(qtbot, "remembered")
    assert remembered[1:] == (SOURCE, mine.strip())
    memory = open_memory(paths)
    try:
        assert memory.find("eng_Latn", "fra_Latn", _context(window), [SOURCE]) == {SOURCE: mine.strip()}
    finally:
        memory.close()
    window.source.clear()
    assert translated_in(qtbot, window, SOURCE) == mine.strip()


def test_moving_the_cursor_out_of_the_edited_sentence_accepts_it(qtbot, open_window, settings):
    window = open_window(settings)
    translated_in(qtbot, window, SOURCE + "\n" + SOURCE)
    type_into_target(qtbot, window, 0, "Oui. ")
    window.post_editing.completion_timer.stop()
    line = window.target.document().findBlockByNumber(0).text()
    cursor = window.target.textCursor()
    cursor.movePosition(QTextCursor.MoveOperation.End)
    window.target.setTextCursor(cursor)
    assert window.events.wait(qtbot, "remembered")[1:] == (SOURCE, line)


def test_editing_the_source_again_discards_the_edits(qtbot, open_window, settings, translator):
    window = open_window(settings)
    translated_in(qtbot, window, SOURCE)
    type_into_target(qtbot, window, 0, "zz ")
    window.post_editing.completion_timer.stop()
    assert window.post_editing.editing is not None
    other = "The cat sleeps."
    assert translated_in(qtbot, window, other) == translator.translate(
        [other], "eng_Latn", "fra_Latn", translator.default_options(**OPTIONS))[0]
    assert window.post_editing.editing is None and window.events.find("remembered") is None


def _context(window):
    """The context the window's job translates in, as the worker stores accepted edits with it."""
    job = window.post_editing.shown_job
    translator = window.worker.translator
    return TranslationSession(translator).context(job.adapter, job.source, job.target, translator.default_options(**job.options))
