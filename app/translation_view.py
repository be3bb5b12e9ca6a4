"""The target pane: the translation, its doubtful lines (app.confidence) underlined with a dotted
line, and the reason shown when the pointer rests on one."""

from __future__ import annotations

from PySide6.QtCore import QEvent
from PySide6.QtGui import QColor, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QPlainTextEdit, QTextEdit, QToolTip

DOUBT_COLOUR = QColor("#d08a2e")  # reads on the light and the dark theme


class TranslationView(QPlainTextEdit):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._doubts: dict[int, str] = {}

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
        self.setExtraSelections(marks)

    def doubt_at(self, position) -> str | None:
        """The reason to doubt the line under `position` (viewport coordinates), if it is marked."""
        return self._doubts.get(self.cursorForPosition(position).blockNumber())

    def viewportEvent(self, event) -> bool:
        if event.type() == QEvent.Type.ToolTip:
            reason = self.doubt_at(event.pos())
            if reason:
                QToolTip.showText(event.globalPos(), f"This translation may be wrong: {reason}", self.viewport())
            else:
                QToolTip.hideText()
            return True
        return super().viewportEvent(event)
