"""A real global shortcut from the desktop, through the XDG GlobalShortcuts portal
(org.freedesktop.portal.GlobalShortcuts: KDE Plasma 6, GNOME 48, Hyprland), over D-Bus with jeepney.

PySide6's QtDBus cannot build BindShortcuts' a(sa{sv}) argument (app.desktop_shortcut says why), so
this speaks D-Bus itself, blocking, on the thread that calls it (app.window.global_shortcut runs it
on its own). The portal answers CreateSession and BindShortcuts later, with a Response signal on a
request object whose path is known in advance; the desktop decides the key (it may ask the person
first) and says which in the response; Activated comes each time the key is pressed.
"""

from __future__ import annotations

import secrets
import socket
import threading
from collections import deque
from typing import Any, Callable

from jeepney import DBusAddress, HeaderFields, MatchRule, Message, MessageType, new_method_call
from jeepney.bus_messages import message_bus
from jeepney.io.blocking import DBusConnection, Proxy, open_dbus_connection

PORTAL = DBusAddress("/org/freedesktop/portal/desktop", bus_name="org.freedesktop.portal.Desktop",
                     interface="org.freedesktop.portal.GlobalShortcuts")
REQUEST_INTERFACE = "org.freedesktop.portal.Request"
PROPERTIES_INTERFACE = "org.freedesktop.DBus.Properties"
SHORTCUT_ID = "popup"
SHORTCUT_DESCRIPTION = "Translate the selection in a popup"
PREFERRED_TRIGGER = "CTRL+ALT+D"  # the XDG shortcuts notation; the desktop may give another key
CALL_TIMEOUT_S = 25  # D-Bus's own default: the bus may first start the portal
NO_PORTAL_ERRORS = ("org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner")


class PortalUnavailable(Exception):
    """Why the desktop gives no global shortcut, in a few words ("no desktop portal on the session bus")."""


class PortalShortcut:
    """`bind()` asks the portal for the popup's shortcut and returns the key the desktop gave ("" while
    none is assigned); `listen(activated, changed)` then calls `activated()` at each press and
    `changed(key)` when the person changes it, until `stop()` (from any thread)."""

    def __init__(self, bus: str = "SESSION"):
        self.bus = bus  # "SESSION" or a D-Bus address
        self.connection: DBusConnection | None = None
        self.session = ""
        self.lock = threading.Lock()
        self.stopped = False
        # Where the connection puts the signals it receives (its filters, made on connecting).
        self.responses: deque[Message] = deque()
        self.shortcut_signals: deque[Message] = deque()

    def bind(self) -> str:
        """Raises PortalUnavailable where there is no session bus, no portal, no GlobalShortcuts, or the desktop refuses."""
        self._connect()
        self._call(new_method_call(PORTAL.with_interface(PROPERTIES_INTERFACE), "Get", "ss",
                                   (PORTAL.interface, "version")))  # an error where the portal has no GlobalShortcuts
        results = self._request("CreateSession", "", (), session_handle_token=("s", _token()))
        self.session = str(results.get("session_handle", ("s", ""))[1])
        if not self.session:
            raise PortalUnavailable("the desktop portal made no shortcut session")
        shortcut = {"description": ("s", SHORTCUT_DESCRIPTION), "preferred_trigger": ("s", PREFERRED_TRIGGER)}
        results = self._request("BindShortcuts", "oa(sa{sv})s", (self.session, [(SHORTCUT_ID, shortcut)], ""))
        return _trigger(results.get("shortcuts", ("a(sa{sv})", []))[1])

    def listen(self, activated: Callable[[], None], changed: Callable[[str], None]) -> None:
        """Blocks until stop(). Presses of other sessions' shortcuts are not ours."""
        assert self.connection is not None, "bind() first"
        try:
            while True:
                message = self.connection.recv_until_filtered(self.shortcut_signals)
                session, *rest = message.body
                if session != self.session:
                    continue
                member = message.header.fields[HeaderFields.member]
                if member == "Activated" and rest[0] == SHORTCUT_ID:
                    activated()
                elif member == "ShortcutsChanged":
                    changed(_trigger(rest[0]))  # Deactivated (the key let go) is nothing to the popup
        except OSError:  # stop() shut the socket
            return

    def stop(self) -> None:
        """Ends listen() (and a bind() still waiting for the desktop); the portal ends the session with the connection."""
        with self.lock:
            self.stopped = True
            if self.connection is not None:
                self.connection.sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        """The connection closed (after bind() failed, or listen() ended); stop() may still come."""
        with self.lock:
            if self.connection is not None:
                self.connection.close()
                self.connection = None

    # -- D-Bus -----------------------------------------------------------------------------------

    def _connect(self) -> None:
        try:
            connection = open_dbus_connection(self.bus)
        except KeyError:
            raise PortalUnavailable("no D-Bus session bus") from None
        except OSError as e:
            raise PortalUnavailable(f"the D-Bus session bus cannot be reached ({e.strerror or e})") from None
        with self.lock:
            if self.stopped:
                connection.close()
                raise PortalUnavailable("stopped")
            self.connection = connection
        bus = Proxy(message_bus, connection, timeout=CALL_TIMEOUT_S)
        # Subscribed before any call: a response may come before the call's own reply.
        responses = MatchRule(type="signal", interface=REQUEST_INTERFACE, member="Response")
        shortcuts = MatchRule(type="signal", interface=PORTAL.interface, path=PORTAL.object_path)
        bus.AddMatch(responses)
        bus.AddMatch(shortcuts)
        connection.filter(responses, queue=self.responses)  # kept for the connection's life: never left
        connection.filter(shortcuts, queue=self.shortcut_signals)

    def _call(self, message: Message) -> tuple:
        """The reply's body; PortalUnavailable when the reply is an error."""
        connection = self.connection
        if connection is None:  # closed meanwhile
            raise PortalUnavailable("stopped")
        try:
            reply = connection.send_and_get_reply(message, timeout=CALL_TIMEOUT_S)
        except TimeoutError:
            raise PortalUnavailable("the desktop portal does not answer") from None
        except OSError:
            raise PortalUnavailable("stopped") from None
        if reply.header.message_type == MessageType.error:
            error = reply.header.fields.get(HeaderFields.error_name, "")
            if error in NO_PORTAL_ERRORS:
                raise PortalUnavailable("no desktop portal on the session bus")
            raise PortalUnavailable("the desktop portal has no GlobalShortcuts")
        return reply.body

    def _request(self, method: str, signature: str, arguments: tuple, **options: tuple[str, Any]) -> dict:
        """Call a portal method that answers with a Request (its last argument: the options); the
        results of its Response."""
        options["handle_token"] = ("s", _token())
        (handle,) = self._call(new_method_call(PORTAL, method, signature + "a{sv}", (*arguments, options)))
        connection = self.connection
        if connection is None:  # closed meanwhile
            raise PortalUnavailable("stopped")
        try:
            while True:
                response = connection.recv_until_filtered(self.responses)
                if response.header.fields.get(HeaderFields.path) == handle:
                    break
        except OSError:
            raise PortalUnavailable("stopped") from None
        code, results = response.body
        if code != 0:
            raise PortalUnavailable("the desktop refused the shortcut" if code == 1 else "the desktop portal failed")
        return results


def _token() -> str:
    return "dragoman" + secrets.token_hex(8)


def _trigger(shortcuts: list) -> str:
    """The key the desktop gave the popup's shortcut, as it writes it ("" where none is assigned)."""
    for shortcut_id, properties in shortcuts:
        if shortcut_id == SHORTCUT_ID:
            return str(properties.get("trigger_description", ("s", ""))[1])
    return ""
