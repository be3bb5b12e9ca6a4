"""What the server keeps between requests: uploaded documents and their translations (both APIs),
and DeepL glossaries.

Documents live in a private temporary folder for the server's lifetime, each in a folder of its
own named by a random id; the oldest are removed beyond `MAX_DOCUMENTS`. DeepL glossaries are kept
in the app's data folder (`server-glossaries/ID.tsv` with `ID.json`), so that they outlive a
restart as DeepL's do, and are read with the app's glossary reader and its limits.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import tempfile
import threading
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from dragoman.app.session.glossary import Glossary, GlossaryError, read_glossary
from dragoman.engine import read_json_object

MAX_DOCUMENTS = 200
_UNSAFE = re.compile(r"[^\w.-]+")
GLOSSARY_ID = re.compile(r"[0-9a-f]{32}")


def safe_name(name: str) -> str:
    """A file name from a client: its last component, only word characters, dots and dashes."""
    name = _UNSAFE.sub("_", Path(name.replace("\\", "/")).name).lstrip(".")
    return name[-200:] or "document"


@dataclass
class StoredDocument:
    id: str
    key: str  # DeepL's document_key: the id alone does not give the result
    source_path: Path
    status: str = "queued"  # DeepL's: queued, translating, done, error
    output_path: Path | None = None
    error: str | None = None
    characters: int = 0


class DocumentStore:
    def __init__(self):
        self.folder = Path(tempfile.mkdtemp(prefix="dragoman-server-"))
        self._documents: dict[str, StoredDocument] = {}
        self._lock = threading.Lock()

    def add(self, filename: str, data: bytes) -> StoredDocument:
        document_id = secrets.token_hex(16)
        folder = self.folder / document_id
        folder.mkdir()
        path = folder / safe_name(filename)
        path.write_bytes(data)
        document = StoredDocument(document_id, secrets.token_hex(32), path, characters=len(data))
        with self._lock:
            self._documents[document_id] = document
            while len(self._documents) > MAX_DOCUMENTS:
                oldest = next(iter(self._documents))
                shutil.rmtree(self.folder / oldest, ignore_errors=True)
                del self._documents[oldest]
        return document

    def get(self, document_id: str) -> StoredDocument | None:
        with self._lock:
            return self._documents.get(document_id)

    def output_folder(self, document: StoredDocument) -> Path:
        out = self.folder / document.id / "translated"
        out.mkdir(exist_ok=True)
        return out

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


@dataclass
class GlossaryInfo:
    """DeepL's glossary fields (its API's names)."""

    glossary_id: str
    name: str
    source_lang: str  # DeepL's code in lower case, as DeepL answers
    target_lang: str
    creation_time: str
    entry_count: int
    ready: bool = True
    glossary: Glossary | None = field(default=None, repr=False)

    def as_json(self) -> dict:
        info = asdict(self)
        del info["glossary"]
        return info


class GlossaryStore:
    def __init__(self, folder: Path):
        self.folder = folder

    def create(self, name: str, source_lang: str, target_lang: str, entries: str, entries_format: str) -> GlossaryInfo:
        """A new glossary; GlossaryError names what is wrong with the entries."""
        glossary_id = secrets.token_hex(16)
        self.folder.mkdir(parents=True, exist_ok=True)
        suffix = ".tsv" if entries_format == "tsv" else ".csv"
        path = self.folder / f"{glossary_id}{suffix}"
        path.write_text(entries, encoding="utf-8")
        try:
            glossary = read_glossary(path)
        except GlossaryError as e:
            path.unlink()
            raise GlossaryError(str(e).removeprefix(f"{path.name}: ")) from None
        created = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        info = GlossaryInfo(glossary_id, name, source_lang.lower(), target_lang.lower(), created,
                            len(glossary.entries), glossary=glossary)
        (self.folder / f"{glossary_id}.json").write_text(json.dumps(info.as_json()), encoding="utf-8")
        return info

    def get(self, glossary_id: str) -> GlossaryInfo | None:
        if not GLOSSARY_ID.fullmatch(glossary_id):
            return None
        meta = self.folder / f"{glossary_id}.json"
        if not meta.is_file():
            return None
        try:
            info = GlossaryInfo(**read_json_object(meta, ValueError, ""))
        except (ValueError, TypeError):  # not one of ours: damaged, or replaced by a FIFO or a device
            return None
        entries = next((p for p in (self.folder / f"{glossary_id}.tsv", self.folder / f"{glossary_id}.csv")
                        if p.is_file()), None)
        try:
            info.glossary = read_glossary(entries) if entries else None
        except GlossaryError:
            return None
        return info if info.glossary is not None else None

    def list(self) -> list[GlossaryInfo]:
        if not self.folder.is_dir():
            return []
        found = (self.get(meta.stem) for meta in sorted(self.folder.glob("*.json")))
        return sorted((info for info in found if info is not None), key=lambda info: info.creation_time)

    def delete(self, glossary_id: str) -> bool:
        if self.get(glossary_id) is None:
            return False
        for suffix in (".json", ".tsv", ".csv"):
            (self.folder / f"{glossary_id}{suffix}").unlink(missing_ok=True)
        return True
