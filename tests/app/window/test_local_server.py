"""The window's "Serve the APIs" setting: the LibreTranslate and DeepL APIs on 127.0.0.1, over the
window's own model and pipeline (real HTTP from the test, answered with the window's translation), the
address in the status bar; off again, nothing listens; a port in use is said in one line. The real
window, worker and tiny model."""

import json
import socket
import threading
import urllib.error
import urllib.request
from dataclasses import replace

import pytest

from dragoman.app.session.session import TranslationJob
from dragoman.app.window.settings_dialog import SettingsDialog
from recorder import WAIT_MS, translated_in


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def post(url: str, body: dict, headers: dict | None = None) -> dict:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json",
                                                                      **(headers or {})})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)


def test_the_window_serves_both_apis_with_its_model_and_stops_when_turned_off(qtbot, open_window, settings, paths):
    port = free_port()
    window = open_window(replace(settings, serve_apis=True, server_port=port))
    address = f"http://127.0.0.1:{port}"
    assert window.local_server.address == address
    assert window.local_server.label.isVisibleTo(window) and window.local_server.label.text() == f"APIs on {address}"

    answer = post(f"{address}/translate", {"q": "Good morning.", "source": "en", "target": "fr"})
    assert answer["translatedText"] == translated_in(qtbot, window, "Good morning.")  # the window's model and options
    deepl = post(f"{address}/v2/translate", {"text": ["Good morning."], "source_lang": "EN", "target_lang": "FR"})
    assert deepl["translations"][0]["text"] == answer["translatedText"]
    assert window.worker.pipeline is not None  # shared, not closed by the server

    window.apply_settings(replace(window.settings, serve_apis=False))
    assert window.local_server.address == "" and not window.local_server.label.isVisibleTo(window)
    qtbot.waitUntil(lambda: not window.local_server.stopping, timeout=WAIT_MS)
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{address}/languages", timeout=5)
    assert translated_in(qtbot, window, "The cat sleeps.")  # the window's pipeline goes on


def test_a_model_reload_moves_the_server_to_the_new_model(qtbot, open_window, settings):
    port = free_port()
    window = open_window(replace(settings, serve_apis=True, server_port=port))
    first = window.worker.translator
    window.apply_settings(replace(window.settings, precision="int8"))
    qtbot.waitUntil(lambda: window.model_ready and window.worker.translator is not first, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: window.local_server.running is not None, timeout=WAIT_MS)
    assert window.local_server.serving[3] is window.worker.translator
    answer = post(f"http://127.0.0.1:{port}/translate", {"q": "Good morning.", "source": "en", "target": "fr"})
    assert answer["translatedText"] == translated_in(qtbot, window, "Good morning.")


def test_turning_the_server_off_does_not_wait_for_the_requests_it_is_answering(qtbot, open_window, settings):
    """The window goes on at once; the request being answered still gets its whole answer."""
    port = free_port()
    window = open_window(replace(settings, serve_apis=True, server_port=port))
    texts = [f"The small dog {i} sees the green river tomorrow." for i in range(300)]
    answers = []
    asking = threading.Thread(target=lambda: answers.append(
        post(f"http://127.0.0.1:{port}/translate", {"q": texts, "source": "en", "target": "fr"})))
    asking.start()
    qtbot.waitUntil(lambda: window.worker.translator.generator.rows.num_free_rows()
                    < window.worker.translator.generator.rows.capacity, timeout=WAIT_MS)  # being answered
    window.apply_settings(replace(window.settings, serve_apis=False))
    assert asking.is_alive() and window.local_server.stopping  # the window did not wait for it
    asking.join(timeout=WAIT_MS / 1000)
    qtbot.waitUntil(lambda: not window.local_server.stopping, timeout=WAIT_MS)
    # Answered whole: as the window's own pipeline translates the same texts.
    alone = window.worker.pipeline.translate(TranslationJob(texts, "eng_Latn", "fra_Latn", window.typed_options()))
    assert answers[0]["translatedText"] == alone.translations


def test_a_port_in_use_is_said_in_one_line(qtbot, open_window, settings):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        window = open_window(replace(settings, serve_apis=True, server_port=port))
        assert window.local_server.running is None
        assert window.local_server.label.text().startswith(f"API server off: 127.0.0.1:{port} cannot be used (")
        assert "\n" not in window.local_server.label.text()


def test_settings_turn_the_server_on_with_its_port(qtbot, settings, paths):
    dialog = SettingsDialog(settings, paths)
    qtbot.addWidget(dialog)
    assert not dialog.serve_apis.isChecked() and not dialog.server_port.isEnabled()  # off by default
    dialog.serve_apis.setChecked(True)
    assert dialog.server_port.isEnabled() and dialog.server_port.value() == 5000
    dialog.server_port.setValue(5123)
    chosen = dialog.result_settings()
    assert (chosen.serve_apis, chosen.server_port) == (True, 5123)
