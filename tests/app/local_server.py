"""A real server on 127.0.0.1 (a free port, uvicorn in a background thread) over the real engine on
the tiny checkpoint: the server tests' `server` fixture, and the entry points' test."""

import dataclasses
import threading

import uvicorn

from dragoman.app.server import Server, listening_socket, uvicorn_config
from dragoman.app.server.app import ServerLimits

LIMITS = ServerLimits(max_body_bytes=64 * 1024, max_upload_bytes=2 << 20, char_limit=5000, batch_limit=100)


class Running:
    def __init__(self, url: str, server: Server, http: uvicorn.Server, thread: threading.Thread):
        self.url = url
        self.server = server
        self.http = http
        self.thread = thread

    def stop(self) -> None:
        self.http.should_exit = True
        self.thread.join()
        self.server.close()


def run(tiny_checkpoint, paths, api_keys=(), cors_origins=(), limits=None, overrides=None) -> Running:
    """The server started: `overrides` of the checkpoint's decoding options as `dragoman serve` takes them."""
    from dragoman.engine import Translator

    server = Server(lambda: Translator(tiny_checkpoint, device="cpu", dtype="float32"), overrides=overrides,
                    api_keys=api_keys, cors_origins=cors_origins, limits=dataclasses.replace(LIMITS, **(limits or {})),
                    paths=paths)
    server.start()
    sock = listening_socket("127.0.0.1", 0)  # as `dragoman serve` listens: connections wait in its backlog
    port = sock.getsockname()[1]
    http = uvicorn.Server(uvicorn_config(server.app, "127.0.0.1", port))
    thread = threading.Thread(target=http.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    return Running(f"http://127.0.0.1:{port}/", server, http, thread)
