"""A private D-Bus session bus (a real dbus-daemon) and, on it, a small desktop portal that implements
org.freedesktop.portal.GlobalShortcuts as xdg-desktop-portal does: CreateSession and BindShortcuts
answer with a Request handle and then its Response signal; `press()` emits Activated, as a desktop
does when its key is pressed."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import threading
from pathlib import Path

from jeepney import DBusAddress, HeaderFields, MessageType, new_error, new_method_return, new_signal
from jeepney.bus_messages import message_bus
from jeepney.io.blocking import Proxy, open_dbus_connection

PORTAL_NAME = "org.freedesktop.portal.Desktop"
PORTAL_PATH = "/org/freedesktop/portal/desktop"
SHORTCUTS = "org.freedesktop.portal.GlobalShortcuts"
# Nothing but a bus: no service folders, so no real portal of this machine is started on it.
BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:dir={folder}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""


class SessionBus:
    """`dbus-daemon` on a private socket; `address` for DBUS_SESSION_BUS_ADDRESS."""

    def __init__(self):
        self.folder = tempfile.mkdtemp(prefix="dragoman-bus-")
        config = Path(self.folder) / "bus.conf"
        config.write_text(BUS_CONFIG.format(folder=self.folder))
        self.daemon = subprocess.Popen([shutil.which("dbus-daemon"), "--config-file", str(config), "--nofork",
                                        "--print-address"], stdout=subprocess.PIPE, text=True)
        self.address = self.daemon.stdout.readline().strip()

    def stop(self) -> None:
        self.daemon.terminate()
        self.daemon.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


class FakePortal:
    """The portal on `address`, serving on its own thread; with `global_shortcuts` False it is a portal
    without that interface. `trigger` is the key it says it gave; `bound` keeps what apps asked for."""

    def __init__(self, address: str, global_shortcuts: bool = True, trigger: str = "Ctrl+Alt+D"):
        self.global_shortcuts = global_shortcuts
        self.trigger = trigger
        self.bound: list[tuple[str, dict]] = []
        self.handles: list[str] = []  # the object paths CreateSession gave out
        self.connection = open_dbus_connection(address)
        Proxy(message_bus, self.connection).RequestName(PORTAL_NAME)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def press(self) -> None:
        """The person presses each bound shortcut's key and lets it go."""
        for handle in self.handles:
            for shortcut_id, _ in self.bound:
                for signal in ("Activated", "Deactivated"):
                    self._emit(PORTAL_PATH, SHORTCUTS, signal, "osta{sv}", (handle, shortcut_id, 0, {}))

    def change_trigger(self, trigger: str) -> None:
        """The person gives the shortcuts another key in the desktop's settings."""
        self.trigger = trigger
        for handle in self.handles:
            self._emit(PORTAL_PATH, SHORTCUTS, "ShortcutsChanged", "oa(sa{sv})", (handle, self._given()))

    def stop(self) -> None:
        self.connection.sock.shutdown(socket.SHUT_RDWR)
        self.thread.join()
        self.connection.close()

    def _emit(self, path: str, interface: str, member: str, signature: str, body: tuple) -> None:
        self.connection.send(new_signal(DBusAddress(path, interface=interface), member, signature, body))

    def _serve(self) -> None:
        try:
            while True:
                self._answer(self.connection.receive())
        except OSError:  # stop()
            return

    def _answer(self, call) -> None:
        fields = call.header.fields
        if call.header.message_type != MessageType.method_call:
            return
        method = (fields.get(HeaderFields.interface), fields.get(HeaderFields.member))
        if method == ("org.freedesktop.DBus.Properties", "Get") and call.body == (SHORTCUTS, "version") \
                and self.global_shortcuts:
            self.connection.send(new_method_return(call, "v", (("u", 1),)))
        elif method == (SHORTCUTS, "CreateSession") and self.global_shortcuts:
            options = call.body[0]
            handle = f"{PORTAL_PATH}/session/{_sender(call)}/{options['session_handle_token'][1]}"
            self.handles.append(handle)
            self._respond(call, options, {"session_handle": ("s", handle)})
        elif method == (SHORTCUTS, "BindShortcuts") and self.global_shortcuts:
            _handle, shortcuts, _parent_window, options = call.body
            self.bound = [(shortcut_id, {k: v[1] for k, v in properties.items()}) for shortcut_id, properties in shortcuts]
            self._respond(call, options, {"shortcuts": ("a(sa{sv})", self._given())})
        else:
            name = "org.freedesktop.DBus.Error.UnknownMethod" if method[0] != "org.freedesktop.DBus.Properties" \
                else "org.freedesktop.DBus.Error.InvalidArgs"
            self.connection.send(new_error(call, name, "s", (f"No such method {method[1]}",)))

    def _given(self) -> list:
        """The bound shortcuts as the portal describes them, with the key they have."""
        return [(shortcut_id, {"description": ("s", properties["description"]),
                               "trigger_description": ("s", self.trigger)}) for shortcut_id, properties in self.bound]

    def _respond(self, call, options: dict, results: dict) -> None:
        """The Request handle as the reply, then its Response: as xdg-desktop-portal answers."""
        handle = f"{PORTAL_PATH}/request/{_sender(call)}/{options['handle_token'][1]}"
        self.connection.send(new_method_return(call, "o", (handle,)))
        self._emit(handle, "org.freedesktop.portal.Request", "Response", "ua{sv}", (0, results))


def _sender(call) -> str:
    return call.header.fields[HeaderFields.sender][1:].replace(".", "_")


def dbus_daemon_available() -> bool:
    return shutil.which("dbus-daemon") is not None and os.name == "posix"
