"""LibreTranslate's API, as its app.py answers: `/translate`, `/languages`, `/detect`,
`/translate_file` with `/download_file/NAME`, `/frontend/settings`. Its parameters come as JSON or
form fields; its errors are `{"error": ...}` with 400, 403, 429 or 500.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse
from starlette.routing import Route

from dragoman.app.documents import FORMATS, is_supported
from dragoman.app.documents.sentences import is_translatable
from dragoman.app.server.app import ApiError, ServerState, closing_uploads, request_values
from dragoman.app.server.languages import libretranslate_code, libretranslate_language, libretranslate_languages
from dragoman.app.server.pipeline import HTML, TEXT, Text
from dragoman.app.session import detect

FORMATS_OFFERED = sorted(FORMATS)


def state_of(request: Request) -> ServerState:
    return request.app.state.server


def check_key(state: ServerState, values: dict) -> None:
    key = values.get("api_key")
    if state.api_keys and not key:
        raise ApiError(400, "Please contact the server operator to get an API key")
    if not state.key_is_valid(key if isinstance(key, str) else None):
        raise ApiError(403, "Invalid API key")


def required(values: dict, name: str) -> str | list:
    value = values.get(name)
    if not value:
        raise ApiError(400, f"Invalid request: missing {name} parameter")
    return value


def language(code, auto: bool = False) -> str:
    """The FLORES-200 code of a LibreTranslate code ("auto" stays "auto" where `auto`)."""
    if not isinstance(code, str):
        raise ApiError(400, f"{code} is not supported")
    if auto and code == "auto":
        return code
    flores = libretranslate_language(code)
    if flores is None:
        raise ApiError(400, f"{code} is not supported")
    return flores


async def detected(texts: list[str]) -> tuple[str, float] | None:
    """The language of the texts together, and the detector's confidence in percent."""
    guess = await run_in_threadpool(detect.best_guess, "\n".join(texts))
    return (guess[0], round(guess[1] * 100, 1)) if guess else None


async def translate(request: Request) -> JSONResponse:
    state = state_of(request)
    values = await request_values(request)
    q = required(values, "q")
    source = language(required(values, "source"), auto=True)
    target = language(required(values, "target"))
    check_key(state, values)
    text_format = values.get("format") or "text"
    if text_format not in (TEXT, HTML):
        raise ApiError(400, f"{text_format} format is not supported")
    try:
        alternatives = max(0, int(values.get("alternatives") or 0))
    except (TypeError, ValueError):
        raise ApiError(400, "Invalid request: alternatives parameter is not a number") from None
    batch = isinstance(q, list)
    given = q if batch else [q]
    texts = [t for t in given if isinstance(t, str)]
    if len(texts) != len(given):
        raise ApiError(400, "Invalid request: q must be a string or a list of strings")
    limits = state.limits
    if len(texts) > limits.batch_limit:
        raise ApiError(400, f"Invalid request: request ({len(texts)}) exceeds text limit ({limits.batch_limit})")
    for text in texts:
        if len(text) > limits.char_limit:
            raise ApiError(400, f"Invalid request: request ({len(text)}) exceeds text limit ({limits.char_limit})")
    most = state.num_beams - 1
    if alternatives > most:
        raise ApiError(400, f"Invalid request: alternatives parameter must be <= {most}")
    if not request.headers.get("content-type", "").startswith("application/json"):
        texts = ["\n".join(t.splitlines()) for t in texts]  # form line ends as LibreTranslate normalises them

    result: dict = {}
    if not any(is_translatable(t) for t in texts):  # nothing to translate: sent back, as LibreTranslate does
        translations = texts
        others: list[list[str]] = [[] for _ in texts]
        source, confidence = "eng_Latn", 0.0
    else:
        confidence = 100.0
        if source == "auto":
            guess = await detected(texts)
            if guess is None:
                raise ApiError(400, "auto is not supported: the language of the text was not recognised")
            source, confidence = guess
        if alternatives and text_format == TEXT:
            pairs = await state.run(state.worker.call(lambda p: p.alternatives(source, target, texts, alternatives)))
            translations, others = [t for t, _ in pairs], [o for _, o in pairs]
        else:
            translations = await state.run(state.worker.translate(source, target, [Text(t, text_format) for t in texts]))
            others = [[] for _ in texts]  # none for HTML, as LibreTranslate
        state.characters += sum(len(t) for t in texts)
    result["translatedText"] = translations if batch else translations[0]
    if values.get("source") == "auto":
        found = {"confidence": confidence, "language": libretranslate_code(source)}
        result["detectedLanguage"] = [found] * len(texts) if batch else found
    if alternatives:
        result["alternatives"] = others if batch else others[0]
    return JSONResponse(result)


async def languages(request: Request) -> JSONResponse:
    return JSONResponse(language_list())


@lru_cache(maxsize=1)
def language_list() -> list[dict]:
    return libretranslate_languages()


async def detect_language(request: Request) -> JSONResponse:
    state = state_of(request)
    values = await request_values(request)
    q = required(values, "q")
    check_key(state, values)
    guess = await detected(q if isinstance(q, list) else [q])
    return JSONResponse([{"confidence": guess[1], "language": libretranslate_code(guess[0])}] if guess else [])


async def translate_file(request: Request) -> JSONResponse:
    state = state_of(request)
    values = await request_values(request)
    upload = values.get("file")
    if upload is None or isinstance(upload, str):
        raise ApiError(400, "Invalid request: missing file parameter")
    source = language(required(values, "source"), auto=True)
    target = language(required(values, "target"))
    check_key(state, values)
    if not upload.filename:
        raise ApiError(400, "Invalid request: empty file")
    if not is_supported(Path(upload.filename)):
        raise ApiError(400, "Invalid request: file format not supported")
    if source == "auto":
        raise ApiError(400, "auto is not supported for files: name the source language")
    document = state.documents.add(upload.filename, await upload.read())
    out_dir = state.documents.output_folder(document)
    written = await state.run(state.worker.call(
        lambda p: p.translate_file(document.source_path, out_dir, source, target)))
    state.characters += document.characters
    url = request.url_for("download_file", filename=f"{document.id}.{written.name}")
    return JSONResponse({"translatedFileUrl": str(url)})


async def download_file(request: Request) -> FileResponse:
    state = state_of(request)
    document_id, _, name = request.path_params["filename"].partition(".")
    document = state.documents.get(document_id)
    path = state.documents.folder / document_id / "translated" / name if document else None
    if path is None or "/" in name or name.startswith(".") or not path.is_file():
        raise ApiError(400, "Invalid filename")
    return FileResponse(path, filename=name)


async def frontend_settings(request: Request) -> JSONResponse:
    state = state_of(request)
    return JSONResponse({
        "charLimit": state.limits.char_limit,
        "frontendTimeout": 500,
        "apiKeys": bool(state.api_keys),
        "keyRequired": bool(state.api_keys),
        "suggestions": False,
        "filesTranslation": True,
        "supportedFilesFormat": FORMATS_OFFERED,
        "language": {"source": {"code": "auto", "name": "Auto Detect"},
                     "target": {"code": "en", "name": "English"}},
    })


def routes() -> list[Route]:
    return [
        Route("/translate", translate, methods=["POST"]),
        Route("/languages", languages, methods=["GET", "POST"]),
        Route("/detect", detect_language, methods=["POST"]),
        Route("/translate_file", closing_uploads(translate_file), methods=["POST"]),
        Route("/download_file/{filename}", download_file, methods=["GET"], name="download_file"),
        Route("/frontend/settings", frontend_settings, methods=["GET"]),
    ]
