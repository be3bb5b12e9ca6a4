"""The `server` fixture: a real server on 127.0.0.1 over the real engine on the tiny checkpoint
(tests/app/local_server.py), started and stopped around each test."""

import pytest

from local_server import run


@pytest.fixture
def server(tiny_checkpoint, paths, request):
    """The running server; `@pytest.mark.parametrize("server", [{"api_keys": (KEY,)}], indirect=True)` sets keys
    (and `cors_origins`; `limits`: a dict of local_server.LIMITS' fields to change)."""
    running = run(tiny_checkpoint, paths, **getattr(request, "param", {}))
    yield running
    running.stop()
