"""A text box for plain text in which each paragraph runs in its own direction: an Arabic or Hebrew
paragraph right-to-left and aligned right, a Latin one beside it left-to-right and aligned left.

QPlainTextEdit lays every paragraph out with the document's one alignment, so a pane of mixed
scripts could only be aligned all one way. QTextEdit's layout gives each paragraph the direction
of its first strong character (its block's layout direction is left automatic) and reads a plain
left alignment as "where the paragraph starts"; it is kept to plain text here (pasting rich text
inserts its text)."""

from __future__ import annotations

from PySide6.QtWidgets import QFrame, QHBoxLayout, QTextEdit, QVBoxLayout, QWidget


class TextPane(QTextEdit):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.setAcceptRichText(False)


class Pane(QFrame):
    """A rounded frame holding a text box and a row of small controls under it (None: a stretch)."""

    def __init__(self, editor: TextPane, footer: list[QWidget | None]):
        super().__init__(objectName="pane")
        self.editor = editor
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 6)
        layout.setSpacing(0)
        layout.addWidget(editor, 1)
        row = QHBoxLayout()
        row.setContentsMargins(16, 0, 8, 0)
        row.setSpacing(4)
        for widget in footer:
            if widget is None:
                row.addStretch(1)
            else:
                row.addWidget(widget)
        layout.addLayout(row)
        editor.installEventFilter(self)

    def eventFilter(self, watched, event) -> bool:
        if watched is self.editor and event.type() in (event.Type.FocusIn, event.Type.FocusOut):
            self.setProperty("focused", event.type() == event.Type.FocusIn)
            self.style().unpolish(self)
            self.style().polish(self)
        return super().eventFilter(watched, event)
