"""DeepL's API v2, as the official clients (deepl-python) call it: `/v2/translate`, `/v2/languages`,
`/v2/usage`, `/v2/document` (upload, status, result), `/v2/glossaries` and
`/v2/glossary-language-pairs`; and v3's multilingual glossaries (`/v3/glossaries`: a glossary with a
dictionary per language pair, usable wherever a glossary_id is). Keys come as `Authorization: DeepL-Auth-Key KEY`; errors are
`{"message": ...}` with DeepL's codes (400, 403, 404, 413, 429, 500, 503 for a result not ready).
"""

from __future__ import annotations

import hmac
from functools import lru_cache
from pathlib import Path
from typing import Callable, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from dragoman.app.documents import is_supported
from dragoman.app.server.app import ApiError, ServerState, closing_uploads, request_values
from dragoman.app.server.languages import DEEPL_LANGUAGES, DEEPL_TARGET_ONLY, deepl_code, deepl_language, deepl_languages
from dragoman.app.server.pipeline import HTML, TEXT, XML, Text
from dragoman.app.server.stores import GlossaryDictionary, GlossaryInfo, StoredDocument
from dragoman.app.session import detect
from dragoman.app.session.glossary import GlossaryError
from dragoman.app.wording import one_line

Stored = TypeVar("Stored")  # what a glossary store's change gives back

AUTH_SCHEME = "DeepL-Auth-Key "
MAX_TEXTS = 50  # DeepL's limit of texts in one request
# DeepL's usage answer for an account without a limit (the client counts a limit of 0 as reached).
NO_LIMIT = 1_000_000_000_000


def state_of(request: Request) -> ServerState:
    """The server's state, once the request's key is checked."""
    state: ServerState = request.app.state.server
    header = request.headers.get("authorization", "")
    key = header[len(AUTH_SCHEME):].strip() if header.startswith(AUTH_SCHEME) else None
    if not state.key_is_valid(key):
        raise ApiError(403, "Wrong or missing authentication key (Authorization: DeepL-Auth-Key KEY)")
    return state


def language(code, what: str) -> str:
    flores = deepl_language(code) if isinstance(code, str) else None
    if flores is None:
        raise ApiError(400, f"Value for '{what}' not supported.")
    return flores


def glossary_for(state: ServerState, glossary_id) -> GlossaryInfo:
    info = state.glossaries.get(glossary_id) if isinstance(glossary_id, str) else None
    if info is None:
        raise ApiError(404, "Glossary not found")
    return info


def glossary_dictionary(state: ServerState, glossary_id, source_code, target: str) -> GlossaryDictionary:
    """The dictionary of the glossary for source_lang -> target (a FLORES code)."""
    info = glossary_for(state, glossary_id)
    if not isinstance(source_code, str) or not source_code:
        raise ApiError(400, "Parameter 'source_lang' is required when using a glossary")
    for dictionary in info.dictionaries:
        if (deepl_language(dictionary.source_lang) == deepl_language(source_code)
                and deepl_language(dictionary.target_lang) == target):
            return dictionary
    raise ApiError(400, "The glossary has no dictionary for source_lang and target_lang")


async def translate(request: Request) -> JSONResponse:
    state = state_of(request)
    values = await request_values(request)
    texts = values.get("text")
    if texts is None:
        raise ApiError(400, "Parameter 'text' not specified.")
    texts = texts if isinstance(texts, list) else [texts]
    if not all(isinstance(t, str) for t in texts):
        raise ApiError(400, "Parameter 'text' must be a string or a list of strings.")
    if len(texts) > MAX_TEXTS:
        raise ApiError(400, f"Too many texts: at most {MAX_TEXTS} in one request.")
    if any(len(t) > state.limits.char_limit for t in texts):
        raise ApiError(413, f"A text is longer than {state.limits.char_limit} characters.")
    target = language(values.get("target_lang"), "target_lang")
    source_code = values.get("source_lang")
    source = language(source_code, "source_lang") if source_code else None
    tag_handling = values.get("tag_handling") or TEXT
    if tag_handling not in (TEXT, XML, HTML):
        raise ApiError(400, "Value for 'tag_handling' not supported.")
    glossary = glossary_dictionary(state, values["glossary_id"], source_code, target) if values.get("glossary_id") else None
    if source is None:
        guess = await run_in_threadpool(detect.detect_language, "\n".join(texts))
        if guess is None:
            raise ApiError(400, "The source language of the text was not recognised: give source_lang.")
        source = guess
    translations = await state.run(state.worker.translate(
        source, target, [Text(t, tag_handling) for t in texts], glossary.glossary if glossary else None,
        f"{values['glossary_id']}:{glossary.source_lang}-{glossary.target_lang}" if glossary else ""))
    state.characters += sum(len(t) for t in texts)
    detected = deepl_code(source)
    return JSONResponse({"translations": [{"detected_source_language": detected, "text": translation,
                                           "billed_characters": len(text)}
                                          for text, translation in zip(texts, translations)]})


async def languages(request: Request) -> JSONResponse:
    state_of(request)
    values = await request_values(request)
    kind = values.get("type") or "source"
    if kind not in ("source", "target"):
        raise ApiError(400, "Value for 'type' not supported.")
    return JSONResponse(language_list(kind == "target"))


@lru_cache(maxsize=2)
def language_list(target: bool) -> list[dict]:
    return deepl_languages(target)


async def usage(request: Request) -> JSONResponse:
    state = state_of(request)
    return JSONResponse({"character_count": state.characters, "character_limit": NO_LIMIT})


async def upload_document(request: Request) -> JSONResponse:
    state = state_of(request)
    values = await request_values(request)
    upload = values.get("file")
    if upload is None or isinstance(upload, str) or not upload.filename:
        raise ApiError(400, "Parameter 'file' not specified.")
    target = language(values.get("target_lang"), "target_lang")
    source_code = values.get("source_lang")
    if not source_code:
        raise ApiError(400, "Parameter 'source_lang' is required for documents: this server does not detect it.")
    source = language(source_code, "source_lang")
    if not is_supported(Path(upload.filename)):
        raise ApiError(400, "Invalid file data.")
    if values.get("output_format") and f".{values['output_format'].lower()}" != Path(upload.filename).suffix.lower():
        raise ApiError(400, "Value for 'output_format' not supported: documents come back in their own format.")
    glossary = glossary_dictionary(state, values["glossary_id"], source_code, target) if values.get("glossary_id") else None
    document = state.documents.add(upload.filename, await upload.read())
    out_dir = state.documents.output_folder(document)

    def run(pipeline) -> None:
        document.status = "translating"
        try:
            document.output_path = pipeline.translate_file(document.source_path, out_dir, source, target,
                                                           glossary.glossary if glossary else None)
            document.status = "done"
            state.characters += document.characters
        except Exception as e:  # the document's own problem: reported on its status
            document.error = one_line(e)
            document.status = "error"

    state.worker.call(run)
    return JSONResponse({"document_id": document.id, "document_key": document.key})


async def stored_document(request: Request) -> tuple[ServerState, StoredDocument]:
    state = state_of(request)
    values = await request_values(request)
    document = state.documents.get(request.path_params["document_id"])
    key = values.get("document_key")
    if document is None or not isinstance(key, str) or not hmac.compare_digest(document.key.encode(), key.encode()):
        raise ApiError(404, "Document not found")
    return state, document


async def document_status(request: Request) -> JSONResponse:
    _, document = await stored_document(request)
    status: dict[str, object] = {"document_id": document.id, "status": document.status}
    if document.status == "done":
        status["billed_characters"] = document.characters
    if document.status == "error":
        status["error_message"] = document.error
    return JSONResponse(status)


async def document_result(request: Request) -> Response:
    _, document = await stored_document(request)
    if document.status != "done" or document.output_path is None:
        raise ApiError(503, "Document not ready")
    return FileResponse(document.output_path, filename=document.output_path.name)


def dictionary_values(values: dict) -> tuple[str, str, str, str]:
    """(source_lang, target_lang, entries, entries_format) of a request's dictionary, checked."""
    if not isinstance(values, dict):
        raise ApiError(400, "A dictionary must be an object.")
    for name in ("source_lang", "target_lang", "entries"):
        if not isinstance(values.get(name), str) or not values[name]:
            raise ApiError(400, f"Parameter '{name}' not specified.")
    language(values["source_lang"], "source_lang")
    language(values["target_lang"], "target_lang")
    entries_format = values.get("entries_format") or "tsv"
    if entries_format not in ("tsv", "csv"):
        raise ApiError(400, "Value for 'entries_format' not supported.")
    return values["source_lang"], values["target_lang"], values["entries"], entries_format


async def stored_glossary(change: Callable[[], Stored]) -> Stored:
    """`change()` run on a thread of the pool (it reads and writes files); bad entries are a 400."""
    try:
        return await run_in_threadpool(change)
    except GlossaryError as e:
        raise ApiError(400, f"Invalid glossary entries: {e}") from None


def glossary_name(values: dict) -> str:
    if not isinstance(values.get("name"), str) or not values["name"]:
        raise ApiError(400, "Parameter 'name' not specified.")
    return values["name"]


async def create_glossary(request: Request) -> JSONResponse:
    state = state_of(request)
    values = await request_values(request)
    name = glossary_name(values)
    dictionary = dictionary_values(values)
    info = await stored_glossary(lambda: state.glossaries.create(name, [dictionary]))
    return JSONResponse(info.as_v2_json(), 201)


def single(info: GlossaryInfo) -> GlossaryInfo:
    """A glossary v2 can show: one dictionary."""
    if len(info.dictionaries) != 1:
        raise ApiError(400, "This glossary has several dictionaries: use /v3/glossaries.")
    return info


async def list_glossaries(request: Request) -> JSONResponse:
    state = state_of(request)
    return JSONResponse({"glossaries": [info.as_v2_json() for info in state.glossaries.list()
                                        if len(info.dictionaries) == 1]})


async def glossary(request: Request) -> Response:
    state = state_of(request)
    if request.method == "DELETE":
        if not state.glossaries.delete(request.path_params["glossary_id"]):
            raise ApiError(404, "Glossary not found")
        return Response(status_code=204)
    return JSONResponse(single(glossary_for(state, request.path_params["glossary_id"])).as_v2_json())


async def glossary_entries(request: Request) -> PlainTextResponse:
    state = state_of(request)
    info = single(glossary_for(state, request.path_params["glossary_id"]))
    return PlainTextResponse(info.dictionaries[0].entries_tsv(), media_type="text/tab-separated-values")


async def create_glossary_v3(request: Request) -> JSONResponse:
    state = state_of(request)
    values = await request_values(request)
    name = glossary_name(values)
    dictionaries = values.get("dictionaries")
    if not isinstance(dictionaries, list) or not dictionaries:
        raise ApiError(400, "Parameter 'dictionaries' not specified.")
    read = [dictionary_values(d) for d in dictionaries]
    info = await stored_glossary(lambda: state.glossaries.create(name, read))
    return JSONResponse(info.as_json(), 201)


async def list_glossaries_v3(request: Request) -> JSONResponse:
    state = state_of(request)
    return JSONResponse({"glossaries": [info.as_json() for info in state.glossaries.list()]})


async def glossary_v3(request: Request) -> Response:
    """GET, DELETE, or PATCH (a new name; dictionaries merged into those of their pairs)."""
    state = state_of(request)
    glossary_id = request.path_params["glossary_id"]
    if request.method == "DELETE":
        if not state.glossaries.delete(glossary_id):
            raise ApiError(404, "Glossary not found")
        return Response(status_code=204)
    if request.method == "GET":
        return JSONResponse(glossary_for(state, glossary_id).as_json())
    values = await request_values(request)
    name = glossary_name(values) if "name" in values else None
    dictionaries = values.get("dictionaries", [])
    if not isinstance(dictionaries, list):
        raise ApiError(400, "Parameter 'dictionaries' must be a list.")
    read = [dictionary_values(d) for d in dictionaries]
    info = await stored_glossary(lambda: state.glossaries.change(glossary_id, name, read, merge=True))
    if info is None:
        raise ApiError(404, "Glossary not found")
    return JSONResponse(info.as_json())


def pair_of(request: Request) -> tuple[str, str]:
    source, target = request.query_params.get("source_lang"), request.query_params.get("target_lang")
    if not source or not target:
        raise ApiError(400, "Parameters 'source_lang' and 'target_lang' are required.")
    return source, target


async def glossary_dictionaries_v3(request: Request) -> Response:
    """PUT: a dictionary replacing the one of its pair (or added); DELETE: the dictionary of a pair."""
    state = state_of(request)
    glossary_id = request.path_params["glossary_id"]
    if request.method == "DELETE":
        if not state.glossaries.remove_dictionary(glossary_id, *pair_of(request)):
            raise ApiError(404, "Glossary dictionary not found")
        return Response(status_code=204)
    source_lang, target_lang, entries, entries_format = dictionary_values(await request_values(request))
    info = await stored_glossary(lambda: state.glossaries.change(
        glossary_id, None, [(source_lang, target_lang, entries, entries_format)], merge=False))
    dictionary = None if info is None else info.dictionary(source_lang, target_lang)
    if dictionary is None:
        raise ApiError(404, "Glossary not found")
    return JSONResponse(dictionary.as_json())


async def glossary_entries_v3(request: Request) -> JSONResponse:
    state = state_of(request)
    info = glossary_for(state, request.path_params["glossary_id"])
    source, target = pair_of(request)
    found = info.dictionary(source, target)
    if found is None:
        raise ApiError(404, "Glossary dictionary not found")
    return JSONResponse({"dictionaries": [{**found.as_json(), "entries": found.entries_tsv(), "entries_format": "tsv"}]})


async def glossary_language_pairs(request: Request) -> JSONResponse:
    state_of(request)
    return JSONResponse({"supported_languages": glossary_pairs()})


@lru_cache(maxsize=1)
def glossary_pairs() -> list[dict]:
    codes = [code.lower() for code in DEEPL_LANGUAGES if code not in DEEPL_TARGET_ONLY]
    return [{"source_lang": s, "target_lang": t} for s in codes for t in codes if s != t]


def routes() -> list[Route]:
    return [
        Route("/v2/translate", translate, methods=["POST"]),
        Route("/v2/languages", languages, methods=["GET", "POST"]),
        Route("/v2/usage", usage, methods=["GET", "POST"]),
        Route("/v2/document", closing_uploads(upload_document), methods=["POST"]),
        Route("/v2/document/{document_id}", document_status, methods=["POST"]),
        Route("/v2/document/{document_id}/result", document_result, methods=["POST"]),
        Route("/v2/glossaries", create_glossary, methods=["POST"]),
        Route("/v2/glossaries", list_glossaries, methods=["GET"]),
        Route("/v2/glossaries/{glossary_id}", glossary, methods=["GET", "DELETE"]),
        Route("/v2/glossaries/{glossary_id}/entries", glossary_entries, methods=["GET"]),
        Route("/v2/glossary-language-pairs", glossary_language_pairs, methods=["GET"]),
        Route("/v3/glossaries", create_glossary_v3, methods=["POST"]),
        Route("/v3/glossaries", list_glossaries_v3, methods=["GET"]),
        Route("/v3/glossaries/{glossary_id}", glossary_v3, methods=["GET", "DELETE", "PATCH"]),
        Route("/v3/glossaries/{glossary_id}/dictionaries", glossary_dictionaries_v3, methods=["PUT", "DELETE"]),
        Route("/v3/glossaries/{glossary_id}/entries", glossary_entries_v3, methods=["GET"]),
    ]
