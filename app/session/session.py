"""The translation pipeline (`TranslationSession`), the one that the window's worker, the command line
(stdin and files), document jobs and the local server all call, without Qt.

    split into sentences -> translation memory -> translation cache -> terms -> engine -> doubts

Each step exists once, here:

- split: typed text and stdin by app.session.typed_text (`_layout`), documents by their format
  (app.documents) through `translate_document`, the server's HTML and XML pieces through
  `translate_segments`;
- the translation memory (what a person chose for a sentence, reused whatever the glossary) is
  looked up in `recall` and written by `accept`;
- the cache: documents keep their translations on disk (engine.TranslationCache, keyed with the
  sentence's terms: app.session.terms.cache_text; a document's texts go through memory, cache and
  engine in parts, app.session.document_batch), typed text in memory only (`RecentTranslations`);
- terms (glossaries, do-not-translate, protected spans, a document's placeholder tags) are looked up
  in `masked`, for translations, alternatives and completions alike: each verbatim span reaches the
  model as a numbered mark and comes back byte for byte (app.session.terms.Masked), and a sentence
  with nothing to translate but such spans never reaches it;
- decoding options are built in `options`, what a translation depends on besides its text in `context`;
- doubts (app.session.confidence) are checked in `doubts_of`, never for a translation from the memory.

A pipeline holds one loaded engine (`translator`) and the stores it reads and writes. Its calls
may come from several threads at once (the window translates typed text while a document runs):
each waits for its own engine handle, and the engine's loop decodes them together, typed text first.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from dragoman.app.documents import Cancelled, translate_document
from dragoman.app.documents.segments import Run, Segment, translate_segments
from dragoman.app.session import detect
from dragoman.app.session.confidence import doubts
from dragoman.app.session.document_batch import DocumentTranslator
from dragoman.app.session.document_process import DocumentProcess, translate_document_apart
from dragoman.app.session.jobs import DocumentJob, JobReport, open_cache, open_memory
from dragoman.app.session.terms import Marks, Masked, PairTerms, Terms
from dragoman.app.session.translation_memory import TranslationMemory
from dragoman.app.session.typed_text import TypedText
from dragoman.app.settings import AppPaths
from dragoman.engine import DOCUMENT, TYPED, DatabaseError, TranslationCache, get_language

if TYPE_CHECKING:
    from dragoman.engine import DecodingOptions, Translation, Translator

ALTERNATIVES = 4  # hypotheses a click on a sentence asks for


@dataclass(frozen=True)
class TranslationJob:
    """Lines of text to translate: the window's source pane, stdin, a request to the server."""

    texts: list[str]  # the lines, each cut into sentences (app.session.typed_text); one translation each
    source: str  # FLORES-200 code; with `detect`, the language used when detection is unsure
    target: str
    options: dict = field(default_factory=dict)  # overrides of Translator.default_options (None = keep)
    detect: bool = False  # detect the source language first (`TranslationSession.source_of`)
    typed: bool = True  # typed text: first in the engine, its recent translations kept in memory
    adapter: str = ""  # LoRA adapter: a subfolder of adapters_dir; "" = the base model
    adapters_dir: str = ""  # the adapters folder (settings); "" = keep the engine's
    # (sentence index, the start of its translation a person typed): that sentence is completed from
    # the start (Translator.translate's `starts`), the others come from what is known of them.
    completion: tuple[int, str] | None = None
    split: bool = True  # each line cut into sentences; else each line one sentence, as typed
    terms: Terms | None = None  # glossaries and do-not-translate settings of this job alone (None: the pipeline's)
    # Each line whole (blank ones too), its translation with up to this many - 1 alternatives.
    alternatives: int | None = None
    doubts: bool = True  # each translation's doubts judged (stdin with no report has no use for them)


@dataclass
class TextResult:
    """A TranslationJob's translations, by sentence of `text` (None: stopped before it was done)."""

    text: TypedText
    translations: list[str | None]
    # The engine's, with score and alternatives; None from the memory, or for a sentence with nothing to translate.
    found: list[Translation | None]
    doubts: list[list[str]]  # why each sentence's translation may be wrong

    @property
    def stopped(self) -> bool:
        return any(t is None for t in self.translations)

    def lines(self) -> list[str]:
        return self.text.lines(self.translations)

    def line_doubts(self) -> dict[int, str]:
        """The doubtful lines, each with its sentences' reasons in one string."""
        reasons: dict[int, list[str]] = {}
        for index, found in enumerate(self.doubts):
            reasons.setdefault(self.text.line_of[index], []).extend(found)
        return {line: "; ".join(dict.fromkeys(r)) for line, r in reasons.items() if r}


class RecentTranslations:
    """The translations of recently typed sentences, by everything they depend on, least recently used
    dropped past `capacity`. Kept in memory only: typed text is not written to disk."""

    def __init__(self, capacity: int = 4096):
        self.capacity = capacity
        self._found: OrderedDict[tuple, Translation] = OrderedDict()

    def get(self, key: tuple) -> Translation | None:
        found = self._found.get(key)
        if found is not None:
            self._found.move_to_end(key)
        return found

    def put(self, key: tuple, translation: Translation) -> None:
        self._found[key] = translation
        while len(self._found) > self.capacity:
            self._found.popitem(last=False)


class TranslationSession:
    """The pipeline over one loaded engine: `translate` (lines of text), `translate_document`,
    `alternatives` of a sentence, a completion from a start (`TranslationJob.completion`), and
    `accept` (a person's translation into the memory). `cache` and `memory`: the stores (None: not
    used); `terms`: the glossaries and do-not-translate settings translations keep to;
    `documents_apart`: whether documents run in a process of their own (None: on a GPU)."""

    def __init__(self, translator: Translator, cache: TranslationCache | None = None,
                 memory: TranslationMemory | None = None, terms: Terms | None = None,
                 documents_apart: bool | None = None):
        self.translator = translator
        self.cache = cache
        self.memory = memory
        self.terms = terms or Terms()
        self.recent = RecentTranslations()
        # On a CPU the process would take cores from the engine's own threads.
        self.documents_apart = translator.device.type == "cuda" if documents_apart is None else documents_apart

    @classmethod
    def open(cls, translator: Translator, paths: AppPaths | None = None, terms: Terms | None = None,
             unusable: Callable[[str], None] | None = None) -> TranslationSession:
        """A pipeline with the app's translation cache and memory (of `paths`, else the user's). A store
        whose file cannot be used (engine.DatabaseError, one line naming it) is said to `unusable` and
        the pipeline goes on without it; without `unusable`, the error is raised."""
        stores: list = []
        try:
            for opener in (open_cache, open_memory):
                try:
                    stores.append(opener(paths))
                except DatabaseError as e:
                    if unusable is None:
                        raise
                    unusable(str(e))
                    stores.append(None)
        except BaseException:
            for store in stores:
                if store is not None:
                    store.close()
            raise
        cache, memory = stores
        detect.load_in_background()  # the first translation's doubts detect its language
        session = cls(translator, cache, memory, terms=terms)
        if session.documents_apart:
            DocumentProcess.start_spare(translator)  # the first document's process, ready when it comes
        return session

    def close(self) -> None:
        for store in (self.cache, self.memory):
            if store is not None:
                store.close()
        self.cache = self.memory = None

    def terms_of(self, job: TranslationJob | DocumentJob) -> Terms:
        """The job's own terms (a server request's glossary), else the pipeline's."""
        return job.terms if job.terms is not None else self.terms

    def set_terms(self, terms: Terms) -> None:
        """The terms of the translations that start from now on (any thread: one assignment)."""
        self.terms = terms

    # -- what a translation depends on ---------------------------------------------------------------

    def options(self, overrides: dict) -> DecodingOptions:
        return self.translator.default_options(**overrides)

    def context(self, adapter: str, source: str, target: str, options: DecodingOptions) -> str:
        """Everything a translation depends on but its text: the model, the adapter's identity (not just
        its name: replacing its files invalidates what was stored with it), the languages, the options."""
        return TranslationCache.context(self.translator.model_identity,
                                        self.translator.adapter_identity(adapter), source, target, options)

    @cached_property
    def marks(self) -> Marks | None:
        """How verbatim spans are marked for this engine's vocabulary (None: no form it spells)."""
        return Marks.for_translator(self.translator)

    def masked(self, terms: PairTerms, sentences: list[str], options: DecodingOptions,
               tagged: bool = False) -> list[Masked]:
        """Each sentence as the model reads it, its verbatim spans as marks, with its terms
        (app.session.terms), those that fit its translation's length."""
        positions = self.translator.config.max_position_embeddings
        return [terms.mask(s, self.marks, tagged=tagged, max_length=options.length, max_positions=positions)
                for s in sentences]

    def source_of(self, job: TranslationJob) -> str | None:
        """The job's source language as detected in its text (None: unsure)."""
        return detect.detect_language("\n".join(job.texts))

    @staticmethod
    def layout(job: TranslationJob) -> TypedText:
        """The job's lines cut into what the engine translates (its `sentences`), and how their
        translations go back into lines."""
        return TypedText(job.texts, get_language(job.source).script, get_language(job.target).script,
                         split=job.split, whole_lines=job.alternatives is not None)

    def recall(self, job: TranslationJob | DocumentJob, context: str, sentences: list[str]) -> dict[str, str]:
        """The sentences the translation memory holds a translation of, in the job's languages and `context`."""
        return self.memory.find(job.source, job.target, context, sentences) if self.memory is not None else {}

    @staticmethod
    def doubts_of(sentence: str, translation: str | None, source: str, target: str, score: float | None) -> list[str]:
        """Why `translation` of `sentence` may be wrong (none for no translation)."""
        return doubts(sentence, translation, source, target, score) if translation is not None else []

    # -- lines of text -------------------------------------------------------------------------------

    def translate(self, job: TranslationJob, on_sentence: Callable[[int, str], None] | None = None,
                  should_stop: Callable[[], bool] | None = None) -> TextResult:
        """The job's lines cut into sentences and translated: those the memory holds from it, typed
        ones seen lately from `recent`, the rest from the engine with their terms (the sentence
        `completion` names from the person's start, whatever the memory says); a sentence with
        nothing to translate but verbatim spans is its own translation. `on_sentence(i, text)` hears
        each sentence's best hypothesis as it decodes, and known ones at once."""
        options = self.options(job.options)
        if job.adapters_dir:
            self.translator.set_adapters_dir(job.adapters_dir)
        text = self.layout(job)
        sentences = text.sentences
        completed = job.completion[0] if job.completion is not None else None
        known = self.recall(job, self.context(job.adapter, job.source, job.target, options), sentences)
        masked = dict(zip(sentences, self.masked(self.terms_of(job).for_pair(job.source, job.target), sentences, options)))
        known.update((s, s) for s in sentences if s not in known and masked[s].verbatim)
        if completed is not None:  # a person's start: neither the memory nor recent translations apply
            known.pop(sentences[completed], None)
        recent_key = (self.translator.adapter_identity(job.adapter), job.source, job.target, options)
        found: dict[str, Translation] = {}
        for i, sentence in enumerate(sentences):
            if sentence in known and on_sentence is not None:
                on_sentence(i, known[sentence])
            elif job.typed and i != completed and (hit := self.recent.get((recent_key, sentence, tuple(masked[sentence].terms)))):
                found[sentence] = hit
                if on_sentence is not None:
                    on_sentence(i, hit.text)
        missing = list(dict.fromkeys(s for i, s in enumerate(sentences)
                                     if s not in known and s not in found and i != completed))
        at: dict[str, list[int]] = {}  # the sentence indices each missing sentence stands for
        for i, sentence in enumerate(sentences):
            at.setdefault(sentence, []).append(i)

        def heard(j: int, hypothesis: str) -> None:
            assert on_sentence is not None  # asked for only then
            sentence = missing[j]
            for i in at[sentence]:
                on_sentence(i, masked[sentence].restore(hypothesis, partial=True))

        priority = TYPED if job.typed else DOCUMENT
        if missing:
            results = self.translator.translate_full(
                [masked[s].text for s in missing], job.source, job.target, options,
                # best hypotheses streamed only to a listener: each costs the engine's thread a read and a decode a step
                alternatives=job.alternatives or 1, on_partial=heard if on_sentence is not None else None,
                terms=[masked[s].terms for s in missing], priority=priority, should_stop=should_stop, adapter=job.adapter)
            for sentence, result in zip(missing, results):
                if result is not None:
                    found[sentence] = masked[sentence].restored(result)
                    if job.typed:
                        self.recent.put((recent_key, sentence, tuple(masked[sentence].terms)), found[sentence])
        translations: list[str | None] = [None] * len(sentences)
        engine_found: list[Translation | None] = [None] * len(sentences)
        if completed is not None and job.completion is not None:
            read = masked[sentences[completed]]
            on_completion = (lambda _, hypothesis: on_sentence(completed, read.restore(hypothesis, partial=True))
                             ) if on_sentence else None
            [result] = self.translator.translate_full(
                [read.text], job.source, job.target, options, on_partial=on_completion,
                starts=[read.marking(job.completion[1])], terms=[read.terms], priority=priority, should_stop=should_stop,
                adapter=job.adapter)
            result = read.restored(result) if result is not None else None
            translations[completed], engine_found[completed] = (result.text if result else None), result
        for i, sentence in enumerate(sentences):
            if i == completed:
                continue
            if sentence in known:
                translations[i] = known[sentence]
            elif sentence in found:
                translations[i], engine_found[i] = found[sentence].text, found[sentence]
        reasons = [[] if sentence in known or not job.doubts else
                   self.doubts_of(sentence, translations[i], job.source, job.target, None if made is None else made.score)
                   for i, (sentence, made) in enumerate(zip(sentences, engine_found))]
        return TextResult(text, translations, engine_found, reasons)

    def alternatives(self, job: TranslationJob, sentence: str, count: int = ALTERNATIVES) -> list[Translation]:
        """`sentence`'s best translations, best first: decoded alone with `count` beams at least,
        keeping its terms as its translation did."""
        options = self.options(job.options)
        options = options.with_changes(num_beams=max(options.num_beams, count))
        [masked] = self.masked(self.terms_of(job).for_pair(job.source, job.target), [sentence], options)
        if masked.verbatim:  # nothing to translate: the sentence is its only translation
            from dragoman.engine import Translation

            return [Translation(sentence)]
        [found] = self.translator.translate_full([masked.text], job.source, job.target, options, priority=TYPED,
                                                 adapter=job.adapter, alternatives=count, terms=[masked.terms])
        assert found is not None  # nothing stops it
        found = masked.restored(found)
        return [found, *found.alternatives]

    def accept(self, job: TranslationJob, sentence: str, translation: str) -> None:
        """A translation a person chose: the memory gives it back for the same sentence, model and options."""
        if self.memory is not None:
            context = self.context(job.adapter, job.source, job.target, self.options(job.options))
            self.memory.add(job.source, job.target, {sentence: translation}, context)

    # -- documents -----------------------------------------------------------------------------------

    def translate_document(self, job: DocumentJob, progress: Callable[[int, int], None] | None = None,
                           should_stop: Callable[[], bool] | None = None, report: JobReport | None = None) -> Path:
        """Translate `job`'s file; returns the file written. Its distinct sentences go to the engine as
        the document is read, in growing parts (app.session.document_batch), which keep a GPU's rows
        full from the document's first sentence to its last. `report`, if given, counts its
        sentences of each kind, the doubtful ones, those placed proportionally and the notes of its
        reading and writing (the encoding said). Typed text translated meanwhile, from any thread,
        joins the engine's batch ahead of the document's waiting sentences (engine.TYPED): the
        document is neither stopped nor started again. Where `documents_apart`, the document's own
        work runs in a process of its own (app.session.document_process), the engine's here."""
        if self.documents_apart:
            return translate_document_apart(self, job, progress, should_stop, report)
        return self.translate_document_here(job, progress, should_stop, report)

    def translate_document_here(self, job: DocumentJob, progress: Callable[[int, int], None] | None = None,
                                should_stop: Callable[[], bool] | None = None,
                                report: JobReport | None = None) -> Path:
        """`translate_document` on this process's threads."""

        def proportional(text: str) -> None:
            if report is not None:
                report.proportional += 1

        def reading(done: int, total: int) -> None:
            """Pages read by OCR: progress counts them until the sentences' count takes over; a stop ends the reading."""
            if should_stop is not None and should_stop():
                raise Cancelled()
            if progress is not None:
                progress(done, total)

        return translate_document(
            job.source_path,
            job.output_path,
            self._document_batches(job, should_stop, progress, report),
            source_script=get_language(job.source).script,
            target_script=get_language(job.target).script,
            progress=progress,
            overwrite=job.overwrite,
            options={**job.document_options, "source": job.source},  # the language OCR reads in scans
            proportional=proportional,
            note=report.notes.append if report is not None else None,
            reading=reading,
        )

    def translate_segments(self, job: DocumentJob, segments: list[Segment],
                           report: JobReport | None = None) -> list[list[Run]]:
        """The translated runs of segments held in memory (the local server's HTML and XML pieces:
        app.documents.html.MarkupFragment), as a document's: all in one engine call, through the
        memory, the cache and the terms. `job` gives languages, options and adapter (its paths are
        not used); `report` as `translate_document`'s."""

        def proportional(text: str) -> None:
            if report is not None:
                report.proportional += 1

        return translate_segments(segments, self._document_batches(job, None, None, report),
                                  get_language(job.source).script, get_language(job.target).script,
                                  proportional=proportional)

    def _document_batches(
        self, job: DocumentJob, should_stop: Callable[[], bool] | None, progress: Callable[[int, int], None] | None,
        report: JobReport | None,
    ) -> DocumentTranslator:
        """`translate_batch(texts)` for `translate_document`: the texts through the translation
        memory, the cache and the engine, in parts, streamed as the document is planned
        (app.session.document_batch)."""
        options = self.options(job.options)
        context = self.context(job.adapter, job.source, job.target, options)
        terms = self.terms_of(job).for_pair(job.source, job.target)
        return DocumentTranslator(self, job, options, context, terms, should_stop, progress, report)

