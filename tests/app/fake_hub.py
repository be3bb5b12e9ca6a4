"""A Hugging Face hub stand-in on 127.0.0.1: the two endpoints `huggingface_hub` downloads through.

`GET /api/models/<repo>/revision/main` answers the repository's files and sizes; `HEAD` and `GET
/<repo>/resolve/<revision>/<file>` serve a file, honouring `Range` (resumed downloads). Every
request is logged, so tests can see what a resume asked for.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

COMMIT = "0123456789abcdef0123456789abcdef01234567"


class FakeHub:
    def __init__(self, repo_id: str, folder: Path, chunk: int = 64 << 10, delay: float = 0.0):
        self.repo_id = repo_id
        self.files = {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}
        self.chunk = chunk
        self.delay = delay  # seconds between chunks: slow enough to cancel midway
        self.requests: list[tuple[str, str, str | None]] = []  # (method, path, Range header)
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_HEAD(self):
                hub._serve(self, body=False)

            def do_GET(self):
                hub._serve(self, body=True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FakeHub:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _serve(self, handler: BaseHTTPRequestHandler, body: bool) -> None:
        path = handler.path.split("?")[0]
        self.requests.append((handler.command, path, handler.headers.get("Range")))
        if path in (f"/api/models/{self.repo_id}", f"/api/models/{self.repo_id}/revision/main"):
            siblings = [{"rfilename": name, "size": len(data)} for name, data in self.files.items()]
            payload = json.dumps({"id": self.repo_id, "sha": COMMIT, "siblings": siblings}).encode()
            return self._send(handler, 200, {"Content-Type": "application/json"}, payload, body)
        prefix = f"/{self.repo_id}/resolve/"
        name = path.removeprefix(prefix).split("/", 1)[-1] if path.startswith(prefix) else None
        if name not in self.files:
            return self._send(handler, 404, {"X-Error-Code": "EntryNotFound"}, b"not found", body)
        data = self.files[name]
        headers = {"X-Repo-Commit": COMMIT, "ETag": f'"{hashlib.sha256(data).hexdigest()}"',
                   "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
        start = 0
        range_header = handler.headers.get("Range")
        if range_header and body:
            start = int(range_header.removeprefix("bytes=").split("-")[0])
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        self._send(handler, 206 if start else 200, headers, data[start:], body, full_length=len(data))

    def _send(self, handler, status, headers, payload, body, full_length=None):
        try:
            handler.send_response(status)
            for key, value in headers.items():
                handler.send_header(key, value)
            handler.send_header("Content-Length", str(len(payload) if body or full_length is None else full_length))
            handler.end_headers()
            if not body:
                return
            for i in range(0, len(payload), self.chunk):
                handler.wfile.write(payload[i : i + self.chunk])
                handler.wfile.flush()
                if self.delay:
                    time.sleep(self.delay)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away (a cancelled download)
