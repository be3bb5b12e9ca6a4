"""The models dialog: download with progress, cancel, the offline message, import, choose."""

import functools

import pytest
from PySide6.QtCore import Qt

import dragoman.app.window.models_dialog
from dragoman.app import models
from dragoman.app.window.models_dialog import ModelsDialog
from fake_hub import FakeHub

REPO = models.CATALOG[0].repo_id
WAIT_MS = 30_000


@pytest.fixture
def dialog(qtbot, paths):
    dialog = ModelsDialog(paths, current="")
    qtbot.addWidget(dialog)
    dialog.show()
    yield dialog
    dialog.reject()  # waits for a running task


def through(hub_endpoint, monkeypatch, **kwargs):
    monkeypatch.setattr(models, "download_model",
                        functools.partial(models.download_model, endpoint=hub_endpoint, **kwargs))


def test_download_shows_progress_and_installs(qtbot, dialog, paths, bin_checkpoint, monkeypatch):
    values = []
    dialog.progress.valueChanged.connect(values.append)
    with FakeHub(REPO, bin_checkpoint) as hub:
        through(hub.endpoint, monkeypatch)
        qtbot.mouseClick(dialog.download_button, Qt.LeftButton)
        assert not dialog.download_button.isEnabled() and dialog.cancel_button.isEnabled()
        qtbot.waitUntil(lambda: dialog.installed.count() == 1, timeout=WAIT_MS)
    assert dialog.status.text() == "Installed nllb-200-distilled-600M."
    assert values and max(values) == 1000 and not dialog.progress.isVisible()
    qtbot.waitUntil(lambda: dialog.task is None, timeout=WAIT_MS)
    with qtbot.waitSignal(dialog.accepted):
        qtbot.mouseClick(dialog.use_button, Qt.LeftButton)
    assert dialog.chosen_path() == str(paths.models_dir / "nllb-200-distilled-600M")


def test_cancel_stops_the_download(qtbot, dialog, paths, bin_checkpoint, monkeypatch):
    monkeypatch.setattr(models, "DOWNLOAD_CHUNK", 8 << 10)
    with FakeHub(REPO, bin_checkpoint, chunk=8 << 10, delay=0.02) as hub:
        through(hub.endpoint, monkeypatch)
        qtbot.mouseClick(dialog.download_button, Qt.LeftButton)
        qtbot.waitUntil(lambda: dialog.progress.value() > 0, timeout=WAIT_MS)
        qtbot.mouseClick(dialog.cancel_button, Qt.LeftButton)
        qtbot.waitUntil(lambda: dialog.task is None, timeout=WAIT_MS)
    assert dialog.status.text().startswith("Cancelled")
    assert dialog.installed.count() == 0 and dialog.download_button.isEnabled()


def test_offline_download_says_so(qtbot, dialog, monkeypatch):
    through("http://127.0.0.1:9", monkeypatch)
    qtbot.mouseClick(dialog.download_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: dialog.message.text() != "", timeout=WAIT_MS)
    assert dialog.message.text() == models.OFFLINE_MESSAGE


def test_import_folder_from_the_dialog(qtbot, dialog, paths, tiny_checkpoint, monkeypatch):
    monkeypatch.setattr(dragoman.app.window.models_dialog, "choose_model_folder", lambda parent: str(tiny_checkpoint))
    qtbot.mouseClick(dialog.import_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: dialog.installed.count() == 1, timeout=WAIT_MS)
    assert dialog.chosen_path() == str(paths.models_dir / tiny_checkpoint.name)
