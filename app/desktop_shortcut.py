"""Translate from anywhere, the parts that are not Qt: what a desktop offers for a global shortcut,
said in one line for Settings, and DeepL's "Ctrl+C twice" (the same text copied twice quickly).

Where the desktop has the XDG GlobalShortcuts portal (KDE Plasma 6, GNOME 48, Hyprland), Dragoman
asks it for a key (app.portal_shortcut): its BindShortcuts takes an a(sa{sv}) list, which PySide6's
QtDBus cannot build (QDBusArgument.beginArray needs an element type registered with D-Bus, and
PySide6 has no qDBusRegisterMetaType), so that speaks D-Bus with jeepney. Elsewhere Dragoman grabs no
key itself: on X11 any program could, but the desktop's own keyboard settings do it better (they
show the binding beside the others, and conflicts); on Wayland no program can grab keys. There a key
bound to `dragoman popup` hands the selection to the running app.
"""

from __future__ import annotations

from dataclasses import dataclass

DOUBLE_COPY_SECONDS = 0.5  # DeepL's: two copies this close are one "translate this"
POPUP_COMMAND = "dragoman popup"


def shortcut_advice(platform: str, session_type: str) -> str:
    """What the desktop offers for a global shortcut, and what to do there. `platform`: Qt's platform
    name (xcb, wayland, windows, cocoa, offscreen...); `session_type`: $XDG_SESSION_TYPE."""
    if platform == "wayland" or (platform not in ("xcb", "windows", "cocoa") and session_type == "wayland"):
        return (f"Wayland: bind `{POPUP_COMMAND}` to a key in your desktop's keyboard settings; no global shortcut "
                "can be registered by apps there. Wayland keeps the selection from apps in the background: bind "
                f"`sh -c '{POPUP_COMMAND} --text \"$(wl-paste --primary)\"'` (wl-clipboard) to translate it.")
    if platform == "xcb" or session_type == "x11":
        return (f"X11: bind `{POPUP_COMMAND}` to a key in your desktop's keyboard settings (GNOME: Keyboard → "
                "Custom Shortcuts; KDE: Shortcuts → Custom Shortcuts; Xfce: Keyboard → Application Shortcuts). "
                "It translates the text selected in any window, or the clipboard when nothing is selected; "
                "or turn on Ctrl+C twice.")
    return (f"This desktop gives apps no global shortcut: run `{POPUP_COMMAND}` from a key your system lets you "
            "bind to a command, or turn on Ctrl+C twice.")


def portal_shortcut_note(trigger: str) -> str:
    """What Settings says where the desktop's portal gave the popup a global shortcut (`trigger`: the
    key as the desktop writes it, "" while none is assigned)."""
    if not trigger:
        return ("Global shortcut: none assigned yet: give Dragoman's \"Translate the selection in a popup\" a key "
                "in the desktop's shortcut settings.")
    return (f"Global shortcut: {trigger} translates the selection in a popup (given by the desktop: change it "
            "in its shortcut settings).")


def no_global_shortcut_note(reason: str, platform: str, session_type: str) -> str:
    """What Settings says where the desktop gives no global shortcut through a portal (`reason`: why, in a
    few words), with the fallbacks."""
    return f"This desktop gives Dragoman no global shortcut ({reason}). " + shortcut_advice(platform, session_type)


@dataclass
class DoubleCopy:
    """Feed it each copy (`copied`): true for the second of two copies of the same text within
    DOUBLE_COPY_SECONDS. A third copy starts a new pair."""

    last: tuple[str, float] | None = None

    def copied(self, text: str, when: float) -> bool:
        """`when`: seconds on a monotonic clock."""
        last, self.last = self.last, (text, when)
        if last is not None and text.strip() and last[0] == text and 0 <= when - last[1] <= DOUBLE_COPY_SECONDS:
            self.last = None
            return True
        return False
