"""The Remembered edits dialog: the translations a person edited or chose in the window, which the
translation memory gives back for the same sentence (app.session.translation_memory), newest first,
searchable as one types; the selected ones can be deleted (Delete), so that the model translates
those sentences again. Imported TMX translations are not listed (`dragoman memory` manages them)."""

from __future__ import annotations

import time

from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QAbstractItemView, QLabel, QListWidgetItem, QPushButton

from dragoman.app.session.translation_memory import TranslationMemory
from dragoman.app.window.search_list_dialog import SearchListDialog
from dragoman.engine import get_language


class MemoryDialog(SearchListDialog):
    def __init__(self, memory: TranslationMemory, parent=None):
        super().__init__("Remembered edits", "Search the sentences and their translations", "edits", parent)
        self.memory = memory
        self.entries.setSelectionMode(QAbstractItemView.ExtendedSelection)
        self.count = QLabel(objectName="hint")
        self.delete_button = QPushButton("Delete", toolTip="Forget the selected translations (Delete)")
        self.row.addWidget(self.count, 1)
        self.row.addWidget(self.delete_button)
        self.delete_button.clicked.connect(self.delete_selected)
        self.entries.itemSelectionChanged.connect(
            lambda: self.delete_button.setEnabled(bool(self.entries.selectedItems())))
        self.entries.installEventFilter(self)  # the Delete key
        self.finish("Translations you edited or chose: Dragoman gives them back for the same sentence, "
                    "languages and model.")

    def eventFilter(self, watched, event) -> bool:
        if watched is self.entries and event.type() == QEvent.KeyPress and event.matches(QKeySequence.Delete):
            self.delete_selected()
            return True
        return super().eventFilter(watched, event)

    def refill(self) -> None:
        self.entries.clear()
        found = self.memory.edits(self.search.text().strip())
        for entry in found:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.changed))
            pair = f"{get_language(entry.source_lang).name} → {get_language(entry.target_lang).name}"
            item = QListWidgetItem(f"{entry.source}\n{entry.target}\n{pair}, {when}")
            item.setData(Qt.UserRole, entry)
            self.entries.addItem(item)
        searching = bool(self.search.text().strip())
        self.count.setText(f"{len(found)} {'found' if searching else 'remembered'}" if found
                           else "None found" if searching else "No edits remembered yet")
        self.entries.setCurrentRow(0)
        self.delete_button.setEnabled(bool(self.entries.selectedItems()))

    def delete_selected(self) -> None:
        for item in self.entries.selectedItems():
            self.memory.delete(item.data(Qt.UserRole))
        self.refill()
