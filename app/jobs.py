"""The document job layer shared by the command line and the window: a file in, a translated file
out, through the translation cache and the engine.

`cached_translate_batch` wraps the engine so that sentences already in the cache are not
translated again and each finished batch is stored at once: a job stopped by a crash or a quit
resumes, on its next run, where it was.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from app.documents import segments, translate_document
from app.settings import AppPaths
from engine.languages import get_language
from engine.translation_cache import TranslationCache, model_identity

CACHE_FILE = "translations.sqlite3"


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


def cached_translate_batch(
    translator, cache: TranslationCache | None, job: DocumentJob, should_stop: Callable[[], bool] | None = None
) -> Callable[[list[str]], list[str | None]]:
    options = translator.default_options(**job.options)
    # The adapter's identity, not just its name: replacing its files invalidates its entries.
    adapter = translator.adapter_identity(job.adapter)
    context = TranslationCache.context(model_identity(translator.model_dir), adapter, job.source, job.target, options)

    def translate_batch(texts: list[str]) -> list[str | None]:
        found = cache.get_many(context, texts) if cache is not None else {}
        missing = [t for t in texts if t not in found]
        if missing:
            results = translator.translate(
                missing, job.source, job.target, options, priority=1, should_stop=should_stop, adapter=job.adapter
            )
            done = {t: r for t, r in zip(missing, results) if r is not None}
            if cache is not None and done:
                cache.put_many(context, done)
            found.update(done)
        return [found.get(t) for t in texts]

    return translate_batch


def run_document_job(
    job: DocumentJob,
    translator,
    cache: TranslationCache | None,
    progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Path:
    return translate_document(
        job.source_path,
        job.output_path,
        cached_translate_batch(translator, cache, job, should_stop),
        source_script=get_language(job.source).script,
        target_script=get_language(job.target).script,
        progress=progress,
        overwrite=job.overwrite,
        batch_sentences=sentences_a_call(translator, job),
    )


def sentences_a_call(translator, job: DocumentJob) -> int:
    """How many sentences a document job hands the engine at once: on a GPU, four waves of the
    sentences that decode together (its 2,048 rows: 512 with 4 beams, 2,048 greedy). A GPU only
    reaches its speed with hundreds of sentences decoding together, and keeps it only if the next
    ones are ready when a wave ends: within a call the engine tokenizes later sentences while
    earlier ones decode, but each call tokenizes its first wave and decodes its last with the GPU
    idle. Four waves keep that to a quarter of the host's work, and a call to ~1 s of decoding at
    600M, ~3-5 s at 3.3B (how often progress moves, and what a crash would lose)."""
    if translator.device.type != "cuda":
        return segments.BATCH_SENTENCES  # read here, so that tests can make it small
    return 4 * translator.generator.sentences_at_once(translator.default_options(**job.options).num_beams)
