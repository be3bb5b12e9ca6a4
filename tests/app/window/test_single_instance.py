"""One running app: a second `dragoman FILE` (a real process) hands FILE to the window already open and
exits; a socket left by a crashed app does not stop the next one; what is not our message (files or a
popup request) is dropped."""

import os
import socket
import subprocess
import sys
from pathlib import Path

from PySide6.QtCore import QDir
from PySide6.QtNetwork import QLocalSocket

from dragoman.app.window.gui import listen_for_launches
from dragoman.app.window.single_instance import LaunchListener, PopupRequest, server_name
from recorder import WAIT_MS


def launch(paths, *args) -> subprocess.Popen:
    """`dragoman ARGS` as the desktop runs it, on the same data folder as the test's window."""
    env = {**os.environ, "DRAGOMAN_HOME": str(paths.data_dir.parent), "QT_QPA_PLATFORM": "offscreen"}
    return subprocess.Popen([sys.executable, "-m", "dragoman.app.cli", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def send(paths, message: bytes) -> QLocalSocket:
    client = QLocalSocket()
    client.connectToServer(server_name(paths))
    assert client.waitForConnected(1000)
    client.write(message)
    client.flush()
    return client


def test_a_second_launch_hands_its_file_to_the_running_window(qtbot, open_window, settings, paths, tmp_path):
    document = tmp_path / "letter.txt"
    document.write_text("Hello world.\n", encoding="utf-8")
    window = open_window(settings, True)  # the answer: yes, translate the document handed over
    listen_for_launches(window, paths)
    second = launch(paths, str(document))
    qtbot.waitUntil(lambda: second.poll() is not None, timeout=WAIT_MS)
    assert second.returncode == 0
    assert second.stderr.read() == "dragoman: Dragoman is already running: 1 file handed to it\n"
    qtbot.waitUntil(lambda: (tmp_path / "letter.fra_Latn.txt").is_file(), timeout=WAIT_MS)
    assert [row.job.source_path for row in window.documents.rows] == [document]


def test_a_socket_left_by_a_crashed_app_is_replaced(qtbot, paths):
    stale = Path(QDir.tempPath()) / server_name(paths)  # where Qt puts the socket on Unix
    left = socket.socket(socket.AF_UNIX)
    left.bind(str(stale))  # bound and closed without unlinking: what a killed app leaves
    left.close()
    assert stale.exists()
    listener = LaunchListener(paths)
    assert listener.listen()
    received = []
    listener.opened.connect(received.append)
    send(paths, b'{"files": []}\n')
    qtbot.waitUntil(lambda: received == [[]], timeout=WAIT_MS)


def test_what_is_not_our_message_is_dropped_and_the_listener_carries_on(qtbot, paths):
    listener = LaunchListener(paths)
    assert listener.listen()
    received = []
    listener.opened.connect(received.append)
    for message in (b"not json\n", b'{"files": "/etc/passwd"}\n', b"[1, 2]\n", b"x" * (2 << 20)):
        client = send(paths, message)
        qtbot.waitUntil(lambda: client.state() == QLocalSocket.LocalSocketState.UnconnectedState, timeout=WAIT_MS)
    assert received == []
    send(paths, b'{"files": ["/tmp/a.txt"]}\n')
    qtbot.waitUntil(lambda: len(received) == 1, timeout=WAIT_MS)
    assert [str(p) for p in received[0]] == ["/tmp/a.txt"]


def test_a_popup_request_is_taken_only_whole_and_well_typed(qtbot, paths):
    listener = LaunchListener(paths)
    assert listener.listen()
    opened, popups = [], []
    listener.opened.connect(opened.append)
    listener.popup.connect(popups.append)
    for message in (b'{"popup": "text"}\n', b'{"popup": {"text": 1, "clipboard": false}}\n',
                    b'{"popup": {"text": "a"}}\n', b'{"popup": {"text": "a", "clipboard": "yes"}}\n',
                    b'{"popup": {"text": "a", "clipboard": true, "run": "rm"}}\n',
                    b'{"files": [], "popup": {"text": "a", "clipboard": true}}\n'):
        client = send(paths, message)
        qtbot.waitUntil(lambda: client.state() == QLocalSocket.LocalSocketState.UnconnectedState, timeout=WAIT_MS)
    assert opened == [] and popups == []
    send(paths, b'{"popup": {"text": "Bonjour", "clipboard": true}}\n')
    qtbot.waitUntil(lambda: len(popups) == 1, timeout=WAIT_MS)
    assert popups == [PopupRequest("Bonjour", clipboard=True)] and opened == []
