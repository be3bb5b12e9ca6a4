"""A corpus run: each file read in shards, each shard translated through a TranslationSession (on
this process's engine, or on a Ray worker's: app.cluster), each shard's output written atomically.

Outputs of FILE (beside it, or in --output-dir), for targets L1[,L2...]:
- one file `STEM.L1.EXT` (several targets: `STEM.translated.EXT`; plain text: `STEM.L.txt` per
  target), or with a shard size a folder of that name without the extension holding
  `part-00000.EXT`, `part-00001.EXT`... and `_dragoman.json`, what the shards were made from.
- A shard is written to a temporary name and renamed: it exists whole or not at all, so a finished
  shard is the mark that it is done. A run started again keeps the shards it finds (and a
  finished unsharded output) and translates the others; `_dragoman.json` refuses to mix shards of
  another input, shard size, field, targets or options (--overwrite starts again).

Shards are translated independently (each its own `TranslationSession.translate` call per target),
so a shard's translations, scores included, are the same whichever worker or run makes them.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Protocol

from dragoman.app.corpus.formats import CorpusError, CorpusFormat, Shard, corpus_format
from dragoman.app.documents import remove_stale_temporaries, write_atomically
from dragoman.app.session.session import TranslationJob
from dragoman.engine import read_json_object

if TYPE_CHECKING:
    from dragoman.app.corpus.progress import RunProgress
    from dragoman.app.session.session import TranslationSession

MANIFEST = "_dragoman.json"
MANY_TARGETS = "translated"  # the name's tag for an output that holds several languages


@dataclass(frozen=True)
class CorpusRequest:
    """What every shard is translated with (sent to the workers with each shard's texts)."""

    source: str
    targets: tuple[str, ...]
    options: dict = field(default_factory=dict)  # overrides of Translator.default_options
    adapter: str = ""
    split: bool = True  # each record cut into sentences (else each of its lines one sentence)
    scores: bool = False  # the score and doubts columns too


@dataclass
class ShardTranslation:
    """A shard's records translated, by target language: the translation, the model's score (the
    mean of its sentences'; None from the translation memory) and the doubts of each record."""

    translations: dict[str, list[str | None]]
    scores: dict[str, list[float | None]]
    doubts: dict[str, list[list[str]]]
    sentences: int  # sentences translated, over all targets


def translate_texts(pipeline: TranslationSession, request: CorpusRequest, texts: list[str | None]) -> ShardTranslation:
    """`texts` (a shard's records) into each target through the translation pipeline (memory, terms,
    engine, doubts). A record's lines are translated as stdin's are; None stays None."""
    lines: list[str] = []
    record_of_line: list[int] = []
    for number, text in enumerate(texts):
        parts = (text or "").split("\n")
        lines += parts
        record_of_line += [number] * len(parts)
    out = ShardTranslation({}, {}, {}, 0)
    for target in request.targets:
        result = pipeline.translate(TranslationJob(lines, request.source, target, request.options, typed=False,
                                                  adapter=request.adapter, split=request.split, doubts=request.scores))
        translated: list[list[str]] = [[] for _ in texts]
        for line, record in zip(result.lines(), record_of_line):
            translated[record].append(line)
        scores: list[list[float | None]] = [[] for _ in texts]
        doubts: list[dict[str, None]] = [{} for _ in texts]
        for found, reasons, line_number in zip(result.found, result.doubts, result.text.line_of):
            record = record_of_line[line_number]
            scores[record].append(found.score if found is not None else None)
            doubts[record].update(dict.fromkeys(reasons))
        out.translations[target] = [None if text is None else "\n".join(t) for text, t in zip(texts, translated)]
        out.scores[target] = [sum(s) / len(s) if s and None not in s else None for s in scores]  # type: ignore[arg-type]
        out.doubts[target] = [list(d) for d in doubts]
        out.sentences += len(result.text.sentences)
    return out


class ShardTranslator(Protocol):
    """Where shards are translated: `translate(request, work)` takes (key, texts) pairs as it has room
    for them and yields (key, translation, worker name) as each is done, in any order."""

    def translate(self, request: CorpusRequest, work: Iterator[tuple[Any, list[str | None]]]
                  ) -> Iterator[tuple[Any, ShardTranslation, str]]: ...


class LocalShards:
    """Shards translated one after the other by this process's translation pipeline."""

    def __init__(self, pipeline: TranslationSession):
        self.pipeline = pipeline

    def translate(self, request: CorpusRequest, work: Iterator[tuple[Any, list[str | None]]]
                  ) -> Iterator[tuple[Any, ShardTranslation, str]]:
        for key, texts in work:
            yield key, translate_texts(self.pipeline, request, texts), "local"


class CorpusFile:
    """One input of a corpus run: its format, where its shards go, and whether each is done."""

    def __init__(self, path: Path, field: str, request: CorpusRequest, shard_size: int | None,
                 output_dir: Path | None):
        if not path.is_file():
            raise CorpusError(f"{path}: no such file")
        self.path = path
        self.format: CorpusFormat = corpus_format(path, field)
        if request.scores and not self.format.can_score:
            raise CorpusError(f"{path}: plain text has no room for --scores (JSON Lines, TSV, CSV or Parquet have)")
        self.request = request
        self.shard_size = shard_size
        folder = output_dir or path.parent
        groups = [(t,) for t in request.targets] if self.format.one_output_per_target else [request.targets]
        suffix = path.suffix if self.format.suffixes else path.suffix or ".txt"
        # Each output: the targets it holds, and its file (or, sharded, its folder).
        self.outputs = [(g, folder / f"{path.stem}.{g[0] if len(g) == 1 else MANY_TARGETS}{'' if shard_size else suffix}")
                        for g in groups]
        self.suffix = suffix
        self.records = self.shards = 0
        self.checked = False

    def check(self) -> None:
        """Read the whole file once (bad input found before anything is translated), counting it."""
        if self.checked:
            return
        for shard in self.format.shards(self.shard_size):
            self.records += len(shard.texts)
            self.shards += 1
        if any(p.resolve() == self.path.resolve() for _, p in self.outputs):
            raise CorpusError(f"{self.path}: the output would replace the input")
        self.checked = True

    def files(self, index: int) -> list[Path]:
        """Shard `index`'s output files (one per output)."""
        if not self.shard_size:
            return [path for _, path in self.outputs]
        width = max(5, len(str(self.shards - 1)))
        return [folder / f"part-{index:0{width}d}{self.suffix}" for _, folder in self.outputs]

    def done(self, index: int) -> bool:
        return all(p.exists() for p in self.files(index))

    def prepare(self, overwrite: bool) -> None:
        """Sharded: the folders and their manifests (refusing shards of another run unless `overwrite`,
        which removes them)."""
        if not self.shard_size:
            return
        stat = self.path.stat()
        made_from = {"input": str(self.path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns,
                     "field": self.format.field, "shard_size": self.shard_size, **asdict(self.request)}
        for _, folder in self.outputs:
            manifest = folder / MANIFEST
            if manifest.exists() and not overwrite:
                try:
                    found = read_json_object(manifest, ValueError, "")
                except ValueError:  # damaged, or not a regular file: not ours
                    found = None
                if found != json.loads(json.dumps(made_from)):
                    raise CorpusError(f"{folder}: holds shards made from another input or with other options "
                                      "(--overwrite translates it again)")
                continue
            folder.mkdir(parents=True, exist_ok=True)
            if overwrite:
                for part in folder.glob(f"part-*{self.suffix}"):
                    part.unlink()
            write_atomically(manifest, (json.dumps(made_from, ensure_ascii=False, indent=1) + "\n").encode())

    def write(self, shard: Shard, translated: ShardTranslation) -> None:
        """Shard `shard`'s records with the translation columns, each output written atomically."""
        name = self.format.field
        for (targets, _), path in zip(self.outputs, self.files(shard.index)):
            columns: dict[str, list] = {}
            for target in targets:
                columns[f"{name}.{target}"] = translated.translations[target]
                if self.request.scores:
                    columns[f"{name}.{target}.score"] = translated.scores[target]
                    columns[f"{name}.{target}.doubts"] = translated.doubts[target]
            path.parent.mkdir(parents=True, exist_ok=True)
            remove_stale_temporaries(path)
            write_atomically(path, self.format.encode(shard.records, columns))


def run_corpus(files: list[CorpusFile], shards: ShardTranslator, progress: RunProgress, overwrite: bool = False) -> None:
    """Translate every shard of `files` not done yet (all of them with `overwrite`). All files are read
    through first: bad input stops the run before anything is translated."""
    for corpus in files:
        corpus.check()
    for corpus in files:
        corpus.prepare(overwrite)
    progress.start([c.shards for c in files], sum(c.records for c in files))
    pending: dict[tuple[int, int], Shard] = {}

    def work() -> Iterator[tuple[tuple[int, int], list[str | None]]]:
        for number, corpus in enumerate(files):
            for shard in corpus.format.shards(corpus.shard_size):
                if not overwrite and corpus.done(shard.index):
                    progress.kept(number, len(shard.texts))
                    continue
                pending[number, shard.index] = shard
                yield (number, shard.index), shard.texts

    for (number, index), translated, worker in shards.translate(files[0].request, work()):
        shard = pending.pop((number, index))
        files[number].write(shard, translated)
        progress.done(number, worker, len(shard.texts), translated.sentences)
