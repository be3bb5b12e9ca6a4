"""The History dialog: the typed translations kept (app.history), newest first, searchable as one
types; an entry opened (double click or Return) puts its languages and text back in the window.
The history can be turned off here (nothing more is kept) and cleared."""

from __future__ import annotations

import time

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
)

from dragoman.app.history import HistoryEntry, TranslationHistory
from dragoman.app.window.screen_fit import resize_within_screen
from dragoman.engine import get_language


class HistoryDialog(QDialog):
    def __init__(self, history: TranslationHistory, keeping: bool, parent=None):
        super().__init__(parent)
        self.setWindowTitle("History")
        self.history = history
        self.chosen: HistoryEntry | None = None
        self.search = QLineEdit(objectName="search", placeholderText="Search the texts and their translations")
        self.search.setClearButtonEnabled(True)
        self.entries = QListWidget(objectName="history")
        self.entries.setWordWrap(True)
        self.keep = QCheckBox("Keep a history of translations", checked=keeping)
        self.clear_button = QPushButton("Clear history…")
        buttons = QDialogButtonBox(QDialogButtonBox.Close)
        row = QHBoxLayout()
        row.addWidget(self.keep)
        row.addStretch(1)
        row.addWidget(self.clear_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.search)
        layout.addWidget(self.entries, 1)
        layout.addLayout(row)
        layout.addWidget(buttons)
        resize_within_screen(self, 620, 520)
        self.search.textChanged.connect(self.refill)
        self.entries.itemActivated.connect(self._open)
        self.clear_button.clicked.connect(self.clear)
        buttons.rejected.connect(self.reject)
        # Replaceable: tests answer instead of showing a question.
        self.ask = lambda title, text: QMessageBox.question(self, title, text) == QMessageBox.Yes
        self.refill()

    def refill(self) -> None:
        self.entries.clear()
        for entry in self.history.search(self.search.text().strip()):
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.when))
            pair = f"{get_language(entry.source_language).name} → {get_language(entry.target_language).name}"
            item = QListWidgetItem(f"{entry.source}\n{entry.translation}\n{pair}, {when}")
            item.setData(Qt.UserRole, entry)
            self.entries.addItem(item)
        self.entries.setCurrentRow(0)

    def _open(self, item: QListWidgetItem) -> None:
        self.chosen = item.data(Qt.UserRole)
        self.accept()

    def clear(self) -> None:
        if self.ask("Clear history", "Delete every translation in the history?"):
            self.history.clear()
            self.refill()
