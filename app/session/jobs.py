"""Document jobs, shared by the command line and the window: a file in, a translated file out
(`TranslationSession.translate_document` runs one), what it found (`JobReport`), and the stores
they read and write.

`distinct_jobs` makes the job list safe to run: each file once, and no two jobs writing one file.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable

from dragoman.app.documents import DocumentError, is_supported
from dragoman.app.session.terms import Terms
from dragoman.app.session.translation_memory import MEMORY_FILE, TranslationMemory
from dragoman.app.settings import AppPaths
from dragoman.engine import TranslationCache

CACHE_FILE = "translations.sqlite3"
# STEM.<FLORES code>.EXT: a translation we wrote; a folder looked through again does not translate it again.
TRANSLATED_STEM = re.compile(r"\.[a-z]{3}_[A-Z][a-z]{3}$")


def open_cache(paths: AppPaths | None = None) -> TranslationCache:
    return TranslationCache((paths or AppPaths.default()).cache_dir / CACHE_FILE)


def open_memory(paths: AppPaths | None = None) -> TranslationMemory:
    return TranslationMemory((paths or AppPaths.default()).data_dir / MEMORY_FILE)


@dataclass(frozen=True)
class DocumentJob:
    source_path: Path
    output_path: Path
    source: str  # FLORES-200 codes
    target: str
    options: dict = field(default_factory=dict)  # overrides of Translator.default_options
    adapter: str = ""
    overwrite: bool = False
    document_options: dict = field(default_factory=dict)  # a format's own options (PDF: pdf_as, bilingual)
    terms: Terms | None = None  # glossaries and do-not-translate settings of this job alone (None: the pipeline's)


@dataclass
class JobReport:
    """What a document job's sentences came from: `translated` by the engine, `cached` from earlier
    runs, `remembered` from the translation memory; and the `doubtful` ones (app.session.confidence) of
    the first two kinds, in the document's order. `proportional`: the distinct sentences whose
    formatting was placed proportionally, their translation not having exactly their tags. `notes`:
    what the user should know of its reading and writing (the encoding it was read or written in)."""

    translated: int = 0
    cached: int = 0
    remembered: int = 0
    doubtful: list[Doubtful] = field(default_factory=list)
    sentences: int = 0  # the document's distinct sentences seen so far, the number of the next one
    proportional: int = 0
    notes: list[str] = field(default_factory=list)  # the document's own (app.documents: an encoding assumed)


@dataclass(frozen=True)
class Doubtful:
    sentence: int  # the distinct sentence's number in the document, from 1
    source: str
    translation: str
    reasons: tuple[str, ...]
    score: float | None = None  # the engine's (engine.Translation); None for one from the cache


def find_documents(folder: Path) -> list[Path]:
    """The supported files under `folder`, sorted, with hidden entries and our own translations skipped."""
    found = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            file = Path(root) / name
            if not name.startswith(".") and is_supported(file) and not TRANSLATED_STEM.search(file.stem):
                found.append(file)
    return found


def distinct_jobs(jobs: list[DocumentJob], taken: Iterable[Path] = ()) -> list[DocumentJob]:
    """`jobs` with each file once, and never two writing one output: where inputs of different types
    map to one output (`a.pdf` and `a.txt` -> `a.fra_Latn.txt`; `a.pdf` and `a.PDF` -> `a.fra_Latn.pdf`),
    those whose extension is not the output's, letter for letter, keep it in its name
    (`a.pdf.fra_Latn.txt`, `a.PDF.fra_Latn.pdf`). A clash that remains (one
    name from two folders into one output folder, an output that is another job's input, or one
    of `taken`: outputs of jobs queued already) is a DocumentError naming the files."""
    by_source: dict[Path, DocumentJob] = {}
    for job in jobs:
        by_source.setdefault(job.source_path.resolve(), job)
    claims = Counter(job.output_path.resolve() for job in by_source.values())
    taken = {path.resolve() for path in taken}
    writers: dict[Path, DocumentJob] = {}
    out = []
    for job in by_source.values():
        target = job.output_path.resolve()
        if (claims[target] > 1 or target in taken) and job.source_path.suffix != job.output_path.suffix:
            name = f"{job.source_path.name}.{job.target}{job.output_path.suffix}"
            job = replace(job, output_path=job.output_path.with_name(name))
            target = job.output_path.resolve()
        if target in writers:
            raise DocumentError(f"{writers[target].source_path} and {job.source_path} would both be written to "
                                f"{job.output_path}")
        if target in by_source:
            raise DocumentError(f"{job.source_path}: its translation {job.output_path} would replace a document "
                                "that is to be translated too")
        if target in taken:
            raise DocumentError(f"{job.source_path}: {job.output_path} is being written by a job queued already")
        writers[target] = job
        out.append(job)
    return out
