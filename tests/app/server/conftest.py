"""A real server on 127.0.0.1 (a free port, uvicorn in a background thread) over the real engine on
the tiny checkpoint, started and stopped by the `server` fixture."""

import dataclasses
import threading

import pytest
import uvicorn

from dragoman.app.server import Server, listening_socket, uvicorn_config
from dragoman.app.server.app import ServerLimits

LIMITS = ServerLimits(max_body_bytes=64 * 1024, max_upload_bytes=2 << 20, char_limit=5000, batch_limit=100)


class Running:
    def __init__(self, url: str, server: Server):
        self.url = url
        self.server = server


def run(tiny_checkpoint, paths, api_keys=(), cors_origins=(), limits=None):
    from dragoman.engine import Translator

    server = Server(lambda: Translator(tiny_checkpoint, device="cpu", dtype="float32"), api_keys=api_keys,
                    cors_origins=cors_origins, limits=dataclasses.replace(LIMITS, **(limits or {})), paths=paths)
    server.start()
    sock = listening_socket("127.0.0.1", 0)  # as `dragoman serve` listens: connections wait in its backlog
    port = sock.getsockname()[1]
    http = uvicorn.Server(uvicorn_config(server.app, "127.0.0.1", port))
    thread = threading.Thread(target=http.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    return Running(f"http://127.0.0.1:{port}/", server), http, thread


@pytest.fixture
def server(tiny_checkpoint, paths, request):
    """The running server; `@pytest.mark.parametrize("server", [{"api_keys": (KEY,)}], indirect=True)` sets keys
    (and `cors_origins`; `limits`: a dict of LIMITS' fields to change)."""
    options = getattr(request, "param", {})
    running, http, thread = run(tiny_checkpoint, paths, **options)
    yield running
    http.should_exit = True
    thread.join()
    running.server.close()
