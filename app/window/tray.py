"""The tray icon, where the desktop has a system tray: show or hide the window, translate the
clipboard in the popup, quit. While it is there, closing the window keeps Dragoman running (the model
stays loaded for the popup); its messages are the desktop notifications (a long document done)."""

from __future__ import annotations

from typing import Callable

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu, QSystemTrayIcon

from dragoman.app.window import theme


def tray_available() -> bool:
    return QSystemTrayIcon.isSystemTrayAvailable()


class TrayIcon(QSystemTrayIcon):
    """Over the main window `window` (its show_or_hide, show_and_raise and quit_app)."""

    def __init__(self, window, translate_clipboard: Callable[[], None]):
        super().__init__(theme.app_icon(), window)
        self.setToolTip("Dragoman")
        self.menu = QMenu()
        self.show_action = QAction("Show Dragoman", self.menu)
        self.clipboard_action = QAction("Translate the clipboard", self.menu)
        self.quit_action = QAction("Quit Dragoman", self.menu)
        self.menu.addAction(self.show_action)
        self.menu.addAction(self.clipboard_action)
        self.menu.addSeparator()
        self.menu.addAction(self.quit_action)
        self.setContextMenu(self.menu)
        self.menu.aboutToShow.connect(lambda: self.show_action.setText(
            "Hide Dragoman" if window.isVisible() else "Show Dragoman"))
        self.show_action.triggered.connect(window.show_or_hide)
        self.clipboard_action.triggered.connect(translate_clipboard)
        self.quit_action.triggered.connect(window.quit_app)
        self.activated.connect(lambda reason: reason == QSystemTrayIcon.Trigger and window.show_or_hide())
        self.messageClicked.connect(window.show_and_raise)
