"""The server's one door into the app's translation pipeline (app.pipeline.pipeline): everything the
server translates goes through one `TranslationSession`, as `dragoman translate` and the window do
(sentences, the translation memory, the caches, the window's glossaries and do-not-translate
settings, protected spans, doubts). This module only turns requests into the pipeline's jobs and
its results back into the APIs' texts.

A `Pipeline` is made by the engine worker (app.server.worker) and used from its two threads, one
for text requests and one for documents and alternatives, at once: the engine decodes both in its
batches, and each job carries its own terms (a request's glossary), so nothing of one request
changes another's.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path

from dragoman.app.documents import output_path
from dragoman.app.documents.html import MarkupFragment
from dragoman.app.session.glossary import Glossary
from dragoman.app.session.jobs import DocumentJob, JobReport
from dragoman.app.session.session import TranslationJob, TranslationSession
from dragoman.app.session.terms import Terms, saved_terms
from dragoman.app.settings import AppPaths, Settings

log = logging.getLogger("dragoman.server")

TEXT, HTML, XML = "text", "html", "xml"  # what a request's text is


@dataclass(frozen=True)
class Text:
    text: str
    markup: str = TEXT  # TEXT: lines of plain text; HTML or XML: tags kept around the translated words


class Pipeline:
    """The pipeline over the server's model, with its adapter and decoding options (`overrides` of
    the checkpoint's defaults, as `dragoman translate`'s options give them)."""

    def __init__(self, translator, adapter: str = "", overrides: dict | None = None, paths: AppPaths | None = None,
                 pipeline: TranslationSession | None = None):
        """`pipeline`: the window's, over `translator`, shared (its memory and caches; the window closes it);
        None: one of the server's own."""
        paths = paths or AppPaths.default()
        self.terms = saved_terms(paths, Settings.load(paths.settings_file))
        self.owns_pipeline = pipeline is None
        self.pipeline = TranslationSession.open(translator, paths, self.terms) if pipeline is None else pipeline
        self.translator = translator
        self.adapter = adapter
        self.overrides = overrides or {}
        self.options = self.pipeline.options(self.overrides)

    def close(self) -> None:
        if self.owns_pipeline:
            self.pipeline.close()

    def _terms(self, glossary: Glossary | None) -> Terms | None:
        """A request's terms: the window's, with its glossary first (it wins); None: the pipeline's.
        They travel with the request's job: requests run at once, each with its own."""
        return None if glossary is None else dataclasses.replace(self.terms, glossaries=(glossary, *self.terms.glossaries))

    def translate(self, source: str, target: str, texts: list[Text], glossary: Glossary | None = None) -> list[str]:
        """Each text's translation: the plain ones together as one job, line by line and sentence by
        sentence as stdin is; the marked-up ones together as an HTML document's paragraphs are."""
        plain = [i for i, t in enumerate(texts) if t.markup == TEXT]
        fragments = {i: MarkupFragment(t.text, xml=t.markup == XML) for i, t in enumerate(texts) if t.markup != TEXT}
        out = [""] * len(texts)
        terms = self._terms(glossary)
        if plain:
            lines = [t.text.split("\n") for t in (texts[i] for i in plain)]
            result = self.pipeline.translate(TranslationJob([line for text in lines for line in text], source, target,
                                                           self.overrides, adapter=self.adapter, terms=terms))
            self._log_doubts(zip(result.text.sentences, result.translations, result.doubts))
            translated = iter(result.lines())
            for i, text in zip(plain, lines):
                out[i] = "\n".join(next(translated) for _ in text)
        if fragments:
            report = JobReport()
            runs = iter(self.pipeline.translate_segments(
                self._job(source, target, terms=terms), [s for fragment in fragments.values() for s in fragment.segments],
                report))
            for i, fragment in fragments.items():
                out[i] = fragment.text([next(runs) for _ in fragment.segments])
            self._log_doubts((d.source, d.translation, d.reasons) for d in report.doubtful)
        return out

    def alternatives(self, source: str, target: str, texts: list[str], count: int,
                     glossary: Glossary | None = None) -> list[tuple[str, list[str]]]:
        """Each text translated whole with up to `count` other translations (`dragoman translate
        --alternatives`): one from the translation memory has none."""
        result = self.pipeline.translate(TranslationJob(texts, source, target, self.overrides, typed=False,
                                                       adapter=self.adapter, alternatives=count + 1,
                                                       terms=self._terms(glossary)))
        out = []
        for translation, best in zip(result.translations, result.found):
            others = [] if best is None else list(dict.fromkeys(a.text for a in best.alternatives if a.text != best.text))
            out.append((translation or "", others))
        return out

    def translate_file(self, path: Path, out_dir: Path, source: str, target: str,
                       glossary: Glossary | None = None) -> Path:
        """The document at `path` translated into `out_dir` (named as `dragoman translate` names it);
        text requests that arrive meanwhile join the engine's batch beside it."""
        report = JobReport()
        job = self._job(source, target, path, output_path(path, target, out_dir), self._terms(glossary))
        written = self.pipeline.translate_document(job, report=report)
        self._log_doubts((d.source, d.translation, d.reasons) for d in report.doubtful)
        return written

    def _job(self, source: str, target: str, path: Path = Path(), out: Path = Path(),
             terms: Terms | None = None) -> DocumentJob:
        return DocumentJob(path, out, source, target, self.overrides, adapter=self.adapter, terms=terms)

    @staticmethod
    def _log_doubts(doubtful) -> None:
        """(source, translation, reasons) of each sentence: the doubtful ones logged."""
        for source, translation, reasons in doubtful:
            if reasons:
                log.info("doubtful translation (%s): %r -> %r", ", ".join(reasons), source, translation)
