"""App tests run Qt offscreen, with every file under a temporary DRAGOMAN_HOME."""

import gc
import os

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

# The offscreen platform says what it cannot do (it has no window manager); these notes are not
# warnings about our code, everything else Qt warns about fails the test.
OFFSCREEN_NOTES = (
    r"^This plugin does not support propagateSizeHints\(\)",
    r"^This plugin does not support raise\(\)",
    r"^This plugin does not support grabbing the keyboard",
    # A tray icon shown there (tests that pretend the desktop has a tray): it has no tray to watch.
    r"^QObject::connect: No such signal QPlatformNativeInterface::systemTrayWindowChanged",
)


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/app/" in item.nodeid.replace(os.sep, "/"):
            item.add_marker(pytest.mark.qt_log_ignore(*OFFSCREEN_NOTES))


@pytest.fixture(autouse=True)
def collect_garbage_on_the_gui_thread():
    """Python's garbage collector must not run on an engine thread and free a test's widgets there
    (what app.window.qt_compat.MainThreadGarbageCollector prevents in the app): off during each test, then
    a full collection here, on the GUI thread, once the test's windows are closed."""
    gc.disable()
    yield
    gc.collect(1)  # enough: with collection off, all this test made is still in the young generations
    gc.enable()


@pytest.fixture(autouse=True)
def paths(tmp_path, monkeypatch):
    """The app's folders, all under tmp_path (no test reads or writes the real user's settings)."""
    from dragoman.app.settings import AppPaths

    monkeypatch.setenv("DRAGOMAN_HOME", str(tmp_path / "home"))
    # Nor asks the person's desktop for a global shortcut: a test that wants a portal starts its own bus.
    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS", raising=False)
    return AppPaths.default()


@pytest.fixture
def settings(tiny_checkpoint):
    """The window's settings for tiny_checkpoint on the CPU in float32, decoding greedy and short (a
    test may change them)."""
    from dragoman.app.settings import Settings

    return Settings(model_dir=str(tiny_checkpoint), device="cpu", precision="float32", num_beams=1, max_length=12,
                    source_language="eng_Latn", target_language="fra_Latn")


class Answers:
    """Stands in for the confirmation dialogs: gives the answers in turn and keeps the questions."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.questions = []

    def __call__(self, title, text):
        self.questions.append(text)
        return self.answers.pop(0)


@pytest.fixture
def open_window(qtbot, paths):
    """open_window(settings=None, *answers, files=(), wait_for_model=True): the main window as `dragoman FILE...`
    shows it (settings None: as saved), its worker's signals recorded in window.events. `answers` answer its
    questions in turn (window.documents.ask.questions keeps them); the outputs it would open in a viewer go to
    window.opened. Closed at the end of the test, its engine thread stopped."""
    from PySide6.QtCore import QCoreApplication

    from dragoman.app.settings import Settings
    from dragoman.app.window.gui import show_window
    from recorder import WAIT_MS, Recorder

    windows = []

    def open_window(settings=None, *answers, files=(), wait_for_model=True):
        # The files are looked through on a task thread: the answers are in place before any question.
        window = show_window(paths, settings or Settings.load(paths.settings_file), files)
        window.events = Recorder(window.worker)
        window.documents.ask = Answers(*answers)
        window.opened = []
        window.documents.open_url = lambda url: window.opened.append(url) or True
        qtbot.addWidget(window)
        windows.append(window)
        if wait_for_model:
            qtbot.waitUntil(lambda: window.model_ready, timeout=WAIT_MS)
        return window

    yield open_window
    for window in windows:
        window.close()
        assert window.worker.isFinished()
    QCoreApplication.sendPostedEvents()
