"""`dragoman popup` on X11: a real second process on a real X server (Xvfb) reads the text selected
there (PRIMARY, owned by xclip as by any X program), or the clipboard with --clipboard, and hands it
to the running window's popup. Skipped where Xvfb, xclip or Qt's xcb platform cannot run."""

import os
import shutil
import subprocess
import sys

import pytest

from dragoman.app.window.gui import listen_for_launches
from recorder import WAIT_MS


@pytest.fixture
def x_display():
    """A fresh X server's display (":N"), stopped after the test."""
    if not (shutil.which("Xvfb") and shutil.which("xclip")):
        pytest.skip("needs Xvfb and xclip")
    read, write = os.pipe()
    server = subprocess.Popen(["Xvfb", "-displayfd", str(write), "-nolisten", "tcp"], pass_fds=(write,),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(write)
    with os.fdopen(read) as numbers:
        display = ":" + numbers.readline().strip()
    probe = subprocess.run([sys.executable, "-c", "from PySide6.QtGui import QGuiApplication; QGuiApplication([])"],
                           env={**os.environ, "DISPLAY": display, "QT_QPA_PLATFORM": "xcb"}, capture_output=True)
    if probe.returncode != 0:
        server.kill()
        server.wait()
        pytest.skip("Qt's xcb platform cannot start here (missing xcb libraries)")
    yield display
    server.kill()  # the xclip processes serving its selections end with it
    server.wait()


def own(display: str, selection: str, text: str) -> None:
    """Make `text` the X selection `selection` (primary or clipboard), as a program the person selected or copied in."""
    subprocess.run(["xclip", "-selection", selection], input=text.encode(), env={**os.environ, "DISPLAY": display},
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)


def popup_on_x11(qtbot, paths, display: str, *args: str) -> tuple[int, str]:
    """`dragoman popup ARGS` run on the X server, while this test's window goes on taking launches: its exit
    code and what it said."""
    env = {**os.environ, "DRAGOMAN_HOME": str(paths.data_dir.parent), "DISPLAY": display, "QT_QPA_PLATFORM": "xcb"}
    launched = subprocess.Popen([sys.executable, "-m", "dragoman.app.cli", "popup", *args], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        qtbot.waitUntil(lambda: launched.poll() is not None, timeout=WAIT_MS)
    finally:
        launched.kill()
    return launched.wait(), launched.stderr.read()


def test_the_selection_or_the_clipboard_of_an_x11_desktop_goes_to_the_popup(qtbot, open_window, settings, paths,
                                                                             x_display):
    window = open_window(settings)
    listen_for_launches(window, paths)
    own(x_display, "primary", "The selected words.")
    own(x_display, "clipboard", "The copied words.")

    assert popup_on_x11(qtbot, paths, x_display) == (
        0, "dragoman: Dragoman is already running: the text handed to its popup\n")
    qtbot.waitUntil(lambda: window.desktop.popup.translation.toolTip() == "The selected words.", timeout=WAIT_MS)
    qtbot.waitUntil(lambda: window.desktop.popup.copy_button.isEnabled(), timeout=WAIT_MS)

    assert popup_on_x11(qtbot, paths, x_display, "--clipboard")[0] == 0
    qtbot.waitUntil(lambda: window.desktop.popup.translation.toolTip() == "The copied words.", timeout=WAIT_MS)


# Half a second is the rule; a busy test machine may take longer between two copies by xclip.
WATCH_COPIES = """
from PySide6.QtWidgets import QApplication
app = QApplication([])
import dragoman.app.desktop_shortcut
dragoman.app.desktop_shortcut.DOUBLE_COPY_SECONDS = 600
from dragoman.app.window.popup import ClipboardWatcher
watcher = ClipboardWatcher()
watcher.copied_twice.connect(lambda text: (print(text, flush=True), app.quit()))
print("watching", flush=True)
app.exec()
"""


def test_the_same_text_copied_twice_in_another_x11_program_is_seen_as_ctrl_c_twice(x_display):
    env = {**os.environ, "DISPLAY": x_display, "QT_QPA_PLATFORM": "xcb"}
    watcher = subprocess.Popen([sys.executable, "-c", WATCH_COPIES], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert watcher.stdout.readline() == "watching\n"
        own(x_display, "clipboard", "Copied once.")
        own(x_display, "clipboard", "Copied twice.")
        own(x_display, "clipboard", "Copied twice.")  # a second Ctrl+C: the program takes the clipboard again
        assert watcher.stdout.readline() == "Copied twice.\n"
    finally:
        watcher.kill()
        watcher.wait()
