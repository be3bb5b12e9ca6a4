"""Corpus formats: records read in shards, and a shard's records written back with columns added.

A format reads a file as shards of at most `size` records (`shards`), each with the text of every
record (None where a record has none: a null, or an empty Parquet cell) and the records themselves
as the format keeps them; `encode` gives a shard's records back as the file's bytes with the new
columns appended, in the order given. Nothing but the added columns changes.

- JSON Lines (.jsonl, .ndjson): one JSON object a line; the text in a field (`FIELD`), the new
  values as fields `FIELD.<lang>` (and `.score`, `.doubts` as a number and a list of strings).
- TSV (.tsv) and CSV (.csv): the column is a header's name (the first row is the header, and
  gets the new names) or a number counting from 1 (no header: the new values are appended).
  TSV is split on tabs with no quoting; CSV is RFC 4180 (Python's csv module).
- Parquet (.parquet): a string column; the new columns are strings, float64 and list<string>.
- Plain text (anything else): one record a line; one output per target language, a translation
  a line (no room for scores).

Bad input is a CorpusError naming the file and the line (or row) that is wrong.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator


class CorpusError(Exception):
    """A corpus that cannot be read as asked: the message names the file and what is wrong."""


@dataclass
class Shard:
    index: int  # from 0, in the file's order
    records: object  # what the format's `encode` takes back
    texts: list[str | None]  # each record's text to translate (None: it has none)


class CorpusFormat:
    """One file of a corpus in one format; `field` names where each record's text is."""

    suffixes: tuple[str, ...] = ()
    one_output_per_target = False  # plain text: each language its own file
    can_score = True

    def __init__(self, path: Path, field: str):
        self.path = path
        self.field = field

    def shards(self, size: int | None) -> Iterator[Shard]:
        """The file's records, `size` at a time (None: all in one shard); CorpusError on bad input."""
        chunk: list = []
        index = 0
        for record in self.records():
            chunk.append(record)
            if size is not None and len(chunk) == size:
                yield self.shard(index, chunk)
                chunk, index = [], index + 1
        if chunk or index == 0:
            yield self.shard(index, chunk)

    def records(self) -> Iterator:
        raise NotImplementedError

    def shard(self, index: int, records: list) -> Shard:
        raise NotImplementedError

    def encode(self, records, columns: dict[str, list]) -> bytes:
        raise NotImplementedError

    def error(self, where: str, what: str) -> CorpusError:
        return CorpusError(f"{self.path}{' ' + where if where else ''}: {what}")


def text_lines(path: Path, what: CorpusFormat) -> Iterator[tuple[int, str]]:
    """(line number from 1, line without its end) of a UTF-8 file."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                yield number, raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as e:
                raise what.error(f"line {number}", f"not valid UTF-8 (byte {raw[e.start]:#04x})") from None


class JsonLines(CorpusFormat):
    suffixes = (".jsonl", ".ndjson")

    def records(self) -> Iterator[dict]:
        for number, line in text_lines(self.path, self):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise self.error(f"line {number}", f"not valid JSON ({e.msg} at column {e.colno})") from None
            if not isinstance(record, dict):
                raise self.error(f"line {number}", "not a JSON object")
            if self.field not in record:
                raise self.error(f"line {number}", f'no field "{self.field}" (--field names the text\'s)')
            if not isinstance(record[self.field], (str, type(None))):
                raise self.error(f"line {number}", f'field "{self.field}" is {type(record[self.field]).__name__}, not text')
            yield record

    def shard(self, index: int, records: list[dict]) -> Shard:
        return Shard(index, records, [r[self.field] for r in records])

    def encode(self, records: list[dict], columns: dict[str, list]) -> bytes:
        lines = []
        for i, record in enumerate(records):
            lines.append(json.dumps({**record, **{name: values[i] for name, values in columns.items()}},
                                    ensure_ascii=False) + "\n")
        return "".join(lines).encode()


class Table(CorpusFormat):
    """TSV and CSV: rows of cells, a header row when the column is named."""

    @property
    def index(self) -> int | None:
        """The column's position when `field` is a number (from 1), else None (a header's name)."""
        return int(self.field) - 1 if self.field.isdigit() and int(self.field) >= 1 else None

    def rows(self) -> Iterator[tuple[int, list[str]]]:
        raise NotImplementedError

    def encode_rows(self, rows: list[list[str]]) -> str:
        raise NotImplementedError

    def records(self) -> Iterator[list[str]]:
        rows = self.rows()
        column = self.index
        if column is None:
            try:
                _, self.header = next(rows)
            except StopIteration:
                raise self.error("", "empty: no header row") from None
            if self.field not in self.header:
                raise self.error("line 1", f'no column "{self.field}" in the header ({", ".join(self.header)})')
            column = self.header.index(self.field)
        self.column = column
        for number, row in rows:
            if not any(row):
                continue
            if len(row) <= column:
                raise self.error(f"line {number}", f"{len(row)} columns, no column {column + 1}")
            yield row

    def shard(self, index: int, records: list[list[str]]) -> Shard:
        return Shard(index, records, [row[self.column] for row in records])

    def encode(self, records: list[list[str]], columns: dict[str, list]) -> bytes:
        def cell(value) -> str:
            if value is None:
                return ""
            if isinstance(value, float):
                return f"{value:.4f}"
            return "; ".join(value) if isinstance(value, list) else value

        header = [[*self.header, *columns]] if self.index is None else []
        rows = [[*row, *(cell(values[i]) for values in columns.values())] for i, row in enumerate(records)]
        return self.encode_rows(header + rows).encode()


class Tsv(Table):
    suffixes = (".tsv",)

    def rows(self) -> Iterator[tuple[int, list[str]]]:
        for number, line in text_lines(self.path, self):
            yield number, line.split("\t")

    def encode_rows(self, rows: list[list[str]]) -> str:
        # No quoting in TSV: a tab or line end the model wrote would cut the row.
        clean = str.maketrans({"\t": " ", "\n": " ", "\r": " "})
        return "".join("\t".join(c.translate(clean) for c in row) + "\n" for row in rows)


class Csv(Table):
    suffixes = (".csv",)

    def rows(self) -> Iterator[tuple[int, list[str]]]:
        try:
            with open(self.path, encoding="utf-8", newline="") as f:
                reader = csv.reader(f)
                for row in reader:
                    yield reader.line_num, row
        except UnicodeDecodeError as e:
            raise self.error("", f"not valid UTF-8 (byte {e.object[e.start]:#04x} at offset {e.start})") from None
        except csv.Error as e:
            raise self.error(f"line {reader.line_num}", str(e)) from None

    def encode_rows(self, rows: list[list[str]]) -> str:
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows(rows)
        return out.getvalue()


class PlainText(CorpusFormat):
    one_output_per_target = True
    can_score = False

    def records(self) -> Iterator[str]:
        for _, line in text_lines(self.path, self):
            yield line

    def shard(self, index: int, records: list[str]) -> Shard:
        return Shard(index, records, list(records))

    def encode(self, records: list[str], columns: dict[str, list]) -> bytes:
        [translations] = columns.values()
        return "".join((t or "") + "\n" for t in translations).encode()


class Parquet(CorpusFormat):
    suffixes = (".parquet",)

    def shards(self, size: int | None) -> Iterator[Shard]:
        pa, pq = pyarrow()
        try:
            reader = pq.ParquetFile(self.path)
        except (pa.ArrowException, OSError) as e:
            raise self.error("", f"not a Parquet file ({str(e).splitlines()[0]})") from None
        if self.field not in reader.schema_arrow.names:
            raise self.error("", f'no column "{self.field}" ({", ".join(reader.schema_arrow.names)})')
        kind = reader.schema_arrow.field(self.field).type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
            raise self.error("", f'column "{self.field}" is {kind}, not text')
        if size is None:
            yield self.shard(0, reader.read())
            return
        pending, rows, index = [], 0, 0
        for batch in reader.iter_batches(batch_size=size):
            pending.append(batch)
            rows += batch.num_rows
            while rows >= size:
                table = pa.Table.from_batches(pending)
                yield self.shard(index, table.slice(0, size))
                index += 1
                rest = table.slice(size)
                pending, rows = rest.to_batches(), rest.num_rows
        if rows or index == 0:
            yield self.shard(index, pa.Table.from_batches(pending, schema=reader.schema_arrow))

    def shard(self, index: int, table) -> Shard:
        return Shard(index, table, table.column(self.field).to_pylist())

    def encode(self, table, columns: dict[str, list]) -> bytes:
        pa, pq = pyarrow()
        for name, values in columns.items():
            kind = (pa.float64() if name.endswith(".score") else pa.list_(pa.string()) if name.endswith(".doubts")
                    else pa.string())
            table = table.append_column(name, pa.array(values, type=kind))
        out = pa.BufferOutputStream()
        pq.write_table(table, out)
        return out.getvalue().to_pybytes()


def pyarrow():
    """(pyarrow, pyarrow.parquet), or a one-line error saying how to install them."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise CorpusError("Parquet needs pyarrow: pip install 'dragoman[parquet]'") from None
    return pa, pq


FORMATS: tuple[type[CorpusFormat], ...] = (JsonLines, Tsv, Csv, Parquet)


def corpus_format(path: Path, field: str) -> CorpusFormat:
    """The format of `path` by its extension (plain text, one record a line, for any other)."""
    suffix = path.suffix.lower()
    kind = next((f for f in FORMATS if suffix in f.suffixes), PlainText)
    return kind(path, field)
