"""The History dialog: the typed translations kept (app.history), newest first, searchable as one
types; an entry opened (double click or Return) puts its languages and text back in the window.
The history can be turned off here (nothing more is kept) and cleared."""

from __future__ import annotations

import time

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QListWidgetItem, QMessageBox, QPushButton

from dragoman.app.history import HistoryEntry, TranslationHistory
from dragoman.app.window.search_list_dialog import SearchListDialog
from dragoman.engine import get_language


class HistoryDialog(SearchListDialog):
    def __init__(self, history: TranslationHistory, keeping: bool, parent=None):
        super().__init__("History", "Search the texts and their translations", "history", parent)
        self.history = history
        self.chosen: HistoryEntry | None = None
        self.keep = QCheckBox("Keep a history of translations", checked=keeping)
        self.clear_button = QPushButton("Clear history…")
        self.row.addWidget(self.keep)
        self.row.addStretch(1)
        self.row.addWidget(self.clear_button)
        self.entries.itemActivated.connect(self._open)
        self.clear_button.clicked.connect(self.clear)
        # Replaceable: tests answer instead of showing a question.
        self.ask = lambda title, text: QMessageBox.question(self, title, text) == QMessageBox.Yes
        self.finish()

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
