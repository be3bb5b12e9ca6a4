"""The target pane: the translation, its doubtful lines (app.session.confidence) underlined with a dotted
line, and the reason shown when the pointer rests on one; a completion still streaming is greyed;
a stopped translation is greyed whole (`set_partial`). Each paragraph runs in its own script's
direction (app.window.text_pane).

A click only places the cursor (to edit). A sentence's alternatives are asked for explicitly:
Alt+Down at the cursor, or "Other translations" in the context menu, told as `alternatives_wanted`
with the position in the document."""

from __future__ import annotations

from PySide6.QtCore import QEvent, Signal
from PySide6.QtGui import QColor, QKeySequence, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QTextEdit, QToolTip

from dragoman.app.window.text_pane import TextPane

DOUBT_COLOUR = QColor("#d08a2e")  # reads on the light and the dark theme
ALTERNATIVES_KEYS = QKeySequence("Alt+Down")


class TranslationView(TextPane):
    alternatives_wanted = Signal(int)  # the position in the document whose sentence's alternatives are asked for

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.offer_alternatives = False  # the window says when a translation is there to have alternatives
        self._doubts: dict[int, str] = {}
        self._doubt_marks: list[QTextEdit.ExtraSelection] = []
        self._pending: list[QTextEdit.ExtraSelection] = []
        self._partial: list[QTextEdit.ExtraSelection] = []
        self.pending_colour = QColor("#8a8a8a")

    def _show_marks(self) -> None:
        self.setExtraSelections(self._partial + self._doubt_marks + self._pending)

    def set_partial(self, partial: bool) -> None:
        """Grey the whole text (a translation stopped before its end), or not."""
        self._partial = []
        if partial:
            mark = QTextEdit.ExtraSelection()
            mark.format.setForeground(self.pending_colour)
            mark.format.setFontItalic(True)
            mark.cursor = QTextCursor(self.document())
            mark.cursor.select(QTextCursor.SelectionType.Document)
            self._partial = [mark]
        self.setProperty("partial", partial)
        self.style().unpolish(self)
        self.style().polish(self)
        self._show_marks()

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
        self._show_marks()

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
        self._show_marks()

    def doubt_at(self, position) -> str | None:
        """The reason to doubt the line under `position` (viewport coordinates), if it is marked."""
        return self._doubts.get(self.cursorForPosition(position).blockNumber())

    def keyPressEvent(self, event) -> None:
        if self.offer_alternatives and QKeySequence(event.keyCombination()) == ALTERNATIVES_KEYS:
            self.alternatives_wanted.emit(self.textCursor().position())
            return
        super().keyPressEvent(event)

    def contextMenuEvent(self, event) -> None:
        menu = self.createStandardContextMenu(event.pos())
        if self.offer_alternatives:
            position = self.cursorForPosition(event.pos()).position()
            action = menu.addAction("Other translations of this sentence")
            action.setShortcut(ALTERNATIVES_KEYS)
            action.triggered.connect(lambda: self.alternatives_wanted.emit(position))
            menu.insertAction(menu.actions()[0], action)
            menu.insertSeparator(menu.actions()[1])
        menu.exec(event.globalPos())
        menu.deleteLater()

    def viewportEvent(self, event) -> bool:
        if event.type() == QEvent.Type.ToolTip:
            reason = self.doubt_at(event.pos())
            if reason:
                QToolTip.showText(event.globalPos(), f"This translation may be wrong: {reason}", self.viewport())
            else:
                QToolTip.hideText()
            return True
        return super().viewportEvent(event)
