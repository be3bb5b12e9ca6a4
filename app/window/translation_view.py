"""The target pane: the translation, its doubtful lines (app.session.confidence) underlined with a dotted
line, and the reason shown when the pointer rests on one; a completion still streaming is greyed.
A click that places the cursor (no drag, no selection) is told as `clicked`, for the window to
offer the sentence's alternatives."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QPoint, Qt, Signal
from PySide6.QtGui import QColor, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QApplication, QPlainTextEdit, QTextEdit, QToolTip

DOUBT_COLOUR = QColor("#d08a2e")  # reads on the light and the dark theme


class TranslationView(QPlainTextEdit):
    clicked = Signal(QPoint)  # where a plain left click put the cursor, in viewport coordinates

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._pressed_at: QPoint | None = None
        self._doubts: dict[int, str] = {}
        self._doubt_marks: list[QTextEdit.ExtraSelection] = []
        self._pending: list[QTextEdit.ExtraSelection] = []
        self.pending_colour = QColor("#8a8a8a")

    def set_pending(self, line: int, start: int, end: int) -> None:
        """Grey characters start..end of `line`: a completion still streaming; end <= start clears it."""
        self._pending = []
        block = self.document().findBlockByNumber(line)
        if block.isValid() and end > start:
            mark = QTextEdit.ExtraSelection()
            mark.format.setForeground(self.pending_colour)
            mark.cursor = QTextCursor(block)
            mark.cursor.setPosition(block.position() + start)
            mark.cursor.setPosition(block.position() + end, QTextCursor.MoveMode.KeepAnchor)
            self._pending = [mark]
        self.setExtraSelections(self._doubt_marks + self._pending)

    def pending(self) -> tuple[int, int] | None:
        """The greyed range (positions in the document), if any."""
        if not self._pending:
            return None
        cursor = self._pending[0].cursor
        return cursor.selectionStart(), cursor.selectionEnd()

    def set_doubts(self, doubts: dict[int, str]) -> None:
        """Mark lines (by number) as doubtful, each with its reason; {} clears the marks."""
        self._doubts = dict(doubts)
        style = QTextCharFormat()
        style.setUnderlineStyle(QTextCharFormat.UnderlineStyle.DotLine)
        style.setUnderlineColor(DOUBT_COLOUR)
        marks = []
        for line in sorted(self._doubts):
            block = self.document().findBlockByNumber(line)
            if not block.isValid():
                continue
            mark = QTextEdit.ExtraSelection()
            mark.format = style
            mark.cursor = QTextCursor(block)
            mark.cursor.movePosition(QTextCursor.MoveOperation.EndOfBlock, QTextCursor.MoveMode.KeepAnchor)
            marks.append(mark)
        self._doubt_marks = marks
        self.setExtraSelections(marks + self._pending)

    def doubt_at(self, position) -> str | None:
        """The reason to doubt the line under `position` (viewport coordinates), if it is marked."""
        return self._doubts.get(self.cursorForPosition(position).blockNumber())

    def mousePressEvent(self, event) -> None:
        plain = event.button() == Qt.MouseButton.LeftButton and event.modifiers() == Qt.KeyboardModifier.NoModifier
        self._pressed_at = event.position().toPoint() if plain else None
        super().mousePressEvent(event)

    def mouseReleaseEvent(self, event) -> None:
        super().mouseReleaseEvent(event)
        pressed, self._pressed_at = self._pressed_at, None
        at = event.position().toPoint()
        if (pressed is not None and event.button() == Qt.MouseButton.LeftButton
                and (at - pressed).manhattanLength() < QApplication.startDragDistance()
                and not self.textCursor().hasSelection()):
            self.clicked.emit(at)

    def viewportEvent(self, event) -> bool:
        if event.type() == QEvent.Type.ToolTip:
            reason = self.doubt_at(event.pos())
            if reason:
                QToolTip.showText(event.globalPos(), f"This translation may be wrong: {reason}", self.viewport())
            else:
                QToolTip.hideText()
            return True
        return super().viewportEvent(event)
