"""The desktop's global shortcut: with a GlobalShortcuts portal on the session bus (a real dbus-daemon
and a portal on it, tests/app/fake_portal.py), the window binds the popup's key, Settings names it, and
a press opens the popup on the copied text, a key changed on the desktop is followed; with no portal, Settings says this desktop gives no global
shortcut and what to do instead. The real window, worker and tiny model."""

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication

from fake_portal import FakePortal, SessionBus, dbus_daemon_available
from recorder import WAIT_MS

pytestmark = pytest.mark.skipif(not dbus_daemon_available(), reason="needs dbus-daemon (Debian package dbus)")


@pytest.fixture
def desktop_bus(monkeypatch):
    """A private D-Bus bus (a dbus-daemon of its own), the desktop's for this test."""
    bus = SessionBus()
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", bus.address)
    yield bus.address
    bus.stop()


def shortcut_note_in_settings(window) -> str:
    """The line the Settings dialog shows about the global shortcut."""
    shown = []

    def read():
        dialog = QApplication.activeModalWidget()
        shown.append(dialog.shortcut_note.text())
        dialog.reject()
    QTimer.singleShot(0, read)
    window.open_settings()
    return shown[0]


def test_the_desktops_key_opens_the_popup_on_the_copied_text(qtbot, open_window, settings, desktop_bus):
    portal = FakePortal(desktop_bus, trigger="Ctrl+Alt+D")
    try:
        window = open_window(settings)
        qtbot.waitUntil(lambda: window.desktop.global_shortcut.note.startswith("Global shortcut: "), timeout=WAIT_MS)
        assert shortcut_note_in_settings(window) == ("Global shortcut: Ctrl+Alt+D translates the selection in a popup "
                                                     "(given by the desktop: change it in its shortcut settings).")
        assert [shortcut_id for shortcut_id, _ in portal.bound] == ["popup"]

        QGuiApplication.clipboard().setText("Good morning.")
        assert not window.desktop.popup.isVisible()
        portal.press()
        qtbot.waitUntil(window.desktop.popup.isVisible, timeout=WAIT_MS)
        assert window.desktop.popup.translation.toolTip() == "Good morning."
        qtbot.waitUntil(window.desktop.popup.copy_button.isEnabled, timeout=WAIT_MS)
        assert window.desktop.popup.translation.toPlainText().strip()

        portal.change_trigger("Meta+T")  # changed in the desktop's settings: Settings follows
        qtbot.waitUntil(lambda: window.desktop.global_shortcut.note.startswith("Global shortcut: Meta+T "), timeout=WAIT_MS)
        window.close()
        assert window.desktop.global_shortcut.isFinished()
    finally:
        portal.stop()


def test_without_a_portal_settings_say_there_is_no_global_shortcut_and_what_to_do(qtbot, open_window, settings,
                                                                                  desktop_bus):
    window = open_window(settings)
    qtbot.waitUntil(lambda: window.desktop.global_shortcut.isFinished(), timeout=WAIT_MS)
    note = shortcut_note_in_settings(window)
    assert note.startswith("This desktop gives Dragoman no global shortcut (no desktop portal on the session bus). ")
    assert "bind `dragoman popup` to a key" in note or "run `dragoman popup` from a key" in note
    assert "Ctrl+C twice" in note


def test_a_portal_without_global_shortcuts_is_said_too(qtbot, open_window, settings, desktop_bus):
    portal = FakePortal(desktop_bus, global_shortcuts=False)
    try:
        window = open_window(settings)
        qtbot.waitUntil(lambda: window.desktop.global_shortcut.isFinished(), timeout=WAIT_MS)
        assert shortcut_note_in_settings(window).startswith(
            "This desktop gives Dragoman no global shortcut (the desktop portal has no GlobalShortcuts). ")
    finally:
        portal.stop()
