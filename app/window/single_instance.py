"""One running app per user and data folder: the first launch listens on a local socket; a later
`dragoman FILE`, or "Open with Dragoman" from the file manager, hands its files to it and exits
instead of loading the model a second time (and, quitting first, emptying the other's jobs);
`dragoman popup` hands it the text to translate in the popup.

The socket is the user's alone (QLocalServer.UserAccessOption). A message is one JSON object,
`{"files": [absolute paths]}` or `{"popup": {"text": str, "clipboard": bool}}`, at most MAX_MESSAGE
bytes; anything else is dropped. Received files only reach the documents list, which asks before
translating them, as for a drop; received text is only translated, in the popup.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from PySide6.QtCore import QObject, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket

from dragoman.app.settings import AppPaths

MAX_MESSAGE = 1 << 20
HAND_OVER_MS = 3000  # a running app answers at once; a hung one must not hang this launch for long
ACK = b"ok\n"


def server_name(paths: AppPaths) -> str:
    """The socket's name: one per user and data folder (DRAGOMAN_HOME runs apart, as tests do)."""
    folder = hashlib.sha256(str(paths.data_dir.resolve()).encode()).hexdigest()[:16]
    return f"dragoman-{os.getuid() if hasattr(os, 'getuid') else os.getlogin()}-{folder}"


@dataclass(frozen=True)
class PopupRequest:
    """Text to translate in the popup: the selection, or the clipboard's (`clipboard`)."""

    text: str
    clipboard: bool


def hand_over(paths: AppPaths, files: Sequence[str | Path]) -> bool:
    """Give `files` to the app already running, if there is one; whether it took them."""
    return _send(paths, {"files": [str(Path(f).absolute()) for f in files]})


def hand_over_popup(paths: AppPaths, request: PopupRequest) -> bool:
    """Ask the app already running, if there is one, to translate `request` in its popup; whether it took it."""
    return _send(paths, {"popup": {"text": request.text, "clipboard": request.clipboard}})


def _send(paths: AppPaths, message: dict) -> bool:
    socket = QLocalSocket()
    socket.connectToServer(server_name(paths))
    if not socket.waitForConnected(HAND_OVER_MS):
        return False
    socket.write(json.dumps(message).encode() + b"\n")
    socket.flush()
    answered = b""
    while ACK not in answered and socket.waitForReadyRead(HAND_OVER_MS):
        answered += bytes(socket.readAll().data())
    socket.disconnectFromServer()
    return ACK in answered


def parse_message(data: bytes) -> list[Path] | PopupRequest | None:
    """The files of one message, or its popup request, or None for one that is not ours."""
    try:
        message = json.loads(data)
    except ValueError:
        return None
    if not isinstance(message, dict) or len(message) != 1:
        return None
    if "popup" in message:
        popup = message["popup"]
        if not isinstance(popup, dict) or set(popup) != {"text", "clipboard"} \
                or not isinstance(popup["text"], str) or not isinstance(popup["clipboard"], bool):
            return None
        return PopupRequest(popup["text"], popup["clipboard"])
    files = message.get("files")
    if not isinstance(files, list) or not all(isinstance(f, str) and f for f in files):
        return None
    return [Path(f) for f in files]


class LaunchListener(QObject):
    """The running app's end of the socket: `opened(files)` or `popup(PopupRequest)` for each later launch."""

    opened = Signal(list)
    popup = Signal(object)

    def __init__(self, paths: AppPaths, parent: QObject | None = None):
        super().__init__(parent)
        self.server = QLocalServer(self)
        self.server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        self.server.newConnection.connect(self._accept)
        self.name = server_name(paths)

    def listen(self) -> bool:
        """Start listening; a socket left behind by an app that crashed is replaced (the caller has
        found no app answering on it)."""
        if self.server.listen(self.name):
            return True
        QLocalServer.removeServer(self.name)
        return self.server.listen(self.name)

    def _accept(self) -> None:
        while (socket := self.server.nextPendingConnection()) is not None:
            socket.setParent(self)
            buffer = bytearray()
            socket.readyRead.connect(lambda s=socket, b=buffer: self._read(s, b))
            socket.disconnected.connect(socket.deleteLater)

    def _read(self, socket: QLocalSocket, buffer: bytearray) -> None:
        buffer += bytes(socket.readAll().data())
        if len(buffer) > MAX_MESSAGE:
            socket.abort()
            return
        if b"\n" not in buffer:
            return
        message = parse_message(bytes(buffer[: buffer.index(b"\n")]))
        if message is None:
            socket.abort()
            return
        socket.write(ACK)
        socket.flush()
        if isinstance(message, PopupRequest):
            self.popup.emit(message)
        else:
            self.opened.emit(message)
