"""The settings dialog offers only what the chosen device can do, and settings that fail to load
do not cost the model that worked. Real widgets; the last test the real window and tiny model."""

from dataclasses import replace

import pytest

from dragoman.app.window import settings_dialog
from dragoman.app.window.settings_dialog import SettingsDialog
from recorder import WAIT_MS, translated_in


def offered(dialog):
    return [dialog.precision.itemData(i) for i in range(dialog.precision.count())]


def test_on_the_cpu_no_half_precision_and_gpu_settings_greyed_with_a_note(qtbot, settings, paths, monkeypatch):
    monkeypatch.setattr(settings_dialog, "device_choices", lambda: [("auto", "Automatic"), ("cpu", "CPU")])
    dialog = SettingsDialog(replace(settings, precision="float16"), paths)
    qtbot.addWidget(dialog)
    dialog.show()
    assert offered(dialog) == ["auto", "float32", "int8"]
    assert dialog.result_settings().precision == "auto"  # a saved float16 is not kept for the CPU
    assert not dialog.gpu_memory.isEnabled() and not dialog.adapter_slots.isEnabled()
    assert dialog.gpu_note.isVisible() and "this machine has none" in dialog.gpu_note.text()
    dialog.device.setCurrentIndex(dialog.device.findData("auto"))  # no GPU: automatic is the CPU
    assert offered(dialog) == ["auto", "float32", "int8"] and not dialog.gpu_memory.isEnabled()


def test_a_gpu_gets_its_precisions_and_settings(qtbot, settings, paths, monkeypatch):
    monkeypatch.setattr(settings_dialog, "device_choices",
                        lambda: [("auto", "Automatic"), ("cpu", "CPU"), ("cuda:0", "GPU 0: a card")])
    dialog = SettingsDialog(replace(settings, device="cuda:0", precision="bfloat16"), paths)
    qtbot.addWidget(dialog)
    dialog.show()
    assert offered(dialog) == ["auto", "float32", "bfloat16", "float16"]
    assert dialog.result_settings().precision == "bfloat16"
    assert dialog.gpu_memory.isEnabled() and dialog.adapter_slots.isEnabled() and not dialog.gpu_note.isVisible()
    dialog.device.setCurrentIndex(dialog.device.findData("cpu"))
    assert offered(dialog) == ["auto", "float32", "int8"] and not dialog.gpu_memory.isEnabled()
    assert dialog.gpu_note.isVisible() and "the CPU is chosen" in dialog.gpu_note.text()


@pytest.mark.parametrize("change", [{"precision": "float16"}, {"device": "cuda:0"}], ids=["precision", "device"])
def test_a_precision_or_device_that_fails_keeps_the_working_model_serving_and_says_why(qtbot, open_window, settings,
                                                                                         paths, change):
    """float16 on the CPU, a GPU this machine has not: the engine refuses them; the model loaded before is
    not unloaded, nor loaded again, and the setting goes back."""
    window = open_window(settings)
    working = window.worker.translator
    loads = sum(1 for event in window.events.events if event[0] == "loaded")
    window.apply_settings(replace(settings, **change))
    (_, why) = window.events.wait(qtbot, "load_refused")
    qtbot.waitUntil(lambda: window.model_ready, timeout=WAIT_MS)
    assert window.worker.translator is working  # the same engine, never unloaded
    assert window.events.find("load_failed") is None
    assert window.pages.currentWidget() is window.translator_page  # not the "could not be loaded" page
    message = window.statusBar().currentMessage()
    assert message == f"Kept the previous model settings: {why}" and "\n" not in message
    assert next(iter(change.values())) in why or "CUDA" in why or "GPU" in why
    assert (window.settings.precision, window.settings.device) == ("float32", "cpu")
    saved = window.settings.load(paths.settings_file)
    assert (saved.precision, saved.device) == ("float32", "cpu")
    assert window.model_label.text() == working.describe()
    assert translated_in(qtbot, window, "Good morning.")
    assert window.worker.translator is working
    assert sum(1 for event in window.events.events if event[0] == "loaded") == loads + 1  # what still runs, said once


def test_where_documents_go_the_tray_ctrl_c_twice_and_what_the_desktop_offers(qtbot, settings, paths, monkeypatch,
                                                                              tmp_path):
    monkeypatch.setattr(settings_dialog, "device_choices", lambda: [("auto", "Automatic"), ("cpu", "CPU")])
    monkeypatch.setenv("XDG_SESSION_TYPE", "wayland")
    monkeypatch.setattr(settings_dialog, "tray_available", lambda: False)
    dialog = SettingsDialog(settings, paths)
    qtbot.addWidget(dialog)
    dialog.show()
    assert dialog.shortcut_note.isVisible()
    assert dialog.shortcut_note.text().startswith(
        "Wayland: bind `dragoman popup` to a key in your desktop's keyboard settings; no global shortcut can be "
        "registered by apps there.")
    assert not dialog.tray_icon.isEnabled() and dialog.tray_icon.toolTip() == "This desktop has no system tray"
    assert dialog.documents_folder.placeholderText() == "Beside each document"
    dialog.documents_folder.setText(str(tmp_path))
    dialog.copy_twice.setChecked(True)
    chosen = dialog.result_settings()
    assert (chosen.documents_folder, chosen.copy_twice, chosen.tray_icon) == (str(tmp_path), True, True)

    monkeypatch.setattr(settings_dialog, "tray_available", lambda: True)
    dialog = SettingsDialog(chosen, paths)
    qtbot.addWidget(dialog)
    assert dialog.tray_icon.isEnabled() and dialog.tray_icon.isChecked()
    dialog.tray_icon.setChecked(False)
    assert dialog.result_settings().tray_icon is False
