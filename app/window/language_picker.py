"""The language picker: a button showing the language; it opens a searchable list, recent languages first.

It opens on the language chosen now (Return keeps it). Typing filters by English name, native name
or code ("fra", "fra_Latn", "fr", "French", "Français" all find French); Up/Down move, Return
picks, Escape closes.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QEvent, QPoint, Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QFrame, QLineEdit, QToolButton, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget

from dragoman.app.settings import AUTO_DETECT
from dragoman.engine import ISO_639_1, LANGUAGES, get_language

DETECT_LABEL = "Detect language"
_BY_NAME = sorted(LANGUAGES, key=lambda lang: lang.name.casefold())
_MAIN_VARIETIES = set(ISO_639_1.values())  # the variety a bare language name usually means


def search_languages(query: str, recent: Sequence[str] = ()) -> list[str]:
    """Codes matching `query`, best first: exact code (or ISO 639-1 code), then prefixes of code or
    name, then a word of the name, then anywhere (e.g. "(Arabic script)"); ties go to recently used
    languages, then the main variety of a language ("Arabic" before "Egyptian Arabic"), then the name."""
    q = query.strip().casefold()
    if not q:
        return [lang.code for lang in _BY_NAME]
    recent_rank = {code: i for i, code in enumerate(recent)}
    iso = ISO_639_1.get(q)
    ranked = []
    for lang in _BY_NAME:
        code, name, native = lang.code.casefold(), lang.name.casefold(), lang.native.casefold()
        words = name.split("(")[0].split() + native.split()
        if q == code or lang.code == iso:
            rank = 0
        elif code.startswith(q) or name.startswith(q) or native.startswith(q):
            rank = 1
        elif any(word.startswith(q) for word in words):
            rank = 2
        elif q in code or q in name or q in native:
            rank = 3
        else:
            continue
        ranked.append((rank, recent_rank.get(lang.code, len(recent_rank)), lang.code not in _MAIN_VARIETIES, lang.code))
    return [r[-1] for r in sorted(ranked, key=lambda r: r[:3])]


def language_label(code: str) -> str:
    return DETECT_LABEL if code == AUTO_DETECT else get_language(code).name


class LanguagePopup(QFrame):
    """The list that drops down from a LanguagePicker."""

    picked = Signal(str)

    def __init__(self, parent: QWidget, allow_detect: bool):
        super().__init__(parent, Qt.Popup)
        self.setObjectName("languagePopup")
        self.allow_detect = allow_detect
        self.recent: list[str] = []
        self.current = ""  # the language chosen when it opened: selected while nothing is typed
        self.search = QLineEdit(objectName="search", placeholderText="Search by name or code")
        self.search.setClearButtonEnabled(True)
        self.tree = QTreeWidget(objectName="languages")
        self.tree.setColumnCount(3)
        self.tree.setHeaderHidden(True)
        self.tree.setRootIsDecorated(False)
        self.tree.setIndentation(0)
        self.tree.setUniformRowHeights(True)
        self.tree.setFocusPolicy(Qt.NoFocus)  # keys go to the search field, which forwards navigation
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 10, 10, 10)
        layout.setSpacing(8)
        layout.addWidget(self.search)
        layout.addWidget(self.tree)
        self.resize(460, 440)
        self.search.textChanged.connect(self.refill)
        self.search.installEventFilter(self)
        self.tree.itemClicked.connect(self._item_clicked)

    def open_at(self, where: QPoint, recent: list[str], current: str = "") -> None:
        self.recent = recent
        self.current = current
        self.search.clear()
        self.refill()
        self.move(where)
        self.show()
        self.search.setFocus()

    def shown_codes(self) -> list[str]:
        """The selectable codes in display order (what a person sees, headers left out)."""
        codes = []
        for i in range(self.tree.topLevelItemCount()):
            item = self.tree.topLevelItem(i)
            if item.data(0, Qt.UserRole):
                codes.append(item.data(0, Qt.UserRole))
        return codes

    def refill(self) -> None:
        self.tree.clear()
        query = self.search.text()
        rows: list[tuple[str | None, str | None]]  # (a header, or a language's code)
        if query.strip():
            rows = [(None, code) for code in search_languages(query, self.recent)]
        else:
            rows = [(None, AUTO_DETECT)] if self.allow_detect else []
            if self.recent:
                rows += [("Recently used", None)] + [(None, code) for code in self.recent]
            rows += [("All languages", None)] + [(None, code) for code in search_languages("")]
        for header, code in rows:
            if header:
                item = QTreeWidgetItem([header])
                item.setFlags(Qt.NoItemFlags)
                font = QFont(self.font())
                font.setBold(True)
                font.setPointSizeF(font.pointSizeF() * 0.9)
                item.setFont(0, font)
                item.setFirstColumnSpanned(True)
            elif code == AUTO_DETECT:
                item = QTreeWidgetItem([DETECT_LABEL, "", ""])
                item.setData(0, Qt.UserRole, code)
            else:
                assert code is not None  # a row without a header is a language's
                lang = get_language(code)
                item = QTreeWidgetItem([lang.name, lang.native, lang.code])
                item.setData(0, Qt.UserRole, code)
                item.setToolTip(0, f"{lang.name} — {lang.native} ({lang.code})")
                item.setForeground(2, self.palette().placeholderText())
            self.tree.addTopLevelItem(item)
            if header:
                item.setFirstColumnSpanned(True)
        self.tree.resizeColumnToContents(2)
        self.tree.setColumnWidth(0, 200)
        items = [self.tree.topLevelItem(i) for i in range(self.tree.topLevelItemCount())]
        items = [item for item in items if item.data(0, Qt.UserRole)]
        chosen = [item for item in items if item.data(0, Qt.UserRole) == self.current] if not query.strip() else []
        self.tree.setCurrentItem((chosen or items or [None])[0])
        if chosen:
            self.tree.scrollToItem(chosen[0])

    def pick_current(self) -> None:
        item = self.tree.currentItem()
        if item is not None and item.data(0, Qt.UserRole):
            self.hide()
            self.picked.emit(item.data(0, Qt.UserRole))

    def _item_clicked(self, item: QTreeWidgetItem) -> None:
        if item.data(0, Qt.UserRole):
            self.tree.setCurrentItem(item)
            self.pick_current()

    def _move(self, step: int) -> None:
        count = self.tree.topLevelItemCount()
        index = self.tree.indexOfTopLevelItem(self.tree.currentItem()) if self.tree.currentItem() else -1
        while 0 <= index + step < count:
            index += step
            item = self.tree.topLevelItem(index)
            if item.data(0, Qt.UserRole):
                self.tree.setCurrentItem(item)
                return

    def eventFilter(self, watched, event) -> bool:
        if watched is self.search and event.type() == QEvent.KeyPress:
            key = event.key()
            if key in (Qt.Key_Down, Qt.Key_Up):
                self._move(1 if key == Qt.Key_Down else -1)
                return True
            if key in (Qt.Key_PageDown, Qt.Key_PageUp):
                for _ in range(10):
                    self._move(1 if key == Qt.Key_PageDown else -1)
                return True
            if key in (Qt.Key_Return, Qt.Key_Enter):
                self.pick_current()
                return True
        return super().eventFilter(watched, event)


class LanguagePicker(QToolButton):
    """Shows the chosen language; click (or Space/Return when focused) to choose another."""

    changed = Signal(str)  # the new code

    def __init__(self, code: str, allow_detect: bool = False, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("picker")
        self.setToolButtonStyle(Qt.ToolButtonTextBesideIcon)
        self.setLayoutDirection(Qt.RightToLeft)  # the chevron after the name
        self.setFocusPolicy(Qt.StrongFocus)
        self.recent: list[str] = []
        self.popup = LanguagePopup(self, allow_detect)
        self.popup.picked.connect(self._picked)
        self.clicked.connect(self.open_popup)
        self._code = ""
        self.set_code(code)

    def code(self) -> str:
        return self._code

    def set_code(self, code: str) -> None:
        """Show `code` (no `changed` signal: that is for the user's choices)."""
        self._code = code
        self.setText(language_label(code))
        if code != AUTO_DETECT:
            lang = get_language(code)
            self.setToolTip(f"{lang.name} — {lang.native} ({lang.code}). Click to choose another language.")
        else:
            self.setToolTip("Detect the language of the text. Click to choose a language.")

    def open_popup(self) -> None:
        self.popup.open_at(self.mapToGlobal(QPoint(0, self.height() + 4)), self.recent, self._code)

    def _picked(self, code: str) -> None:
        if code != self._code:
            self.set_code(code)
            self.changed.emit(code)
