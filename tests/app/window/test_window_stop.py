"""Esc stops a translation: what the target pane shows then is not a translation of the text, and
must not look like one. The real window, worker and tiny model."""

from PySide6.QtCore import Qt

from recorder import WAIT_MS, translated_in


def test_a_stopped_translation_stays_marked_partial_until_the_next_one(qtbot, open_window, settings):
    window = open_window(settings)
    first = translated_in(qtbot, window, "Good morning to all of you.")
    assert not window.target.property("partial")
    window.source.setPlainText("Good morning to all of you.\n" + "\n".join(f"Line {n} of a longer text." for n in range(30)))
    window.translate_now()
    job = window.job_id
    qtbot.keyClick(window.source, Qt.Key.Key_Escape)
    window.events.wait(qtbot, "cancelled", job)
    assert window.target.toPlainText().startswith(first)  # what was there is kept...
    assert window.target.property("partial") is True  # ...greyed as partial, not as a final translation
    assert [mark.format.fontItalic() for mark in window.target.extraSelections()][:1] == [True]
    assert window.target.isReadOnly()  # no editing (nor remembering) of what is not a translation
    assert "partial" in window.activity_label.text()  # said where the translation is, and it stays
    assert window.statusBar().currentMessage() == ""
    window.translate_now()
    window.events.wait(qtbot, "translated", window.job_id)  # the job done, not only its first hypotheses shown
    qtbot.waitUntil(lambda: not window.target.isReadOnly(), timeout=WAIT_MS)
    assert not window.target.property("partial") and window.activity_label.text() == ""
    assert window.target.extraSelections() == [] or not window.target.extraSelections()[0].format.fontItalic()
