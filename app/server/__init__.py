"""`dragoman serve`: a local HTTP server speaking LibreTranslate's API and DeepL's API v2, so that
tools made for either (browser extensions, Subtitle Edit, OmegaT, Zotero...) translate with
Dragoman on the user's own machine.

Starlette on uvicorn; `app` assembles the routes of `libretranslate_api` and `deepl_api` over one
engine worker (`worker`), which alone calls the translation pipeline (`pipeline`).
"""

from __future__ import annotations

import logging
import sys

from dragoman.app.server.app import ServerLimits, ServerState, build_app
from dragoman.app.server.pipeline import Pipeline
from dragoman.app.server.stores import DocumentStore, GlossaryStore
from dragoman.app.server.worker import EngineWorker
from dragoman.app.settings import AppPaths

GLOSSARIES_FOLDER = "server-glossaries"


class Server:
    """The engine worker, the stores and the ASGI app; `start()` loads the model, `close()` ends all."""

    def __init__(self, make_translator, adapter: str = "", overrides: dict | None = None,
                 api_keys: tuple[str, ...] = (), cors_origins: tuple[str, ...] = (),
                 limits: ServerLimits | None = None, paths: AppPaths | None = None):
        paths = paths or AppPaths.default()
        self.worker = EngineWorker(lambda: Pipeline(make_translator(), adapter, overrides, paths))
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


def serve(server: Server, host: str, port: int) -> int:
    """Run until Ctrl+C (or SIGTERM); one line on stderr says where it listens."""
    import uvicorn

    logging.basicConfig(level=logging.INFO, format="dragoman: %(message)s")
    logging.getLogger("uvicorn").setLevel(logging.WARNING)  # our own line says where it listens
    server.start()
    http = uvicorn.Server(uvicorn_config(server.app, host, port))
    shown = f"[{host}]" if ":" in host else host
    print(f"dragoman: serving the LibreTranslate and DeepL APIs on http://{shown}:{port} (Ctrl+C stops)",
          file=sys.stderr, flush=True)
    try:
        http.run()
    finally:
        server.close()
    return 0 if http.started else 1
