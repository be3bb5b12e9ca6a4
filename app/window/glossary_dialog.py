"""The Glossary dialog: the glossaries in use, the user's own glossary, and the do-not-translate list.

Glossaries live in the glossaries folder (AppPaths.glossaries_dir): an imported file is checked
with the glossary parser and copied there (a file of the same name is replaced: importing a
glossary again updates it); the user's own is `USER_GLOSSARY` there, a TSV the parser reads back.
Each language pair of each file is listed with its number of entries and can be turned off; its
terms are shown, read-only, on a double click or "Terms…". A file that cannot be used is said in
one line in the error colour. The
do-not-translate list is one term a line, kept as the sentence writes it; a checkbox turns off
the automatic spans (URLs, e-mail addresses, placeholders, numbers with units).

Nothing is written until OK: then the user's glossary is written (atomically, read back by the
parser; a problem keeps the dialog open with one line saying it) and `result_settings` holds the rest.
"""

from __future__ import annotations

import csv
import io
import tempfile
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
)

from dragoman.app.documents import write_atomically
from dragoman.app.session.glossary import COLUMNS, GlossaryError, read_glossary
from dragoman.app.session.protected_spans import ProtectedTerms
from dragoman.app.session.terms import USER_GLOSSARY, GlossaryPair, glossary_pairs, read_glossaries
from dragoman.app.settings import AppPaths, Settings
from dragoman.app.window.screen_fit import resize_within_screen

IMPORT_FILTER = "Glossaries (*.csv *.tsv *.txt *.tbx *.xml);;All files (*)"
_PAIR = Qt.UserRole  # the GlossaryPair a row of the glossaries table stands for


def glossary_table(entries: list[tuple[str, str, str, str]]) -> bytes:
    """The user's glossary as a TSV file the parser reads back: a header, then source, target, languages."""
    out = io.StringIO()
    writer = csv.writer(out, delimiter="\t", lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows(entries)
    return out.getvalue().encode("utf-8")


class GlossaryDialog(QDialog):
    def __init__(self, settings: Settings, paths: AppPaths, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Glossary")
        resize_within_screen(self, 640, 560)
        self.settings = settings
        self.paths = paths
        self.folder = paths.glossaries_dir

        self.glossaries = QTableWidget(0, 3, objectName="glossaries")
        self.glossaries.setHorizontalHeaderLabels(["File", "Languages", "Entries"])
        self.glossaries.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.glossaries.setEditTriggers(QAbstractItemView.NoEditTriggers)
        self.glossaries.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeToContents)
        self.glossaries.horizontalHeader().setSectionResizeMode(0, QHeaderView.Stretch)
        self.glossaries.verticalHeader().hide()
        import_button = QPushButton("Import…", toolTip="Add CSV, TSV or TBX glossaries")
        self.remove_button = QPushButton("Remove", toolTip="Stop using the selected glossary file")
        self.terms_button = QPushButton("Terms…", toolTip="The terms of the selected glossary pair")
        self.problem = QLabel(objectName="problem", wordWrap=True, textInteractionFlags=Qt.TextSelectableByMouse)
        self.problem.hide()

        self.entries = QTableWidget(0, 4, objectName="entries")
        self.entries.setHorizontalHeaderLabels(["Source term", "Translation", "From (any)", "To (any)"])
        self.entries.horizontalHeader().setSectionResizeMode(QHeaderView.Stretch)
        self.entries.verticalHeader().hide()
        add_button = QPushButton("Add", toolTip="A new entry for the languages translated now")
        delete_button = QPushButton("Delete", toolTip="Delete the selected entries")

        self.keep = QPlainTextEdit("\n".join(settings.do_not_translate), objectName="doNotTranslate")
        self.keep.setPlaceholderText("Names and terms to keep as written, one a line")
        self.protect = QCheckBox("Also keep URLs, e-mail addresses, placeholders and numbers with units as written",
                                 checked=settings.protect)

        buttons = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("Glossaries in use (untick a pair to turn it off)"))
        layout.addWidget(self.glossaries, 2)
        row = QHBoxLayout()
        row.addWidget(import_button)
        row.addWidget(self.terms_button)
        row.addWidget(self.remove_button)
        row.addStretch(1)
        layout.addLayout(row)
        layout.addWidget(self.problem)
        layout.addWidget(QLabel("Your glossary"))
        layout.addWidget(self.entries, 2)
        row = QHBoxLayout()
        row.addWidget(add_button)
        row.addWidget(delete_button)
        row.addStretch(1)
        layout.addLayout(row)
        layout.addWidget(QLabel("Do not translate"))
        layout.addWidget(self.keep, 1)
        layout.addWidget(self.protect)
        layout.addWidget(buttons)

        import_button.clicked.connect(self._choose_files)
        self.remove_button.clicked.connect(self.remove_selected)
        self.terms_button.clicked.connect(self.show_selected_terms)
        self.glossaries.itemDoubleClicked.connect(lambda item: self.show_terms(self.glossaries.item(item.row(), 0).data(_PAIR)))
        add_button.clicked.connect(lambda: self.add_entry())
        delete_button.clicked.connect(self.delete_selected_entries)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)

        self.pairs_off = {GlossaryPair(n, s or None, t or None) for n, s, t in settings.glossary_pairs_off}
        self._load_user_glossary()
        self.refresh()

    # -- glossary files --------------------------------------------------------------------------------

    def refresh(self) -> None:
        """List the glossaries folder's files, a row per language pair (the user's own is listed below)."""
        glossaries, problems = read_glossaries(self.folder)
        self.files_read = {glossary.path.name: glossary for glossary in glossaries}
        self.glossaries.setRowCount(0)
        for glossary in glossaries:
            if glossary.path.name == USER_GLOSSARY:
                continue
            for pair, count in glossary_pairs(glossary).items():
                row = self.glossaries.rowCount()
                self.glossaries.insertRow(row)
                name = QTableWidgetItem(pair.name)
                name.setFlags(name.flags() | Qt.ItemIsUserCheckable)
                name.setCheckState(Qt.Unchecked if pair in self.pairs_off else Qt.Checked)
                name.setData(_PAIR, pair)
                self.glossaries.setItem(row, 0, name)
                languages = QTableWidgetItem(pair.label())
                languages.setToolTip(f"{pair.source_lang or 'any'} → {pair.target_lang or 'any'}")
                self.glossaries.setItem(row, 1, languages)
                self.glossaries.setItem(row, 2, QTableWidgetItem(str(count)))
        self._say("; ".join(problems))

    def show_selected_terms(self) -> None:
        rows = sorted({index.row() for index in self.glossaries.selectionModel().selectedRows()})
        if rows:
            self.show_terms(self.glossaries.item(rows[0], 0).data(_PAIR))

    def show_terms(self, pair: GlossaryPair) -> None:
        """A read-only table of the pair's terms, as imported."""
        entries = [entry for entry in self.files_read[pair.name].entries
                   if (entry.source_lang, entry.target_lang) == (pair.source_lang, pair.target_lang)]
        self.terms_view = QDialog(self, windowTitle=f"{pair.name}: {pair.label()}")
        table = QTableWidget(len(entries), 2, objectName="terms")
        table.setHorizontalHeaderLabels(["Source term", "Translation"])
        table.setEditTriggers(QAbstractItemView.NoEditTriggers)
        table.horizontalHeader().setSectionResizeMode(QHeaderView.Stretch)
        table.verticalHeader().hide()
        for row, entry in enumerate(entries):
            table.setItem(row, 0, QTableWidgetItem(entry.source))
            table.setItem(row, 1, QTableWidgetItem(entry.target))
        close = QDialogButtonBox(QDialogButtonBox.Close)
        close.rejected.connect(self.terms_view.reject)
        layout = QVBoxLayout(self.terms_view)
        layout.addWidget(table)
        layout.addWidget(close)
        resize_within_screen(self.terms_view, 520, 420)
        self.terms_view.open()

    def _say(self, problem: str) -> None:
        self.problem.setText(problem)
        self.problem.setVisible(bool(problem))

    def _choose_files(self) -> None:
        names, _ = QFileDialog.getOpenFileNames(self, "Import glossaries", str(Path.home()), IMPORT_FILTER)
        if names:
            self.import_files([Path(n) for n in names])

    def import_files(self, files: list[Path]) -> bool:
        """Check each file with the parser and copy it into the glossaries folder; the first that
        cannot be used stops the import, said in one line (those before it are imported)."""
        for file in files:
            try:
                read_glossary(file)
            except GlossaryError as e:
                self.refresh()
                self._say(str(e))
                return False
            name = file.name if file.name != USER_GLOSSARY else f"imported-{file.name}"
            self.folder.mkdir(parents=True, exist_ok=True)
            write_atomically(self.folder / name, file.read_bytes())
        self.refresh()
        return True

    def pairs(self) -> list[tuple[GlossaryPair, bool]]:
        """Each listed pair and whether it is on."""
        items = [self.glossaries.item(row, 0) for row in range(self.glossaries.rowCount())]
        return [(item.data(_PAIR), item.checkState() == Qt.Checked) for item in items]

    def remove_selected(self) -> None:
        rows = {index.row() for index in self.glossaries.selectionModel().selectedRows()}
        for name in {self.glossaries.item(row, 0).text() for row in rows}:
            (self.folder / name).unlink(missing_ok=True)
        self.refresh()

    # -- the user's own glossary -------------------------------------------------------------------------

    def _load_user_glossary(self) -> None:
        path = self.folder / USER_GLOSSARY
        self.user_glossary_unreadable = False  # edited by hand, say: kept unless entries are typed here
        if not path.exists():
            return
        try:
            glossary = read_glossary(path)
        except GlossaryError:  # `refresh` says why
            self.user_glossary_unreadable = True
            return
        for entry in glossary.entries:
            self.add_entry(entry.source, entry.target, entry.source_lang or "", entry.target_lang or "")

    def add_entry(self, source: str = "", target: str = "", source_lang: str | None = None,
                  target_lang: str | None = None) -> None:
        """A row of the user's glossary; a new one is for the languages the window translates now."""
        row = self.entries.rowCount()
        self.entries.insertRow(row)
        languages = (self.settings.source_language if source_lang is None else source_lang,
                     self.settings.target_language if target_lang is None else target_lang)
        for column, text in enumerate((source, target, *languages)):
            self.entries.setItem(row, column, QTableWidgetItem(text))
        if not source:
            self.entries.setCurrentCell(row, 0)
            self.entries.editItem(self.entries.item(row, 0))

    def delete_selected_entries(self) -> None:
        for row in sorted({index.row() for index in self.entries.selectedIndexes()}, reverse=True):
            self.entries.removeRow(row)

    def user_entries(self) -> list[tuple[str, str, str, str]]:
        """The rows of the user's glossary with a term in them, as typed (languages: "" = any)."""
        rows = []
        for row in range(self.entries.rowCount()):
            source, target, source_lang, target_lang = (
                (self.entries.item(row, c).text() if self.entries.item(row, c) else "").strip() for c in range(4))
            if source or target:
                rows.append((source, target, source_lang, target_lang))
        return rows

    # -- OK ------------------------------------------------------------------------------------------------

    def accept(self) -> None:
        """Write the user's glossary and check the do-not-translate list; a problem keeps the dialog open."""
        keep = [line.strip() for line in self.keep.toPlainText().splitlines() if line.strip()]
        try:
            ProtectedTerms(keep)
        except ValueError as e:
            self._say(f"Do not translate: {e}")
            return
        entries = self.user_entries()
        path = self.folder / USER_GLOSSARY
        if entries:
            data = glossary_table(entries)
            with tempfile.TemporaryDirectory() as folder:  # checked by the parser before it replaces the file
                (Path(folder) / USER_GLOSSARY).write_bytes(data)
                try:
                    read_glossary(Path(folder) / USER_GLOSSARY)
                except GlossaryError as e:
                    self._say(str(e))
                    return
            self.folder.mkdir(parents=True, exist_ok=True)
            write_atomically(path, data)
        elif not self.user_glossary_unreadable:
            path.unlink(missing_ok=True)
        self.keep_terms = keep
        super().accept()

    def result_settings(self) -> Settings:
        off = [[p.name, p.source_lang or "", p.target_lang or ""] for p, on in self.pairs() if not on]
        listed = {p for p, _ in self.pairs()}
        # pairs turned off in files that are not listed now (unreadable for the moment) stay off
        off += [[p.name, p.source_lang or "", p.target_lang or ""] for p in self.pairs_off
                if p not in listed and (self.folder / p.name).exists()]
        return replace(self.settings, glossary_pairs_off=off, do_not_translate=self.keep_terms,
                       protect=self.protect.isChecked())
