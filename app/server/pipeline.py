"""The server's one door into the app's translation pipeline: everything the server translates goes
through here, the way `dragoman translate` does it (typed text cut into sentences, the translation
memory, the translation cache, the window's glossaries and do-not-translate settings, protected
spans, doubts; documents through the document job code). When the Qt-free translation session
lands, this module is what changes.

A `Pipeline` is used by one thread only (the engine worker's: app.server.worker), which also makes
it: its SQLite connections belong to that thread.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path

from dragoman.app.documents import output_path
from dragoman.app.documents.html import MarkupFragment
from dragoman.app.documents.segments import translate_segments
from dragoman.app.glossary import Glossary
from dragoman.app.jobs import (DocumentJob, JobReport, cached_translate_batch, open_cache, open_memory,
                              run_document_job, translation_context)
from dragoman.app.settings import AppPaths, Settings
from dragoman.app.terms import Terms, saved_terms
from dragoman.app.typed_text import TypedText
from dragoman.engine import get_language

log = logging.getLogger("dragoman.server")

TEXT, HTML, XML = "text", "html", "xml"  # what a request's text is


@dataclass(frozen=True)
class Text:
    text: str
    markup: str = TEXT  # TEXT: lines of plain text; HTML or XML: tags kept around the translated words


class Pipeline:
    """Translations with the server's model, adapter and decoding options (`overrides` of the
    checkpoint's defaults, as `dragoman translate`'s options give them)."""

    def __init__(self, translator, adapter: str = "", overrides: dict | None = None, paths: AppPaths | None = None):
        self.translator = translator
        self.adapter = adapter
        self.overrides = overrides or {}
        self.options = translator.default_options(**self.overrides)
        paths = paths or AppPaths.default()
        self.terms = saved_terms(paths, Settings.load(paths.settings_file))
        self.memory = open_memory(paths)
        self.cache = open_cache(paths)

    def close(self) -> None:
        self.memory.close()
        self.cache.close()

    def _terms(self, glossary: Glossary | None) -> Terms:
        if glossary is None:
            return self.terms
        return dataclasses.replace(self.terms, glossaries=(glossary, *self.terms.glossaries))  # the request's wins

    def _job(self, source: str, target: str, path: Path = Path(), out: Path = Path()) -> DocumentJob:
        return DocumentJob(path, out, source, target, self.overrides, adapter=self.adapter)

    def translate(self, source: str, target: str, texts: list[Text], glossary: Glossary | None = None) -> list[str]:
        """Each text's translation, all of them in one engine call: plain texts line by line and
        sentence by sentence as stdin is, marked-up ones as an HTML document's paragraphs are."""
        report = JobReport()
        translate_batch = cached_translate_batch(self.translator, self.cache, self._job(source, target),
                                                 report=report, memory=self.memory, terms=self._terms(glossary))
        scripts = get_language(source).script, get_language(target).script
        typed = {i: TypedText(t.text.split("\n"), *scripts) for i, t in enumerate(texts) if t.markup == TEXT}
        fragments = {i: MarkupFragment(t.text, xml=t.markup == XML) for i, t in enumerate(texts) if t.markup != TEXT}
        sentences = list(dict.fromkeys(s for text in typed.values() for s in text.sentences))
        found: dict[str, str | None] = {}

        def with_sentences(tagged: list[str]) -> list[str | None]:  # the plain sentences ride along
            results = translate_batch(sentences + tagged)
            found.update(zip(sentences, results))
            return results[len(sentences):]

        segments = [segment for fragment in fragments.values() for segment in fragment.segments]
        runs = translate_segments(segments, with_sentences, *scripts, batch_sentences=None)
        if sentences and not found:  # no marked-up text had words to translate
            with_sentences([])
        out: list[str] = []
        at = 0
        for i in range(len(texts)):
            if i in typed:
                out.append("\n".join(typed[i].lines([found[s] for s in typed[i].sentences])))
            else:
                count = len(fragments[i].segments)
                out.append(fragments[i].text(runs[at:at + count]))
                at += count
        self._log_doubts(report)
        return out

    def alternatives(self, source: str, target: str, texts: list[str], count: int,
                     glossary: Glossary | None = None) -> list[tuple[str, list[str]]]:
        """Each text translated whole with up to `count` other translations (`dragoman translate
        --alternatives`): one from the translation memory has none."""
        context = self._context(source, target)
        remembered = self.memory.find(source, target, context, texts)
        missing = [t for t in dict.fromkeys(texts) if t not in remembered]
        pair_terms = self._terms(glossary).for_pair(source, target)
        positions = self.translator.config.max_position_embeddings
        full = dict(zip(missing, self.translator.translate_full(
            missing, source, target, self.options, adapter=self.adapter, alternatives=count + 1,
            terms=[pair_terms.of(t, max_length=self.options.length, max_positions=positions) for t in missing])))
        out = []
        for text in texts:
            if text in remembered:
                out.append((remembered[text], []))
            else:
                best = full[text]
                others = list(dict.fromkeys(a.text for a in best.alternatives if a.text != best.text))
                out.append((best.text, others))
        return out

    def _context(self, source: str, target: str) -> str:
        return translation_context(self.translator, self.adapter, source, target, self.options)

    def translate_file(self, path: Path, out_dir: Path, source: str, target: str,
                       glossary: Glossary | None = None) -> Path:
        """The document at `path` translated into `out_dir` (named as `dragoman translate` names it)."""
        job = self._job(source, target, path, output_path(path, target, out_dir))
        report = JobReport()
        written = run_document_job(job, self.translator, self.cache, report=report, memory=self.memory,
                                   terms=self._terms(glossary))
        self._log_doubts(report)
        return written

    @staticmethod
    def _log_doubts(report: JobReport) -> None:
        for doubt in report.doubtful:
            log.info("doubtful translation (%s): %r -> %r", ", ".join(doubt.reasons), doubt.source, doubt.translation)
