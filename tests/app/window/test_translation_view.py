"""The target pane (app/window/translation_view.py): doubtful lines marked, the reason on hover."""

from PySide6.QtCore import QEvent, QPoint
from PySide6.QtGui import QHelpEvent, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QApplication, QToolTip

from dragoman.app.window.translation_view import TranslationView


def test_doubtful_lines_are_underlined_and_say_why_on_hover(qtbot):
    view = TranslationView(readOnly=True)
    qtbot.addWidget(view)
    view.resize(400, 300)
    view.show()
    view.setPlainText("Une bonne traduction.\nLe le le le chat.\n\nEncore une.")
    view.set_doubts({1: "the same words 4 times in a row", 7: "a line that is not there"})
    [mark] = view.extraSelections()
    assert mark.cursor.selectedText() == "Le le le le chat."
    assert mark.format.underlineStyle() == QTextCharFormat.UnderlineStyle.DotLine

    def point_on(line):
        return view.cursorRect(QTextCursor(view.document().findBlockByNumber(line))).center() + QPoint(2, 0)

    def hover(line):
        point = point_on(line)
        QApplication.sendEvent(view.viewport(), QHelpEvent(QEvent.Type.ToolTip, point, view.viewport().mapToGlobal(point)))
        return QToolTip.text() if QToolTip.isVisible() else ""

    assert [view.doubt_at(point_on(line)) for line in range(4)] == [None, "the same words 4 times in a row", None, None]
    qtbot.waitUntil(lambda: hover(1) == "This translation may be wrong: the same words 4 times in a row")
    view.set_doubts({})
    assert view.extraSelections() == [] and view.doubt_at(point_on(1)) is None


def test_a_streaming_completion_is_greyed_beside_the_doubt_marks(qtbot):
    view = TranslationView()
    qtbot.addWidget(view)
    view.setPlainText("Une ligne.\nLe chat dort.")
    view.set_doubts({0: "too short"})
    line = view.document().findBlockByNumber(1)
    view.set_pending(1, 3, 13)
    doubt, pending = view.extraSelections()
    assert pending.cursor.selectedText() == "chat dort."
    assert pending.format.foreground().color() == view.pending_colour
    assert view.pending() == (line.position() + 3, line.position() + 13)
    view.set_doubts({})  # the grey stays while the marks change
    assert view.pending() is not None and len(view.extraSelections()) == 1
    view.set_pending(0, 0, 0)
    assert view.pending() is None and view.extraSelections() == []
