"""Translate from anywhere: the small frameless popup near the pointer that `dragoman popup` (a key
bound in the desktop's settings), the tray's "Translate the clipboard" and Ctrl+C twice open.

It shows the languages, the translation as it streams, Copy, and "Open in Dragoman" (the text in
the window). It translates through the running window's engine worker, like typed text; Esc, its
close button or a click elsewhere closes it.
"""

from __future__ import annotations

import time
from typing import Callable

from PySide6.QtCore import QEvent, QObject, QPoint, Qt, Signal
from PySide6.QtGui import QClipboard, QCursor, QGuiApplication, QKeySequence, QShortcut
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QToolButton, QVBoxLayout

from dragoman.app.desktop_shortcut import DoubleCopy
from dragoman.app.session.session import TranslationJob
from dragoman.app.window.single_instance import PopupRequest
from dragoman.app.window.text_pane import TextPane
from dragoman.engine import get_language

POPUP_WIDTH = 420
POINTER_GAP = 12  # pixels between the pointer and the popup's corner
NOTHING_TO_TRANSLATE = "Nothing selected or copied: select some text, or copy it, and try again."


def read_selection(clipboard_only: bool) -> PopupRequest:
    """The text to translate: the selection (X11's PRIMARY) where there is one, else the clipboard's."""
    clipboard = QGuiApplication.clipboard()
    if not clipboard_only and clipboard.supportsSelection():
        selected = clipboard.text(QClipboard.Mode.Selection)
        if selected.strip():
            return PopupRequest(selected, clipboard=False)
    return PopupRequest(clipboard.text(QClipboard.Mode.Clipboard), clipboard=True)


class ClipboardWatcher(QObject):
    """DeepL's Ctrl+C twice: `copied_twice(text)` when the same text is copied twice within
    DOUBLE_COPY_SECONDS, in any program (where the desktop tells background apps of copies: X11)."""

    copied_twice = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.double_copy = DoubleCopy()
        QGuiApplication.clipboard().dataChanged.connect(self._on_copied)

    def stop(self) -> None:
        QGuiApplication.clipboard().dataChanged.disconnect(self._on_copied)

    def _on_copied(self) -> None:
        text = QGuiApplication.clipboard().text(QClipboard.Mode.Clipboard)
        if self.double_copy.copied(text, time.monotonic()):
            self.copied_twice.emit(text)


class TranslationPopup(QFrame):
    """`show_request(request)` translates its text with the job `job_for(text)` makes and shows it
    near the pointer; `open_in_window(text)` for "Open in Dragoman"."""

    open_in_window = Signal(str)
    translated = Signal(str, str, str, str)  # source language, target language, text, translation: for the history
    closed = Signal()

    def __init__(self, worker, job_for: Callable[[str], TranslationJob], parent=None):
        super().__init__(parent, Qt.Tool | Qt.FramelessWindowHint | Qt.WindowStaysOnTopHint)
        self.setObjectName("popup")
        self.worker = worker
        self.job_for = job_for
        self.job_id = 0
        self.job: TranslationJob | None = None
        self.source_text = ""
        self.detected = ""  # the language found in the text, when the source is "Detect language"
        self.segments: list[str] = []
        self.was_active = False

        self.languages = QLabel(objectName="hint")
        close = QToolButton(text="×", toolTip="Close (Esc)", autoRaise=True)
        self.translation = TextPane(objectName="popupTranslation", readOnly=True)
        self.translation.setMaximumHeight(240)
        self.status = QLabel(objectName="hint", wordWrap=True)
        self.copy_button = QPushButton("Copy", toolTip="Copy the translation")
        self.open_button = QPushButton("Open in Dragoman", objectName="primary",
                                       toolTip="Edit the text and its translation in the window")
        header = QHBoxLayout()
        header.addWidget(self.languages, 1)
        header.addWidget(close)
        footer = QHBoxLayout()
        footer.addWidget(self.status, 1)
        footer.addWidget(self.copy_button)
        footer.addWidget(self.open_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 8, 12, 10)
        layout.addLayout(header)
        layout.addWidget(self.translation, 1)
        layout.addLayout(footer)
        self.setFixedWidth(POPUP_WIDTH)

        close.clicked.connect(self.close)
        QShortcut(QKeySequence("Escape"), self, self.close)
        self.copy_button.clicked.connect(self.copy_translation)
        self.open_button.clicked.connect(self._open_in_window)
        worker.detected.connect(self._on_detected)
        worker.partial.connect(self._on_partial)
        worker.translated.connect(self._on_translated)
        worker.failed.connect(self._on_failed)
        worker.cancelled.connect(self._on_cancelled)

    def show_request(self, request: PopupRequest) -> None:
        self._cancel()
        self.source_text = request.text.strip()
        self.translation.clear()
        self.translation.setToolTip(self.source_text)
        self.segments = []
        self.detected = ""
        if not self.source_text:
            self.job = None
            self.languages.setText("Dragoman")
            self.status.setText(NOTHING_TO_TRANSLATE)
        else:
            self.job = self.job_for(self.source_text)
            self.segments = [""] * len(self.job.texts)
            self._show_languages(self.job.source if not self.job.detect else "")
            self.status.setText("Translating…")
            self.job_id = self.worker.submit(self.job)
        self.copy_button.setEnabled(False)
        self.open_button.setEnabled(bool(self.source_text))
        self.adjustSize()
        self._place_near(QCursor.pos())
        self.show()
        self.raise_()
        self.activateWindow()

    def _place_near(self, pointer: QPoint) -> None:
        """Below and right of the pointer, inside the screen it is on."""
        screen = QGuiApplication.screenAt(pointer) or QGuiApplication.primaryScreen()
        area = screen.availableGeometry()
        x = min(pointer.x() + POINTER_GAP, area.right() - self.width())
        y = pointer.y() + POINTER_GAP
        if y + self.height() > area.bottom():  # no room below: above the pointer
            y = pointer.y() - POINTER_GAP - self.height()
        self.move(max(area.left(), x), max(area.top(), y))

    def _show_languages(self, source: str) -> None:
        target = get_language(self.job.target).name if self.job else ""
        origin = get_language(source).name if source else "Detecting…"
        self.languages.setText(f"{origin} → {target}")

    def copy_translation(self) -> None:
        QGuiApplication.clipboard().setText(self.translation.toPlainText())
        self.status.setText("Copied")

    def _open_in_window(self) -> None:
        self.open_in_window.emit(self.source_text)
        self.close()

    # -- what the worker says ------------------------------------------------------------------------

    def _on_detected(self, job_id: int, code: str) -> None:
        if job_id == self.job_id and self.job is not None:
            self.detected = code
            self._show_languages(code or self.job.source)

    def _on_partial(self, job_id: int, index: int, text: str) -> None:
        if job_id == self.job_id and index < len(self.segments):
            self.segments[index] = text
            self.translation.setPlainText("\n".join(self.segments))

    def _on_translated(self, job_id: int, texts: list) -> None:
        if job_id == self.job_id:
            self.job_id = 0
            self.translation.setPlainText("\n".join(texts))
            self.status.clear()
            self.copy_button.setEnabled(True)
            if self.job is not None:
                self.translated.emit(self.detected or self.job.source, self.job.target, self.source_text, "\n".join(texts))

    def _on_failed(self, job_id: int, message: str) -> None:
        if job_id == self.job_id:
            self.job_id = 0
            self.status.setText(f"Translation failed: {message}")

    def _on_cancelled(self, job_id: int) -> None:
        if job_id == self.job_id:
            self.job_id = 0
            self.status.setText("Stopped: Open in Dragoman to translate it there")

    # -- closing -------------------------------------------------------------------------------------

    def _cancel(self) -> None:
        if self.job_id:
            self.worker.cancel(self.job_id)
            self.job_id = 0

    def changeEvent(self, event: QEvent) -> None:
        """A click elsewhere (the popup loses the focus it had) closes it."""
        if event.type() == QEvent.ActivationChange:
            if self.isActiveWindow():
                self.was_active = True
            elif self.was_active and self.isVisible():
                self.close()
        super().changeEvent(event)

    def closeEvent(self, event) -> None:
        self._cancel()
        self.was_active = False
        super().closeEvent(event)
        self.closed.emit()
