"""A persistent translation cache: a sentence is translated once per model, adapter, language pair
and decoding options, across runs. Re-translating an edited document costs only its changed
sentences, and a document job stopped by a crash or a quit resumes where it was.

SQLite, one table keyed by a SHA-256 of (model identity, adapter, source, target, options, text).
The model identity is the checkpoint folder's resolved path plus its weights' size and mtime, so
replacing the weights in place invalidates its entries. Writes are committed per batch; WAL lets
the CLI and the window use the same file at once.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from dataclasses import asdict, is_dataclass
from pathlib import Path


# How long a write waits for another program's: the CLI and the window commit in milliseconds, so a
# lock held longer is a stuck or foreign program, said at once rather than after SQLite's 30 s.
BUSY_SECONDS = 5


class DatabaseError(Exception):
    """A database file that cannot be used, and why (one line naming the file)."""


def open_database(path: Path, what: str, table: str, create: str) -> sqlite3.Connection:
    """A connection to the SQLite database at `path` (`what`: "translation cache", for the messages)
    holding `table` (`create`: its CREATE TABLE IF NOT EXISTS), made if the file is new. A file that
    is no SQLite database, a database of another program (tables, none of them `table`), or one
    that is locked or read-only raises DatabaseError naming the file; a foreign one is left as it was."""
    path.parent.mkdir(parents=True, exist_ok=True)
    problem = None
    try:
        db = sqlite3.connect(path, check_same_thread=False, timeout=BUSY_SECONDS)
    except sqlite3.Error as e:
        raise DatabaseError(f"{path}: the {what} cannot be opened ({e})") from None
    try:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if tables and table not in tables:
            problem = f"a database of another program, not a {what} (it has no {table} table)"
        else:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(create)
            db.commit()
    except sqlite3.DatabaseError as e:
        message = str(e)
        if "locked" in message or "busy" in message:
            problem = f"the {what} is locked by another program (still after {BUSY_SECONDS} s)"
        elif "readonly" in message or "read-only" in message:
            problem = f"the {what} is read-only: Dragoman needs to write it"
        else:
            problem = (f"not a {what}: damaged, truncated or another kind of file ({message}); move it away and "
                       "a new one is made")
    if problem is not None:
        db.close()
        raise DatabaseError(f"{path}: {problem}")
    return db


def model_identity(model_dir: str | Path) -> str:
    model_dir = Path(model_dir).resolve()
    stamps = []
    for weights in sorted(model_dir.glob("*.safetensors")) + sorted(model_dir.glob("*.bin")):
        stat = weights.stat()
        stamps.append(f"{weights.name}:{stat.st_size}:{int(stat.st_mtime)}")
    return f"{model_dir}|{'|'.join(stamps)}"


class TranslationCache:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._db = open_database(self.path, "translation cache", "translations",
                                 "CREATE TABLE IF NOT EXISTS translations (key BLOB PRIMARY KEY, translation TEXT NOT NULL)")
        # A commit survives the process being killed without waiting for the disk (no fsync): a power
        # cut can lose the last commits, never corrupt the file, and a cache can lose a few entries.
        self._db.execute("PRAGMA synchronous=NORMAL")

    @staticmethod
    def context(model: str, adapter: str, source: str, target: str, options) -> str:
        """Everything but the text that a translation depends on, as one string."""
        if is_dataclass(options) and not isinstance(options, type):  # an instance (DecodingOptions), not a class
            options = asdict(options)
        return json.dumps([model, adapter, source, target, options], sort_keys=True, default=str)

    @staticmethod
    def key(context: str, text: str) -> bytes:
        return hashlib.sha256(f"{context}\x00{text}".encode()).digest()

    def get_many(self, context: str, texts: list[str]) -> dict[str, str]:
        keys = {self.key(context, t): t for t in texts}
        found: dict[str, str] = {}
        with self._lock:
            items = list(keys)
            for i in range(0, len(items), 500):
                chunk = items[i : i + 500]
                rows = self._db.execute(
                    f"SELECT key, translation FROM translations WHERE key IN ({','.join('?' * len(chunk))})", chunk
                )
                for key, translation in rows:
                    found[keys[key]] = translation
        return found

    def put_many(self, context: str, pairs: dict[str, str]) -> None:
        with self._lock:
            self._db.executemany(
                "INSERT OR REPLACE INTO translations (key, translation) VALUES (?, ?)",
                [(self.key(context, t), tr) for t, tr in pairs.items()],
            )
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM translations").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()
