"""The ASGI application: both APIs' routes over one engine worker, with the limits, keys, CORS and
error shapes they share.

- Limits (`ServerLimits`): a request body is refused beyond `max_body_bytes` (documents:
  `max_upload_bytes`), before it is read whole; more than `max_requests` requests at once get 429;
  a translation that takes longer than `request_seconds` is given up (the engine skips it if it
  has not started it).
- Keys: when the server has API keys, every request but the language lists needs one, compared in
  constant time.
- Errors are always the API's own shape (LibreTranslate `{"error": ...}`, DeepL `{"message": ...}`),
  never a traceback: an unexpected exception is logged and answered 500.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from dataclasses import dataclass, field
from typing import Sequence

from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse

from dragoman.app.documents import DocumentError
from dragoman.app.server.stores import DocumentStore, GlossaryStore
from dragoman.app.server.worker import EngineWorker
from dragoman.app.session.glossary import GlossaryError
from dragoman.app.wording import one_line
from dragoman.engine import UnknownLanguageError

log = logging.getLogger("dragoman.server")
INPUT_ERRORS = (DocumentError, GlossaryError, UnknownLanguageError)

DEEPL_PREFIXES = ("/v2/", "/v3/")
UPLOAD_PATHS = ("/translate_file", "/v2/document")


@dataclass(frozen=True)
class ServerLimits:
    max_body_bytes: int = 1 << 20
    max_upload_bytes: int = 64 << 20
    max_requests: int = 256  # in flight at once
    request_seconds: float = 600.0
    char_limit: int = 100_000  # characters of one text (LibreTranslate's --char-limit)
    batch_limit: int = 1000  # texts in one request


@dataclass
class ServerState:
    worker: EngineWorker
    documents: DocumentStore
    glossaries: GlossaryStore
    num_beams: int = 4  # the server's decoding options': alternatives are fewer
    api_keys: tuple[str, ...] = ()
    limits: ServerLimits = field(default_factory=ServerLimits)
    characters: int = 0  # translated since the start (DeepL's usage)

    def key_is_valid(self, given: str | None) -> bool:
        """Whether `given` is one of the keys (or none are set), each compared in constant time."""
        if not self.api_keys:
            return True
        if not given:
            return False
        matched = False
        for key in self.api_keys:  # all of them, so the time says nothing about which matched
            matched |= hmac.compare_digest(given.encode(), key.encode())
        return matched

    async def run(self, future):
        """The result of a worker future, given up after `request_seconds`. What the input did wrong
        (a document or markup that cannot be read, a glossary, options) is a 400 naming it."""
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), self.limits.request_seconds)
        except TimeoutError:
            raise ApiError(500, f"the translation took longer than {self.limits.request_seconds:g} seconds") from None
        except INPUT_ERRORS as e:
            raise ApiError(400, one_line(e)) from None


class ApiError(Exception):
    """An error answered in the API's own shape with its status code."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def is_deepl(path: str) -> bool:
    return path.startswith(DEEPL_PREFIXES)


def error_response(path: str, status: int, message: str) -> JSONResponse:
    if is_deepl(path):
        return JSONResponse({"message": message}, status)
    if status == 429:
        message = f"Slowdown: {message}"  # LibreTranslate's prefix for its 429s
    return JSONResponse({"error": message}, status)


class BodyTooLarge(Exception):
    pass


class LimitsMiddleware:
    """Requests in flight and body sizes, checked before any handler reads a byte too many."""

    def __init__(self, app, state: ServerState):
        self.app = app
        self.state = state
        self.in_flight = 0

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope["path"]
        limits = self.state.limits
        if self.in_flight >= limits.max_requests:
            return await error_response(path, 429, "too many requests at once")(scope, receive, send)
        limit = limits.max_upload_bytes if path.startswith(UPLOAD_PATHS) else limits.max_body_bytes
        declared = dict(scope["headers"]).get(b"content-length")
        too_large = error_response(path, 413, f"the request is larger than {limit} bytes")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            return await too_large(scope, receive, send)
        received = 0
        started = False

        async def counted_receive():
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > limit:
                raise BodyTooLarge()
            return message

        async def watched_send(message):
            nonlocal started
            started = True
            await send(message)

        self.in_flight += 1
        try:
            await self.app(scope, counted_receive, watched_send)
        except BodyTooLarge:
            if not started:
                await too_large(scope, receive, send)
        finally:
            self.in_flight -= 1


async def error_answer(request: Request, error: Exception) -> JSONResponse:
    """An ApiError, Starlette's HTTPException (404, 405) or an unexpected error (logged: 500), in the
    request's API's shape."""
    if isinstance(error, ApiError):
        return error_response(request.url.path, error.status, error.message)
    if isinstance(error, HTTPException):
        return error_response(request.url.path, error.status_code, error.detail)
    log.exception("%s %s failed", request.method, request.url.path)
    return error_response(request.url.path, 500, "internal error (see the server's log)")


async def request_values(request: Request) -> dict:
    """A request's parameters: its JSON object, or its form fields (urlencoded or multipart) over its
    query's. A repeated form field (DeepL's `text`) becomes a list. ApiError 400 for bad JSON."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type == "application/json":
        try:
            body = json.loads(await request.body())
        except (ValueError, UnicodeDecodeError):
            body = None
        if not isinstance(body, dict):
            raise ApiError(400, "Invalid JSON format" if not is_deepl(request.url.path)
                           else "Invalid request: the body is not a JSON object")
        return body
    values: dict = {}
    sources: list[Sequence[tuple[str, str | UploadFile]]] = [request.query_params.multi_items()]
    if content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
        form = await request.form(max_files=1, max_fields=10_000)
        sources.append(form.multi_items())
    for items in sources:
        for name, value in items:
            if name in values and not isinstance(values[name], list):
                values[name] = [values[name], value]
            elif name in values:
                values[name].append(value)
            else:
                values[name] = value
    return values


def closing_uploads(handler):
    """`handler` with the request's uploaded files closed once it has answered (Starlette leaves the
    spooled temporary files of a form open)."""

    async def handle(request: Request):
        try:
            return await handler(request)
        finally:
            await request.close()

    return handle


def build_app(state: ServerState, cors_origins: tuple[str, ...] = ()) -> Starlette:
    from dragoman.app.server import deepl_api, libretranslate_api

    middleware = [Middleware(LimitsMiddleware, state=state)]
    if cors_origins:  # off unless configured: a web page may not call the server otherwise
        middleware.append(Middleware(CORSMiddleware, allow_origins=list(cors_origins), allow_methods=["GET", "POST", "DELETE"],
                                     allow_headers=["Authorization", "Content-Type"]))
    app = Starlette(
        routes=[*libretranslate_api.routes(), *deepl_api.routes()],
        middleware=middleware,
        exception_handlers={ApiError: error_answer, HTTPException: error_answer, Exception: error_answer},
    )
    app.state.server = state
    return app
