"""What the server keeps between requests: uploaded documents and their translations (both APIs),
and DeepL glossaries.

Documents live in a private temporary folder for the server's lifetime, each in a folder of its
own named by a random id; the oldest are removed beyond `MAX_DOCUMENTS`. DeepL glossaries are kept
in the app's data folder (`server-glossaries/ID.json` and a `ID.SOURCE-TARGET.tsv` for each language
pair), so that they outlive a restart as DeepL's do, and are read with the app's glossary reader and
its limits.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
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
class GlossaryDictionary:
    """A glossary's entries for one language pair (DeepL's v3 "dictionary")."""

    source_lang: str  # DeepL's code in lower case, as DeepL answers
    target_lang: str
    entry_count: int
    glossary: Glossary | None = field(default=None, repr=False)

    def as_json(self) -> dict:
        return {"source_lang": self.source_lang, "target_lang": self.target_lang, "entry_count": self.entry_count}

    def entries_tsv(self) -> str:
        return "\n".join(f"{entry.source}\t{entry.target}" for entry in self.glossary.entries) if self.glossary else ""


@dataclass
class GlossaryInfo:
    """A DeepL glossary: its dictionaries, one per language pair. A v2 glossary is one with a
    single dictionary (`as_v2_json`); v3 glossaries may have several (`as_json`)."""

    glossary_id: str
    name: str
    creation_time: str
    dictionaries: list[GlossaryDictionary]

    def as_json(self) -> dict:
        return {"glossary_id": self.glossary_id, "name": self.name, "creation_time": self.creation_time,
                "dictionaries": [d.as_json() for d in self.dictionaries]}

    def as_v2_json(self) -> dict:
        only = self.dictionaries[0]
        return {"glossary_id": self.glossary_id, "name": self.name, "ready": True, "source_lang": only.source_lang,
                "target_lang": only.target_lang, "creation_time": self.creation_time, "entry_count": only.entry_count}

    def dictionary(self, source_lang: str, target_lang: str) -> GlossaryDictionary | None:
        pair = (source_lang.lower(), target_lang.lower())
        return next((d for d in self.dictionaries if (d.source_lang, d.target_lang) == pair), None)


class GlossaryStore:
    """Glossaries kept as `ID.json` (name, time, its dictionaries' pairs) and one `ID.SOURCE-TARGET.tsv`
    of entries per dictionary, read with the app's glossary reader."""

    def __init__(self, folder: Path):
        self.folder = folder
        self._lock = threading.Lock()  # a change reads, then writes, the glossary's files
        self._upgrade()

    def _upgrade(self) -> None:
        """Glossaries kept before they had several pairs (`ID.json` naming one pair, `ID.tsv` or
        `ID.csv`) rewritten as one-dictionary glossaries; one that cannot be read is left as it is."""
        for meta in sorted(self.folder.glob("*.json")) if self.folder.is_dir() else []:
            try:
                fields = read_json_object(meta, ValueError, "")
                if "dictionaries" in fields or not GLOSSARY_ID.fullmatch(meta.stem):
                    continue
                old = next(p for p in (meta.with_suffix(".tsv"), meta.with_suffix(".csv")) if p.is_file())
                glossary = read_glossary(old)
                info = GlossaryInfo(meta.stem, fields["name"], fields["creation_time"], [GlossaryDictionary(
                    str(fields["source_lang"]).lower(), str(fields["target_lang"]).lower(), len(glossary.entries),
                    glossary)])
            except (ValueError, TypeError, KeyError, StopIteration, GlossaryError):
                continue
            dictionary = info.dictionaries[0]
            self._entries_path(info.glossary_id, dictionary).write_text(dictionary.entries_tsv(), encoding="utf-8")
            self._write_meta(info)
            old.unlink()

    def create(self, name: str, dictionaries: list[tuple[str, str, str, str]]) -> GlossaryInfo:
        """A new glossary of (source_lang, target_lang, entries, entries_format) dictionaries;
        GlossaryError names what is wrong with their entries."""
        created = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        info = GlossaryInfo(secrets.token_hex(16), name, created, [])
        with self._lock:
            self._write(info, dictionaries, merge=False)
        return info

    def change(self, glossary_id: str, name: str | None, dictionaries: list[tuple[str, str, str, str]],
               merge: bool) -> GlossaryInfo | None:
        """Rename the glossary and add its dictionaries: each merged into the one of its pair
        (`merge`: its entries win) or replacing it. None: no such glossary."""
        with self._lock:
            info = self.get(glossary_id)
            if info is None:
                return None
            info.name = name if name is not None else info.name
            self._write(info, dictionaries, merge)
        return info

    def remove_dictionary(self, glossary_id: str, source_lang: str, target_lang: str) -> bool:
        with self._lock:
            info = self.get(glossary_id)
            found = info.dictionary(source_lang, target_lang) if info else None
            if info is None or found is None:
                return False
            info.dictionaries.remove(found)
            self._entries_path(glossary_id, found).unlink(missing_ok=True)
            self._write_meta(info)
        return True

    def _write(self, info: GlossaryInfo, dictionaries: list[tuple[str, str, str, str]], merge: bool) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        read: list[GlossaryDictionary] = []
        for source_lang, target_lang, entries, entries_format in dictionaries:
            glossary = self._read_entries(entries, entries_format)
            old = info.dictionary(source_lang, target_lang)
            if merge and old is not None and old.glossary is not None:
                mine = {entry.source for entry in glossary.entries}
                kept = [entry for entry in old.glossary.entries if entry.source not in mine]
                glossary = Glossary(glossary.path, tuple(kept) + glossary.entries)
            read.append(GlossaryDictionary(source_lang.lower(), target_lang.lower(), len(glossary.entries), glossary))
        for dictionary in read:  # every dictionary read before any file is changed
            old = info.dictionary(dictionary.source_lang, dictionary.target_lang)
            if old is not None:
                info.dictionaries.remove(old)
            info.dictionaries.append(dictionary)
            self._entries_path(info.glossary_id, dictionary).write_text(dictionary.entries_tsv(), encoding="utf-8")
        self._write_meta(info)

    def _read_entries(self, entries: str, entries_format: str):
        """Entries sent in a request, read with the app's reader and its limits."""
        with tempfile.TemporaryDirectory(dir=self.folder) as folder:
            path = Path(folder) / f"entries.{entries_format}"
            path.write_text(entries, encoding="utf-8")
            try:
                return read_glossary(path)
            except GlossaryError as e:
                raise GlossaryError(str(e).removeprefix(f"{path.name}: ")) from None

    def _entries_path(self, glossary_id: str, dictionary: GlossaryDictionary) -> Path:
        return self.folder / f"{glossary_id}.{dictionary.source_lang}-{dictionary.target_lang}.tsv"

    def _write_meta(self, info: GlossaryInfo) -> None:
        (self.folder / f"{info.glossary_id}.json").write_text(json.dumps(info.as_json()), encoding="utf-8")

    def get(self, glossary_id: str) -> GlossaryInfo | None:
        if not isinstance(glossary_id, str) or not GLOSSARY_ID.fullmatch(glossary_id):
            return None
        meta = self.folder / f"{glossary_id}.json"
        if not meta.is_file():
            return None
        try:
            fields = read_json_object(meta, ValueError, "")
            info = GlossaryInfo(fields["glossary_id"], fields["name"], fields["creation_time"],
                                [GlossaryDictionary(**d) for d in fields["dictionaries"]])
        except (ValueError, TypeError, KeyError):  # not one of ours: damaged, or replaced by a FIFO or a device
            return None
        try:
            for dictionary in info.dictionaries:
                dictionary.glossary = read_glossary(self._entries_path(glossary_id, dictionary))
        except GlossaryError:
            return None
        return info if info.dictionaries else None

    def list(self) -> list[GlossaryInfo]:
        if not self.folder.is_dir():
            return []
        found = (self.get(meta.stem) for meta in sorted(self.folder.glob("*.json")))
        return sorted((info for info in found if info is not None), key=lambda info: info.creation_time)

    def delete(self, glossary_id: str) -> bool:
        with self._lock:
            info = self.get(glossary_id)
            if info is None:
                return False
            for dictionary in info.dictionaries:
                self._entries_path(glossary_id, dictionary).unlink(missing_ok=True)
            (self.folder / f"{glossary_id}.json").unlink(missing_ok=True)
        return True
