"""The window's "Serve the LibreTranslate and DeepL APIs" setting: `dragoman serve` (app.server) inside
the app, on 127.0.0.1 only, over the model and translation session the window has loaded (its
memory, caches and glossaries), so the model is in memory once. Its requests join the engine's
batches beside the window's typed text, which keeps its priority. `label`, in the status bar, shows
the address, or in one line why the server is not running.

The server lets go of the model before the window loads another (`stop()`, from the window's
load_model) and serves the new one once it is loaded (`fit()`, from its `loaded`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QLabel

from dragoman.app.settings import AppPaths, Settings

if TYPE_CHECKING:
    from dragoman.app.server import ServerThread

LOOPBACK = "127.0.0.1"  # this computer only: the window offers no other address


class LocalServer(QObject):
    def __init__(self, paths: AppPaths, parent=None):
        super().__init__(parent)
        self.paths = paths
        self.label = QLabel(objectName="hint")
        self.label.hide()
        self.running: ServerThread | None = None  # while serving
        self.serving: tuple | None = None  # what it serves: (port, adapter, options, translator)
        self.address = ""

    def fit(self, settings: Settings, worker, options: dict) -> None:
        """Serve as `settings` say, over what `worker` (the window's EngineWorker) has loaded (None:
        no model is ready): started, moved to another port or adapter, or stopped."""
        translator = worker.translator if worker is not None else None
        if not settings.serve_apis or translator is None:
            self.stop()
            return
        wanted = (settings.server_port, settings.adapter, options, translator)
        if wanted != self.serving:
            self.stop()
            self._start(wanted, worker.session)

    def _start(self, wanted: tuple, session) -> None:
        from dragoman.app.server import Server, ServerThread  # Starlette and uvicorn: only once asked for

        port, adapter, options, translator = wanted
        running = ServerThread(Server(lambda: translator, adapter, options, paths=self.paths, session=session),
                               LOOPBACK, port)
        try:
            running.start()
        except OSError as e:
            self._say(f"API server off: 127.0.0.1:{port} cannot be used ({e.strerror or e})",
                      "Choose another port in Settings")
            return
        except Exception as e:  # the server could not be made over this model: said, the window goes on
            running.stop()
            self._say(f"API server off: {str(e).splitlines()[0] if str(e) else type(e).__name__}", "")
            return
        self.running, self.serving = running, wanted
        self.address = f"http://{LOOPBACK}:{running.port}"
        self._say(f"APIs on {self.address}", "LibreTranslate's and DeepL's APIs, for this computer only "
                                             "(browser extensions, Subtitle Edit, OmegaT...)")

    def stop(self) -> None:
        """Requests being answered finish first."""
        if self.running is not None:
            self.running.stop()
            self.running = None
        self.serving = None
        self.address = ""
        self.label.hide()

    def _say(self, text: str, tooltip: str) -> None:
        self.label.setText(text)
        self.label.setToolTip(tooltip)
        self.label.show()
