"""`dragoman serve`: a local HTTP server speaking LibreTranslate's API and DeepL's API v2, so that
tools made for either (browser extensions, Subtitle Edit, OmegaT, Zotero...) translate with
Dragoman on the user's own machine.

Starlette on uvicorn; `app` assembles the routes of `libretranslate_api` and `deepl_api` over one
engine worker (`worker`), which alone calls the translation pipeline (`pipeline`).
"""

from __future__ import annotations

import logging
import signal
import socket
import sys
import threading
from typing import TYPE_CHECKING

from dragoman.app.server.app import ServerLimits, ServerState, build_app
from dragoman.app.server.pipeline import Pipeline
from dragoman.app.server.stores import DocumentStore, GlossaryStore
from dragoman.app.server.worker import EngineWorker
from dragoman.app.session.session import TranslationSession
from dragoman.app.settings import AppPaths

if TYPE_CHECKING:
    import uvicorn

GLOSSARIES_FOLDER = "server-glossaries"


class Server:
    """The engine worker, the stores and the ASGI app; `start()` loads the model, `close()` ends all."""

    def __init__(self, make_translator, adapter: str = "", overrides: dict | None = None,
                 api_keys: tuple[str, ...] = (), cors_origins: tuple[str, ...] = (),
                 limits: ServerLimits | None = None, paths: AppPaths | None = None,
                 pipeline: TranslationSession | None = None):
        """`pipeline`: a translation pipeline over the translator to share (the window's); None: the server's own."""
        paths = paths or AppPaths.default()
        self.worker = EngineWorker(lambda: Pipeline(make_translator(), adapter, overrides, paths, pipeline))
        self.documents = DocumentStore()
        self.state = ServerState(self.worker, self.documents, GlossaryStore(paths.data_dir / GLOSSARIES_FOLDER),
                                 api_keys=api_keys, limits=limits or ServerLimits())
        self.app = build_app(self.state, cors_origins)

    def start(self) -> None:
        self.worker.start()
        self.state.num_beams = self.worker.call(lambda p: p.options.num_beams).result()

    def close(self) -> None:
        self.worker.stop()
        self.documents.close()


def uvicorn_config(app, host: str, port: int):
    """uvicorn's settings for the server. Idle connections stay open 30 s: DeepL's clients poll a
    document every 5 s on one connection, and uvicorn's default (5 s) closes it as they reuse it."""
    import uvicorn

    return uvicorn.Config(app, host=host, port=port, log_config=None, access_log=False, timeout_keep_alive=30,
                          timeout_graceful_shutdown=5, server_header=False)


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket listening on `host`:`port` (0: a free port), made before the model loads: a port in
    use costs nothing, and once the line saying where the server listens is out, connections wait
    in its backlog until uvicorn serves them. OSError: the address cannot be used."""
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a port left in TIME_WAIT by the last run
        sock.bind((host, port))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    return sock


class ServerThread:
    """`server` answering on `host`:`port` from a thread of its own, inside another app (the window's
    "Serve the APIs" setting): `start()` listens (OSError: the address cannot be used) and returns the
    port; `stop()` ends it and the server."""

    def __init__(self, server: Server, host: str, port: int):
        self.server = server
        self.host = host
        self.port = port
        self.http: uvicorn.Server | None = None
        self.thread: threading.Thread | None = None

    def start(self) -> int:
        import uvicorn

        sock = listening_socket(self.host, self.port)
        try:
            self.server.start()
        except BaseException:
            sock.close()
            raise
        self.port = sock.getsockname()[1]
        self.http = uvicorn.Server(uvicorn_config(self.server.app, self.host, self.port))
        self.thread = threading.Thread(target=self._run, args=(sock,), name="dragoman-server-http", daemon=True)
        self.thread.start()
        return self.port

    def _run(self, sock: socket.socket) -> None:
        assert self.http is not None
        try:
            self.http.run(sockets=[sock])  # off the main thread uvicorn leaves the signals alone
        finally:
            sock.close()

    def stop(self) -> None:
        """Requests being answered finish (uvicorn's graceful shutdown); then the engine worker stops."""
        if self.thread is not None and self.http is not None:
            self.http.should_exit = True
            self.thread.join()
            self.thread = None
        self.server.close()


def serve(server: Server, host: str, port: int) -> int:
    """Run until Ctrl+C or SIGTERM (then 0); one line on stderr says where it listens, once it does."""
    import uvicorn

    try:
        sock = listening_socket(host, port)
    except OSError as e:
        raise OSError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    logging.basicConfig(level=logging.INFO, format="dragoman: %(message)s")
    logging.getLogger("uvicorn").setLevel(logging.WARNING)  # our own line says where it listens
    try:
        server.start()
        http = uvicorn.Server(uvicorn_config(server.app, host, sock.getsockname()[1]))
        shown = f"[{host}]" if ":" in host else host
        print(f"dragoman: listening on http://{shown}:{sock.getsockname()[1]} (LibreTranslate and DeepL APIs; "
              "Ctrl+C stops)", file=sys.stderr, flush=True)
        # uvicorn stops gracefully on SIGINT and SIGTERM, then raises the signal again: SIGTERM as
        # Ctrl+C, so that the engine and the uploaded documents' folder are closed here either way.
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        try:
            http.run(sockets=[sock])
        except KeyboardInterrupt:
            pass
    finally:
        server.close()
        sock.close()
    return 0 if http.started else 1
