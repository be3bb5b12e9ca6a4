"""The window's "Serve the LibreTranslate and DeepL APIs" setting: `dragoman serve` (app.server) inside
the app, on 127.0.0.1 only, over the model and translation pipeline the window has loaded (its
memory, caches and glossaries), so the model is in memory once. Its requests join the engine's
batches beside the window's typed text, which keeps its priority. `label`, in the status bar, shows
the address, or in one line why the server is not running.

The server lets go of the model before the window loads another (`stop(then=...)`, from the
window's load_model) and serves the new one once it is loaded (`fit()`, from its `loaded`). A
server stops on a thread of its own, the requests it is answering finishing first, so the window
never waits for them: what was to follow (the load, a server on the same port) follows once it has
stopped."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QLabel

from dragoman.app.settings import AppPaths, Settings
from dragoman.app.wording import one_line

if TYPE_CHECKING:
    from dragoman.app.server import ServerThread

LOOPBACK = "127.0.0.1"  # this computer only: the window offers no other address


class LocalServer(QObject):
    _stopped = Signal(object)  # a stopping server's thread, once the server has stopped (heard on the GUI thread)

    def __init__(self, paths: AppPaths, parent=None):
        super().__init__(parent)
        self.paths = paths
        self.label = QLabel(objectName="hint")
        self.label.hide()
        self.running: ServerThread | None = None  # while serving
        self.serving: tuple | None = None  # what it serves: (port, adapter, options, translator)
        self.address = ""
        self.stopping: list[threading.Thread] = []  # servers finishing the requests they were answering
        self._waiting: list[Callable[[], None]] = []  # what waits for them
        self._stopped.connect(self._on_stopped)

    def fit(self, settings: Settings, worker, options: dict) -> None:
        """Serve as `settings` say, over what `worker` (the window's EngineWorker) has loaded (None:
        no model is ready): started, moved to another port or adapter, or stopped."""
        translator = worker.translator if worker is not None else None
        if not settings.serve_apis or translator is None:
            self.stop()
            return
        wanted = (settings.server_port, settings.adapter, options, translator)
        if wanted != self.serving:
            pipeline = worker.pipeline
            self.stop()
            self.serving = wanted  # started once no server holds the port; a later fit or stop supersedes it
            self._after_stopping(lambda: self._start(wanted, pipeline) if self.serving == wanted else None)

    def _start(self, wanted: tuple, pipeline) -> None:
        from dragoman.app.server import Server, ServerThread  # Starlette and uvicorn: only once asked for

        port, adapter, options, translator = wanted
        running = ServerThread(Server(lambda: translator, adapter, options, paths=self.paths, pipeline=pipeline),
                               LOOPBACK, port)
        try:
            running.start()
        except OSError as e:
            self.serving = None
            self._say(f"API server off: 127.0.0.1:{port} cannot be used ({e.strerror or e})",
                      "Choose another port in Settings")
            return
        except Exception as e:  # the server could not be made over this model: said, the window goes on
            running.stop()
            self.serving = None
            self._say(f"API server off: {one_line(e)}", "")
            return
        self.running = running
        self.address = f"http://{LOOPBACK}:{running.port}"
        self._say(f"APIs on {self.address}", "LibreTranslate's and DeepL's APIs, for this computer only "
                                             "(browser extensions, Subtitle Edit, OmegaT...)")

    def stop(self, then: Callable[[], None] | None = None, wait: bool = False) -> None:
        """Stop serving: the requests being answered finish first, on a thread of their own (`wait`:
        on this one, as the window quits). `then()` runs on the GUI thread once no server holds
        the model or a port any more: at once when none does."""
        if self.running is not None:
            running, self.running = self.running, None
            thread = threading.Thread(target=self._stop_on_this_thread, args=(running,), name="dragoman-server-stop",
                                      daemon=True)
            self.stopping.append(thread)
            thread.start()
        if wait:
            for thread in list(self.stopping):
                thread.join()
        self.serving = None
        self.address = ""
        self.label.hide()
        if then is not None:
            self._after_stopping(then)

    def _stop_on_this_thread(self, running: ServerThread) -> None:
        running.stop()
        self._stopped.emit(threading.current_thread())

    def _after_stopping(self, then: Callable[[], None]) -> None:
        """`then()` once no server is stopping (now, if none is)."""
        self._waiting.append(then)
        self._on_stopped(None)

    def _on_stopped(self, thread: threading.Thread | None) -> None:
        self.stopping = [t for t in self.stopping if t is not thread and t.is_alive()]
        if not self.stopping:
            waiting, self._waiting = self._waiting, []
            for then in waiting:
                then()

    def _say(self, text: str, tooltip: str) -> None:
        self.label.setText(text)
        self.label.setToolTip(tooltip)
        self.label.show()
