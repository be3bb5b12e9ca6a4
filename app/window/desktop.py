"""Translating from anywhere on the desktop, for the main window: the popup (app.window.popup) that
the desktop's global shortcut (app.window.global_shortcut), `dragoman popup`, the tray icon
(app.window.tray) and Ctrl+C twice open, translated through the window's worker so that one model
serves both; and the tray, whose presence keeps the app running when the window closes.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject

from dragoman.app.session.session import TranslationJob
from dragoman.app.window import theme
from dragoman.app.window.global_shortcut import GlobalShortcut
from dragoman.app.window.popup import ClipboardWatcher, TranslationPopup, read_selection
from dragoman.app.window.single_instance import PopupRequest
from dragoman.app.window.tray import TrayIcon, tray_available

if TYPE_CHECKING:
    from dragoman.app.window.main_window import MainWindow


class Desktop(QObject):
    """The window's ways in from the rest of the desktop; `fit()` follows the settings' tray and Ctrl+C
    twice, `stop()` ends them as the app quits."""

    def __init__(self, window: MainWindow):
        super().__init__(window)
        self.window = window
        self.tray: TrayIcon | None = None
        self.clipboard_watcher: ClipboardWatcher | None = None
        self.popup = TranslationPopup(window.worker, self.make_popup_job)
        self.popup.open_in_window.connect(window.open_text)
        self.popup.closed.connect(self._on_popup_closed)
        self.popup.translated.connect(self._keep_in_history)
        self.global_shortcut = GlobalShortcut(parent=self)
        self.global_shortcut.activated.connect(lambda: self.show_popup(read_selection(clipboard_only=False)))
        self.global_shortcut.start()
        self.fit()

    def fit(self) -> None:
        """The tray icon (where the desktop has a tray) and the watch for Ctrl+C twice, as the settings say."""
        settings = self.window.settings
        if settings.tray_icon and tray_available():
            if self.tray is None:
                self.tray = TrayIcon(self.window, self.translate_clipboard)
                self.tray.show()
        elif self.tray is not None:
            self.tray.hide()
            self.tray.deleteLater()
            self.tray = None
        if settings.copy_twice and self.clipboard_watcher is None:
            self.clipboard_watcher = ClipboardWatcher(self)
            self.clipboard_watcher.copied_twice.connect(lambda text: self.show_popup(PopupRequest(text, clipboard=True)))
        elif not settings.copy_twice and self.clipboard_watcher is not None:
            self.clipboard_watcher.stop()
            self.clipboard_watcher.deleteLater()
            self.clipboard_watcher = None

    def make_popup_job(self, text: str) -> TranslationJob:
        """The popup's job: the languages, options and adapter typed text uses now."""
        return replace(self.window.make_job(), texts=text.split("\n"))

    def show_popup(self, request: PopupRequest) -> None:
        """`dragoman popup`, the tray, Ctrl+C twice: the text translated in the popup near the pointer."""
        self.popup.show_request(request)

    def translate_clipboard(self) -> None:
        self.show_popup(read_selection(clipboard_only=True))

    def notify(self, title: str, text: str) -> None:
        """A desktop notification: the tray's message where there is a tray (the status bar says it anyway)."""
        if self.tray is not None:
            self.tray.showMessage(title, text, theme.app_icon())

    def _keep_in_history(self, source_language: str, target_language: str, text: str, translation: str) -> None:
        if self.window.settings.keep_history:
            self.window.history.add(source_language, target_language, text, translation)

    def _on_popup_closed(self) -> None:
        """Started for the popup, with no tray to come back to: once it closes, nothing of the app is left to see."""
        if self.tray is None and not self.window.isVisible() and not self.window.closed_for_good:
            self.window.quit_app()

    def stop(self) -> None:
        self.popup.close()
        if self.tray is not None:
            self.tray.hide()
        if self.clipboard_watcher is not None:
            self.clipboard_watcher.stop()
        self.global_shortcut.stop()
