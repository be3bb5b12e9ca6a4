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
)


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/app/" in item.nodeid.replace(os.sep, "/"):
            item.add_marker(pytest.mark.qt_log_ignore(*OFFSCREEN_NOTES))


@pytest.fixture(autouse=True)
def collect_garbage_on_the_gui_thread():
    """Python's garbage collector must not run on an engine thread and free a test's widgets there
    (what app.qt_compat.MainThreadGarbageCollector prevents in the app): off during each test, then
    a full collection here, on the GUI thread, once the test's windows are closed."""
    gc.disable()
    yield
    gc.collect(1)  # enough: with collection off, all this test made is still in the young generations
    gc.enable()


@pytest.fixture(autouse=True)
def paths(tmp_path, monkeypatch):
    """The app's folders, all under tmp_path (no test reads or writes the real user's settings)."""
    from app.settings import AppPaths

    monkeypatch.setenv("DRAGOMAN_HOME", str(tmp_path / "home"))
    return AppPaths.default()

