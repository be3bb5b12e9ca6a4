"""What a run of many units (corpus shards, or documents) shows: on a terminal one line kept up to
date (files, units, sentences, sentences/s, and each worker's sentences); at the end, terminal or
not, one summary line."""

from __future__ import annotations

import time
from collections import Counter
from typing import TextIO

from dragoman.app.wording import counted


class RunProgress:
    def __init__(self, stream: TextIO, unit: str = "shards"):
        self.stream = stream
        self.unit = unit
        self.live = stream.isatty()
        self.started = time.monotonic()
        self.units = self.records = self.files = 0
        self.finished = self.kept_units = self.records_done = self.sentences = self.replaced = 0
        self.left: Counter[int] = Counter()  # units left of each file
        self.by_worker: Counter[str] = Counter()  # sentences

    def start(self, units: list[int], records: int) -> None:
        """`units`: each file's (a document is a file of one unit)."""
        self.units, self.records, self.files = sum(units), records, len(units)
        self.left = Counter(dict(enumerate(units)))
        self.started = time.monotonic()

    def kept(self, file: int, records: int) -> None:
        """A unit done by an earlier run."""
        self.kept_units += 1
        self.left[file] -= 1
        self.records_done += records
        self.show()

    def done(self, file: int, worker: str, records: int, sentences: int) -> None:
        self.finished += 1
        self.records_done += records
        self.sentences += sentences
        self.by_worker[worker] += sentences
        self.left[file] -= 1
        self.show()

    def worker_replaced(self) -> None:
        self.replaced += 1
        self.show()

    def line(self) -> str:
        seconds = max(time.monotonic() - self.started, 1e-9)
        files_left = sum(1 for n in self.left.values() if n > 0)
        parts = [f"files {self.files - files_left}/{self.files}",
                 f"{self.unit} {self.finished + self.kept_units}/{self.units}"
                 + (f" ({self.kept_units} done before)" if self.kept_units else ""),
                 counted(self.sentences, "sentence"), f"{self.sentences / seconds:.1f} sentences/s"]
        if len(self.by_worker) > 1:
            parts.append("workers " + ", ".join(f"{w} {n}" for w, n in sorted(self.by_worker.items())))
        if self.replaced:
            parts.append(f"{counted(self.replaced, 'worker')} replaced")
        return "  ".join(p for p in parts if p)

    def show(self) -> None:
        if self.live:
            self.stream.write("\r\033[K" + self.line())
            self.stream.flush()

    def end(self) -> None:
        if self.live:
            self.stream.write("\r\033[K")
        self.stream.write(f"dragoman: {self.line()} in {time.monotonic() - self.started:.1f} s\n")
        self.stream.flush()
