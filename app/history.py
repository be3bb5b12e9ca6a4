"""The history of typed translations: a local SQLite file in the data folder, searchable, that the
person can turn off (nothing more is written) and clear (the file's rows deleted).

One entry per text: translate-as-you-type translates after every pause, so a translation whose
source extends or trims the newest entry's (the same text being typed or edited) replaces it
instead of adding another, and a text translated again moves to the top.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from dragoman.app.session.translation_memory import contains_pattern

MAX_SHOWN = 200


@dataclass(frozen=True)
class HistoryEntry:
    id: int
    when: float  # seconds since the epoch
    source_language: str
    target_language: str
    source: str
    translation: str


class TranslationHistory:
    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS history (id INTEGER PRIMARY KEY, time REAL, source_language TEXT, "
            "target_language TEXT, source TEXT, translation TEXT)"
        )
        self._db.commit()

    def close(self) -> None:
        self._db.close()

    def add(self, source_language: str, target_language: str, source: str, translation: str) -> None:
        source, translation = source.strip(), translation.strip()
        if not source or not translation:
            return
        newest = self.search("", limit=1)
        if newest and (newest[0].source_language, newest[0].target_language) == (source_language, target_language) \
                and (source.startswith(newest[0].source) or newest[0].source.startswith(source)):
            self._db.execute("UPDATE history SET time = ?, source = ?, translation = ? WHERE id = ?",
                             (time.time(), source, translation, newest[0].id))
        else:  # a text translated again moves to the top
            self._db.execute("DELETE FROM history WHERE source_language = ? AND target_language = ? AND source = ?",
                             (source_language, target_language, source))
            self._db.execute("INSERT INTO history (time, source_language, target_language, source, translation) "
                             "VALUES (?, ?, ?, ?, ?)", (time.time(), source_language, target_language, source, translation))
        self._db.commit()

    def search(self, query: str, limit: int = MAX_SHOWN) -> list[HistoryEntry]:
        """The newest entries whose source or translation contains `query` (any case; "" = all)."""
        pattern = contains_pattern(query)
        rows = self._db.execute(
            "SELECT id, time, source_language, target_language, source, translation FROM history "
            "WHERE source LIKE ?1 ESCAPE '\\' OR translation LIKE ?1 ESCAPE '\\' ORDER BY id DESC LIMIT ?2",
            (pattern, limit),
        ).fetchall()
        return [HistoryEntry(*row) for row in rows]

    def clear(self) -> None:
        self._db.execute("DELETE FROM history")
        self._db.commit()
        self._db.execute("VACUUM")  # the deleted texts leave the file too
