"""The desktop's global shortcut for the popup, through the XDG GlobalShortcuts portal
(app.portal_shortcut), on a thread of its own: `activated` at each press of the key, and `note`, the
line Settings shows: the key the desktop gave, or that this desktop gives no global shortcut and
what to do instead (app.desktop_shortcut)."""

from __future__ import annotations

import os
import sys

from PySide6.QtCore import QThread, Signal
from PySide6.QtGui import QGuiApplication

from dragoman.app.desktop_shortcut import no_global_shortcut_note, portal_shortcut_note, shortcut_advice

ASKING = "Asking the desktop for a global shortcut…"


class GlobalShortcut(QThread):
    """Started, it asks the portal on `bus` ("SESSION": the desktop's) for the popup's key; `stop()` ends it."""

    activated = Signal()
    note_changed = Signal(str)

    def __init__(self, bus: str = "SESSION", parent=None):
        super().__init__(parent)
        self.portal = None
        self.note = ASKING
        self.platform = QGuiApplication.platformName(), os.environ.get("XDG_SESSION_TYPE", "")
        if sys.platform.startswith("linux"):
            from dragoman.app.portal_shortcut import PortalShortcut  # jeepney: on Linux only

            self.portal = PortalShortcut(bus)
        else:
            self.note = shortcut_advice(*self.platform)
        self.note_changed.connect(self._keep_note)  # queued: sent from the portal's thread

    def start(self) -> None:
        if self.portal is not None:
            super().start()

    def stop(self) -> None:
        if self.portal is not None:
            self.portal.stop()
            self.wait()

    def run(self) -> None:
        from dragoman.app.portal_shortcut import PortalUnavailable

        portal = self.portal
        assert portal is not None  # `start` runs the thread only with one
        try:
            self.note_changed.emit(portal_shortcut_note(portal.bind()))
            portal.listen(self.activated.emit, lambda trigger: self.note_changed.emit(portal_shortcut_note(trigger)))
        except PortalUnavailable as e:
            if not portal.stopped:
                self.note_changed.emit(no_global_shortcut_note(str(e), *self.platform))
        finally:
            portal.close()

    def _keep_note(self, note: str) -> None:
        self.note = note
