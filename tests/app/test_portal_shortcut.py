"""The GlobalShortcuts portal client against a real dbus-daemon and a portal on it (tests/app/fake_portal.py):
it binds the popup's shortcut, hears its presses, and says in a few words why there is none."""

import threading

import pytest

from fake_portal import FakePortal, SessionBus, dbus_daemon_available
from dragoman.app.portal_shortcut import PREFERRED_TRIGGER, SHORTCUT_ID, PortalShortcut, PortalUnavailable

pytestmark = pytest.mark.skipif(not dbus_daemon_available(), reason="needs dbus-daemon (Debian package dbus)")


@pytest.fixture
def bus():
    bus = SessionBus()
    yield bus.address
    bus.stop()


def test_the_popup_shortcut_is_bound_and_its_presses_heard(bus):
    portal = FakePortal(bus, trigger="Ctrl+Alt+D")
    client = PortalShortcut(bus)
    try:
        assert client.bind() == "Ctrl+Alt+D"
        assert portal.bound == [(SHORTCUT_ID, {"description": "Translate the selection in a popup",
                                               "preferred_trigger": PREFERRED_TRIGGER})]
        pressed = threading.Event()
        listening = threading.Thread(target=client.listen, args=(pressed.set, lambda key: None))
        listening.start()
        portal.press()
        assert pressed.wait(10)
        client.stop()
        listening.join(10)
        assert not listening.is_alive()
    finally:
        client.close()
        portal.stop()


def test_no_portal_no_global_shortcuts_and_no_bus_are_each_said(bus, monkeypatch):
    with pytest.raises(PortalUnavailable, match="^no desktop portal on the session bus$"):
        PortalShortcut(bus).bind()
    portal = FakePortal(bus, global_shortcuts=False)
    try:
        with pytest.raises(PortalUnavailable, match="^the desktop portal has no GlobalShortcuts$"):
            PortalShortcut(bus).bind()
    finally:
        portal.stop()
    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS", raising=False)
    with pytest.raises(PortalUnavailable, match="^no D-Bus session bus$"):
        PortalShortcut().bind()
