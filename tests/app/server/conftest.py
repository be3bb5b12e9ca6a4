"""A real server on 127.0.0.1 (a free port, uvicorn in a background thread) over the real engine on
the tiny checkpoint, started and stopped by the `server` fixture."""

import socket
import threading
import time

import pytest
import uvicorn

from dragoman.app.server import Server, uvicorn_config
from dragoman.app.server.app import ServerLimits

LIMITS = ServerLimits(max_body_bytes=64 * 1024, max_upload_bytes=2 << 20, char_limit=5000, batch_limit=100)


class Running:
    def __init__(self, url: str, server: Server):
        self.url = url
        self.server = server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(tiny_checkpoint, paths, api_keys=(), cors_origins=()):
    from dragoman.engine import Translator

    server = Server(lambda: Translator(tiny_checkpoint, device="cpu", dtype="float32"), api_keys=api_keys,
                    cors_origins=cors_origins, limits=LIMITS, paths=paths)
    server.start()
    port = free_port()
    http = uvicorn.Server(uvicorn_config(server.app, "127.0.0.1", port))
    thread = threading.Thread(target=http.run, daemon=True)
    thread.start()
    while not http.started:
        time.sleep(0.01)
    return Running(f"http://127.0.0.1:{port}/", server), http, thread


@pytest.fixture
def server(tiny_checkpoint, paths, request):
    """The running server; `@pytest.mark.parametrize("server", [{"api_keys": (KEY,)}], indirect=True)` sets keys."""
    options = getattr(request, "param", {})
    running, http, thread = run(tiny_checkpoint, paths, **options)
    yield running
    http.should_exit = True
    thread.join()
    running.server.close()
