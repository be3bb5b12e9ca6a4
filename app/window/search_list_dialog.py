"""A dialog of entries searched as one types (the History and Remembered edits dialogs): a search
field, the list, a row of the dialog's own controls, and Close."""

from __future__ import annotations

from PySide6.QtWidgets import QDialog, QDialogButtonBox, QHBoxLayout, QLabel, QLineEdit, QListWidget, QVBoxLayout

from dragoman.app.window.screen_fit import resize_within_screen


class SearchListDialog(QDialog):
    """Subclasses fill `row` with their controls, then call `finish()`; `refill()` lists the
    entries matching `search`'s text."""

    def __init__(self, title: str, placeholder: str, list_name: str, parent=None):
        super().__init__(parent)
        self.setWindowTitle(title)
        self.search = QLineEdit(objectName="search", placeholderText=placeholder)
        self.search.setClearButtonEnabled(True)
        self.entries = QListWidget(objectName=list_name)
        self.entries.setWordWrap(True)
        self.row = QHBoxLayout()

    def finish(self, heading: str | None = None) -> None:
        """Lays the dialog out (with `heading` above the search field) and lists the entries."""
        buttons = QDialogButtonBox(QDialogButtonBox.Close)
        layout = QVBoxLayout(self)
        if heading:
            layout.addWidget(QLabel(heading, wordWrap=True))
        layout.addWidget(self.search)
        layout.addWidget(self.entries, 1)
        layout.addLayout(self.row)
        layout.addWidget(buttons)
        resize_within_screen(self, 620, 520)
        self.search.textChanged.connect(self.refill)
        buttons.rejected.connect(self.reject)
        self.refill()

    def refill(self) -> None:
        raise NotImplementedError
