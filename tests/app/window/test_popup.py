"""Translate from anywhere: `dragoman popup` (a real second process) hands its text to the running
window's popup; the popup streams the translation with its languages, copies it and opens it in the
window; Ctrl+C twice opens it when turned on; started for the popup alone, the window stays hidden
and the app ends with the popup where there is no tray. The real window, worker and tiny model."""

import signal

from PySide6.QtGui import QGuiApplication
from PySide6.QtNetwork import QLocalSocket

from dragoman.app.window.gui import listen_for_launches, show_window
from dragoman.app.window.popup import NOTHING_TO_TRANSLATE
from dragoman.app.window.single_instance import PopupRequest, server_name
from recorder import WAIT_MS
from test_single_instance import launch


def translated_in_popup(qtbot, window) -> str:
    qtbot.waitUntil(lambda: window.desktop.popup.copy_button.isEnabled(), timeout=WAIT_MS)
    return window.desktop.popup.translation.toPlainText()


def test_dragoman_popup_hands_its_text_to_the_running_window(qtbot, open_window, settings, paths):
    window = open_window(settings)
    listen_for_launches(window, paths)
    second = launch(paths, "popup", "--text", "Good morning.")
    qtbot.waitUntil(lambda: second.poll() is not None, timeout=WAIT_MS)
    assert second.returncode == 0
    assert second.stderr.read() == "dragoman: Dragoman is already running: the text handed to its popup\n"
    assert window.desktop.popup.isVisible()
    assert window.desktop.popup.languages.text() == "English → French"
    translation = translated_in_popup(qtbot, window)
    assert translation.strip()
    assert window.desktop.popup.translation.toolTip() == "Good morning."
    assert window.source.toPlainText() == ""  # the window's own text is left alone


def test_the_popup_copies_its_translation_and_opens_the_text_in_the_window(qtbot, open_window, settings):
    window = open_window(settings)
    window.desktop.show_popup(PopupRequest("The cat sleeps.", clipboard=False))
    translation = translated_in_popup(qtbot, window)
    window.desktop.popup.copy_button.click()
    assert QGuiApplication.clipboard().text() == translation
    window.desktop.popup.open_button.click()
    assert not window.desktop.popup.isVisible()
    assert window.source.toPlainText() == "The cat sleeps."
    window.events.wait(qtbot, "translated", window.job_id)


def test_nothing_selected_or_copied_is_said_in_the_popup(qtbot, open_window, settings):
    window = open_window(settings)
    window.desktop.show_popup(PopupRequest("  \n", clipboard=True))
    assert window.desktop.popup.isVisible()
    assert window.desktop.popup.status.text() == NOTHING_TO_TRANSLATE
    assert not window.desktop.popup.open_button.isEnabled() and not window.desktop.popup.copy_button.isEnabled()


def test_copying_the_same_text_twice_opens_the_popup_when_turned_on(qtbot, open_window, settings):
    clipboard = QGuiApplication.clipboard()
    window = open_window(settings)
    clipboard.setText("Once is a copy.")
    clipboard.setText("Once is a copy.")
    assert not window.desktop.popup.isVisible()  # off by default

    settings.copy_twice = True
    window.apply_settings(settings)
    clipboard.setText("Copied once.")
    clipboard.setText("Copied twice.")
    assert not window.desktop.popup.isVisible()  # two different texts
    clipboard.setText("Copied twice.")
    assert window.desktop.popup.isVisible()
    assert window.desktop.popup.translation.toolTip() == "Copied twice."
    assert translated_in_popup(qtbot, window).strip()


def test_started_for_the_popup_the_window_stays_hidden_and_ends_with_it_without_a_tray(qtbot, settings, paths):
    window = show_window(paths, settings, shown=False)
    qtbot.addWidget(window)
    window.desktop.show_popup(PopupRequest("Good evening.", clipboard=True))
    qtbot.waitUntil(lambda: window.model_ready, timeout=WAIT_MS)
    assert translated_in_popup(qtbot, window).strip()
    assert not window.isVisible()
    window.desktop.popup.close()
    assert window.closed_for_good
    assert window.worker.wait(WAIT_MS)


def test_dragoman_popup_with_no_app_running_starts_one_that_later_launches_hand_their_text_to(qtbot, settings,
                                                                                                paths):
    settings.save(paths.settings_file)
    first = launch(paths, "popup", "--text", "Good morning.")
    try:
        qtbot.waitUntil(lambda: listening(paths) or first.poll() is not None, timeout=4 * WAIT_MS)
        second = launch(paths, "popup", "--text", "Good evening.")
        try:
            second.wait(timeout=WAIT_MS / 1000)
        finally:
            second.kill()
        assert second.stderr.read() == "dragoman: Dragoman is already running: the text handed to its popup\n"
        assert first.poll() is None
    finally:
        first.send_signal(signal.SIGINT)  # Ctrl+C in a terminal: the app quits cleanly
        first.wait(timeout=WAIT_MS / 1000)
    assert first.returncode == 0, first.stderr.read()


def listening(paths) -> bool:
    client = QLocalSocket()
    client.connectToServer(server_name(paths))
    connected = client.waitForConnected(100)
    client.abort()
    return connected
