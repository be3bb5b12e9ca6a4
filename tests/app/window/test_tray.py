"""The tray icon, where the desktop has a tray: closing the window keeps the app (and its model) in
the tray; the tray shows the window again, translates the clipboard in the popup, and quits. Where
there is no tray, closing the window quits. The real window, worker and tiny model."""

import pytest
from PySide6.QtGui import QGuiApplication

import dragoman.app.window.desktop
from dragoman.app.settings import Settings
from recorder import WAIT_MS


@pytest.fixture
def with_a_tray(monkeypatch):
    monkeypatch.setattr(dragoman.app.window.desktop, "tray_available", lambda: True)


def test_closing_the_window_keeps_the_app_in_the_tray_until_quit(qtbot, open_window, settings, paths, with_a_tray):
    window = open_window(settings)
    assert window.desktop.tray is not None and window.desktop.tray.isVisible()
    window.source.setPlainText("Kept while hidden.")
    window.close()
    assert not window.isVisible() and window.worker.isRunning()
    assert Settings.load(paths.settings_file).last_text == "Kept while hidden."
    window.desktop.tray.show_action.trigger()
    assert window.isVisible()

    QGuiApplication.clipboard().setText("The cat sleeps.")
    window.desktop.tray.clipboard_action.trigger()
    assert window.desktop.popup.isVisible() and window.desktop.popup.translation.toolTip() == "The cat sleeps."
    qtbot.waitUntil(lambda: window.desktop.popup.copy_button.isEnabled(), timeout=WAIT_MS)

    window.desktop.tray.quit_action.trigger()
    assert window.closed_for_good and not window.desktop.tray.isVisible()
    assert window.worker.wait(WAIT_MS)


def test_with_the_tray_turned_off_closing_the_window_quits(qtbot, open_window, settings, with_a_tray):
    settings.tray_icon = False
    window = open_window(settings)
    assert window.desktop.tray is None
    window.close()
    assert window.closed_for_good and window.worker.wait(WAIT_MS)
