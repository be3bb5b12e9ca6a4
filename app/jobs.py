"""The document job layer shared by the command line and the window: a file in, a translated file
out, through the translation cache and the engine.

`cached_translate_batch` wraps the engine so that sentences already in the cache are not
translated again and finished translations are stored as they come: a job stopped by a crash or a
quit resumes, on its next run, where it was.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from app.documents import translate_document
from app.settings import AppPaths
from engine.languages import get_language
from engine.translation_cache import TranslationCache, model_identity

CACHE_FILE = "translations.sqlite3"
# While a document decodes, its translations are stored at most this often (what a crash can lose):
# each write commits (an fsync), and a GPU finishes thousands of sentences a second.
CACHE_SECONDS = 2.0


def open_cache(paths: AppPaths | None = None) -> TranslationCache:
    return TranslationCache((paths or AppPaths.default()).cache_dir / CACHE_FILE)


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


def cached_translate_batch(
    translator, cache: TranslationCache | None, job: DocumentJob, should_stop: Callable[[], bool] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Callable[[list[str]], list[str | None]]:
    """`translate_batch(texts)` for `translate_document`: the texts the cache holds come from it, the
    rest from the engine in one call. Translations are stored as they come, every CACHE_SECONDS, and
    whatever came before a stop (or an error) is stored before the call returns. `progress(done,
    len(texts))` follows the results, at most every ~0.5%."""
    options = translator.default_options(**job.options)
    # The adapter's identity, not just its name: replacing its files invalidates its entries.
    adapter = translator.adapter_identity(job.adapter)
    context = TranslationCache.context(model_identity(translator.model_dir), adapter, job.source, job.target, options)

    def translate_batch(texts: list[str]) -> list[str | None]:
        found = cache.get_many(context, texts) if cache is not None else {}
        missing = [t for t in texts if t not in found]
        unstored: dict[str, str] = {}
        store_by = time.monotonic() + CACHE_SECONDS
        reported = len(found)
        step = max(1, len(texts) // 200)
        if progress:
            progress(reported, len(texts))

        def store() -> None:
            nonlocal store_by
            if cache is not None and unstored:
                cache.put_many(context, unstored)
            unstored.clear()
            store_by = time.monotonic() + CACHE_SECONDS

        def on_result(i: int, translation: str) -> None:
            nonlocal reported
            found[missing[i]] = unstored[missing[i]] = translation
            if time.monotonic() >= store_by:
                store()
            if progress and (len(found) - reported >= step or len(found) == len(texts)):
                reported = len(found)
                progress(reported, len(texts))

        if missing:
            try:
                results = translator.translate(missing, job.source, job.target, options, priority=1,
                                               should_stop=should_stop, adapter=job.adapter, on_result=on_result)
                for text, result in zip(missing, results):
                    if result is not None and text not in found:  # from a translator that does not report
                        found[text] = unstored[text] = result
            finally:
                store()
        return [found.get(t) for t in texts]

    return translate_batch


def run_document_job(
    job: DocumentJob,
    translator,
    cache: TranslationCache | None,
    progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Path:
    """Translate `job`'s file. Its distinct sentences go to the engine in one call (batch_sentences
    None), so `cached_translate_batch`'s progress counts the document's: one call keeps a GPU's
    rows full from the document's first sentence to its last, where calls of a few thousand
    sentences each decoded their last ones with rows left empty and tokenized the next call's
    first ones with the device idle."""
    return translate_document(
        job.source_path,
        job.output_path,
        cached_translate_batch(translator, cache, job, should_stop, progress),
        source_script=get_language(job.source).script,
        target_script=get_language(job.target).script,
        progress=progress,
        overwrite=job.overwrite,
        batch_sentences=None,
        options=job.document_options,
    )
