"""The document job layer shared by the command line and the window: a file in, a translated file
out, through the translation cache and the engine.

`cached_translate_batch` wraps the engine so that sentences already in the cache are not
translated again and finished translations are stored as they come: a job stopped by a crash or a
quit resumes, on its next run, where it was.

`distinct_jobs` makes the job list safe to run: each file once, and no two jobs writing one file.
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterable

from dragoman.app.confidence import doubts
from dragoman.app.documents import DocumentError, is_supported, translate_document
from dragoman.app.translation_memory import MEMORY_FILE, TranslationMemory
from dragoman.app.settings import AppPaths
from dragoman.app.terms import Marks, Terms, cache_text
from dragoman.engine import TranslationCache, get_language, model_identity

CACHE_FILE = "translations.sqlite3"
# While a document decodes, its translations are stored at most this often (what a killed run can
# lose): a GPU finishes thousands of sentences a second, and each store is one commit (no fsync).
CACHE_SECONDS = 0.25
# STEM.<FLORES code>.EXT: a translation we wrote; a folder looked through again does not translate it again.
TRANSLATED_STEM = re.compile(r"\.[a-z]{3}_[A-Z][a-z]{3}$")


def open_cache(paths: AppPaths | None = None) -> TranslationCache:
    return TranslationCache((paths or AppPaths.default()).cache_dir / CACHE_FILE)


def open_memory(paths: AppPaths | None = None) -> TranslationMemory:
    return TranslationMemory((paths or AppPaths.default()).data_dir / MEMORY_FILE)


def translation_context(translator, adapter: str, source: str, target: str, options) -> str:
    """Everything a translation depends on but its text: the model, the adapter's identity (not just
    its name: replacing its files invalidates what was stored with it), the languages, the options."""
    return TranslationCache.context(model_identity(translator.model_dir), translator.adapter_identity(adapter),
                                    source, target, options)


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


@dataclass
class JobReport:
    """What a document job's sentences came from: `translated` by the engine, `cached` from earlier
    runs, `remembered` from the translation memory; and the `doubtful` ones (app.confidence) of
    the first two kinds, in the document's order. `proportional`: the distinct sentences whose
    formatting was placed proportionally, their translation not having exactly their tags."""

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
    map to one output (`a.pdf` and `a.txt` -> `a.fra_Latn.txt`), those of another type than the
    output keep their extension in its name (`a.pdf.fra_Latn.txt`). A clash that remains (one
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
        if (claims[target] > 1 or target in taken) and job.source_path.suffix.lower() != job.output_path.suffix.lower():
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


def cached_translate_batch(
    translator, cache: TranslationCache | None, job: DocumentJob, should_stop: Callable[[], bool] | None = None,
    progress: Callable[[int, int], None] | None = None, report: JobReport | None = None,
    memory: TranslationMemory | None = None, terms: Terms | None = None,
) -> Callable[[list[str]], list[str | None]]:
    """`translate_batch(texts)` for `translate_document`: the texts the translation memory or the
    cache holds come from them, the rest from the engine in one call, each with its terms
    (app.terms: `terms`' glossaries and do-not-translate spans, and its placeholder tags).
    Translations are stored as they come, every CACHE_SECONDS, and whatever came before a stop
    (or an error) is stored before the call returns. `progress(done, len(texts))` follows the
    results, at most every ~0.5%; `report` counts the texts of each kind."""
    options = translator.default_options(**job.options)
    context = translation_context(translator, job.adapter, job.source, job.target, options)
    pair_terms = (terms or Terms()).for_pair(job.source, job.target)
    positions = translator.config.max_position_embeddings
    marks = Marks.for_translator(translator)

    def translate_batch(texts: list[str]) -> list[str | None]:
        # The memory holds what a person chose for a sentence: it is reused whatever the glossary.
        found = memory.find(job.source, job.target, context, texts) if memory is not None else {}
        remembered = set(found)  # chosen by a person: not doubted
        masked = {t: pair_terms.mask(t, marks, tagged=True, max_length=options.length, max_positions=positions)
                  for t in texts}
        verbatim = {t for t in texts if t not in found and masked[t].verbatim}  # nothing to translate
        found.update((t, t) for t in verbatim)
        # The cache keys on what the model read and keeps what it wrote, marks and all.
        keys = {t: cache_text(masked[t].text, masked[t].terms) for t in texts}
        if cache is not None:
            stored = cache.get_many(context, [keys[t] for t in texts if t not in found])
            found.update((t, masked[t].restore(stored[keys[t]])) for t in texts if keys[t] in stored and t not in found)
        missing = [t for t in texts if t not in found]
        if report is not None:
            report.remembered += len(remembered)
            report.cached += len(found) - len(remembered) - len(verbatim)
            report.translated += len(missing)
        unstored: dict[str, str] = {}
        store_by = time.monotonic() + CACHE_SECONDS
        reported = len(found)
        step = max(1, len(texts) // 200)
        if progress:
            progress(reported, len(texts))

        def store() -> None:
            nonlocal store_by
            if cache is not None and unstored:
                cache.put_many(context, {keys[t]: translation for t, translation in unstored.items()})
            unstored.clear()
            store_by = time.monotonic() + CACHE_SECONDS

        scores: dict[str, float] = {}  # the engine's, for the doubts

        def on_translation(i: int, translation) -> None:
            if translation.score is not None:
                scores[missing[i]] = translation.score

        def on_result(i: int, translation: str) -> None:
            nonlocal reported
            unstored[missing[i]] = translation
            found[missing[i]] = masked[missing[i]].restore(translation)
            if time.monotonic() >= store_by:
                store()
            if progress and (len(found) - reported >= step or len(found) == len(texts)):
                reported = len(found)
                progress(reported, len(texts))

        if missing:
            try:
                results = translator.translate([masked[t].text for t in missing], job.source, job.target, options,
                                               priority=1, should_stop=should_stop, adapter=job.adapter,
                                               on_result=on_result, on_translation=on_translation,
                                               terms=[masked[t].terms for t in missing])
                for text, result in zip(missing, results):
                    if result is not None and text not in found:  # from a translator that does not report
                        unstored[text] = result
                        found[text] = masked[text].restore(result)
            finally:
                store()
        if report is not None:
            for text in texts:
                report.sentences += 1
                translation = found.get(text)
                if translation is not None and text not in remembered and text not in verbatim:
                    score = scores.get(text)
                    if reasons := doubts(text, translation, job.source, job.target, score):
                        report.doubtful.append(Doubtful(report.sentences, text, translation, tuple(reasons), score))
        return [found.get(t) for t in texts]

    return translate_batch


def run_document_job(
    job: DocumentJob,
    translator,
    cache: TranslationCache | None,
    progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    report: JobReport | None = None,
    memory: TranslationMemory | None = None,
    terms: Terms | None = None,
) -> Path:
    """Translate `job`'s file. Its distinct sentences go to the engine in one call (batch_sentences
    None), so `cached_translate_batch`'s progress counts the document's: one call keeps a GPU's
    rows full from the document's first sentence to its last, where calls of a few thousand
    sentences each decoded their last ones with rows left empty and tokenized the next call's
    first ones with the device idle. `report`, if given, counts its sentences translated and cached,
    and those placed proportionally. `terms`: the glossaries and do-not-translate settings."""

    def proportional(text: str) -> None:
        if report is not None:
            report.proportional += 1

    return translate_document(
        job.source_path,
        job.output_path,
        cached_translate_batch(translator, cache, job, should_stop, progress, report, memory, terms),
        source_script=get_language(job.source).script,
        target_script=get_language(job.target).script,
        progress=progress,
        overwrite=job.overwrite,
        batch_sentences=None,
        options=job.document_options,
        proportional=proportional,
        note=report.notes.append if report is not None else None,
    )
