"""A text box for plain text in which each paragraph runs in its own direction: an Arabic or Hebrew
paragraph right-to-left and aligned right, a Latin one beside it left-to-right and aligned left.

QPlainTextEdit lays every paragraph out with the document's one alignment, so a pane of mixed
scripts could only be aligned all one way. QTextEdit's layout gives each paragraph the direction
of its first strong character (its block's layout direction is left automatic) and reads a plain
left alignment as "where the paragraph starts"; it is kept to plain text here (pasting rich text
inserts its text)."""

from __future__ import annotations

from PySide6.QtWidgets import QTextEdit


class TextPane(QTextEdit):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.setAcceptRichText(False)
