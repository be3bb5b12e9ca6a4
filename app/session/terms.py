"""A sentence's terms: the strings its translation must hold verbatim (the engine's `terms=`).

One place for typed text, stdin, documents and corpora alike (`Terms.for_pair(...).mask(sentence, marks)`,
which app.session.session calls for every sentence it sends):

- the target terms of the glossary entries whose source terms occur in the sentence
  (app.session.glossary.TermMatcher), from the enabled glossaries for the language pair;
- do-not-translate spans as the sentence writes them (app.session.protected_spans): the user's list and,
  unless `protect` is off, URLs, e-mail addresses, placeholders and numbers with units;
- in a document sentence, its placeholder tags (`<x1>`, `</x1>`, `<x2/>`: app.documents.segments)
  as one chain (a tuple: the engine keeps them in this order, anything between them, and some
  words inside each pair around words: a None there), so that its formatting comes back where
  the model puts the words.

Where a glossary match and a do-not-translate span overlap, the glossary wins: it says how to
translate those words. Terms that might not fit within the decoder's length are left out (the
automatic spans first, then the user's, then glossary terms; a sentence's tags, all or none,
last), so that one crowded sentence never fails a document (`fit`); so is every term of a text
that might be too long for the model to read at once (the engine cuts such a text in pieces, and
a term cannot be kept across them: `readable_at_once`).

Do-not-translate spans never go to the model as they are written: a vocabulary that cannot
spell a character of one (`/` in `http://www.perl.org/`) would lose it. Each becomes a numbered
mark (`<v1/>`, or `(1)` where the vocabulary spells no `<`: `Marks`, the first of `MARK_FORMS`
the engine spells) that the translation must hold, and `Masked.restore` puts the span's bytes
back in its place. A sentence with nothing to translate once its spans and tags are set aside
(a URL, a number) never reaches the model (`Masked.verbatim`): it is its own translation.

A translation cache keys on the sentence as the model reads it (marks and all) with its terms
(`cache_text`), and keeps what the model wrote, marks and all: a sentence translated
with a glossary is not reused without it, nor the other way round, and a sentence with no terms
keeps the key it always had.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from dragoman.app.documents.segments import PLACEHOLDER_TAG
from dragoman.app.documents.sentences import is_translatable
from dragoman.app.session.glossary import Glossary, GlossaryError, TermMatcher, read_glossary
from dragoman.app.session.protected_spans import ProtectedSpan, ProtectedTerms, find_protected_spans
from dragoman.app.settings import AppPaths, Settings
from dragoman.engine import get_language

if TYPE_CHECKING:
    from dragoman.engine import Translation

# What a translation must hold: a string verbatim, or a chain of them in order (None: a gap, some words).
Term = str | tuple[str | None, ...]
# The user's own glossary in the glossaries folder: it comes first, so its entries win.
USER_GLOSSARY = "my-glossary.tsv"
GLOSSARY_SUFFIXES = (".csv", ".tsv", ".txt", ".tbx", ".xml")
# Decoder positions a translation always takes besides its terms: `</s>`, the language code, the end.
FIXED_POSITIONS = 3
# What is kept first when a sentence's terms crowd its translation (after its tags).
GLOSSARY, USER, AUTOMATIC = range(3)
# How a verbatim span is marked in what the model reads, the first form the vocabulary spells.
MARK_FORMS = ("<v{}/>", "({})")


@dataclass(frozen=True)
class GlossaryPair:
    """One language pair of a glossary file, as the Glossary dialog enables it (None: any language)."""

    name: str  # the file's name
    source_lang: str | None
    target_lang: str | None

    def label(self) -> str:
        """"English → French", "any → any"."""
        source, target = (get_language(code).name if code else "any" for code in (self.source_lang, self.target_lang))
        return f"{source} → {target}"


def glossary_pairs(glossary: Glossary) -> dict[GlossaryPair, int]:
    """The language pairs of a glossary's entries, with the number of entries of each, in file order."""
    pairs: dict[GlossaryPair, int] = {}
    for entry in glossary.entries:
        pair = GlossaryPair(glossary.path.name, entry.source_lang, entry.target_lang)
        pairs[pair] = pairs.get(pair, 0) + 1
    return pairs


@dataclass(frozen=True)
class Terms:
    """The glossaries and do-not-translate settings that a translation keeps to."""

    glossaries: tuple[Glossary, ...] = ()
    disabled: frozenset[GlossaryPair] = frozenset()  # pairs of those glossaries turned off
    do_not_translate: tuple[str, ...] = ()
    protect: bool = True  # URLs, e-mail addresses, placeholders, numbers with units

    def for_pair(self, src_lang: str, tgt_lang: str) -> PairTerms:
        entries = (e for g in self.glossaries for e in g.entries if e.applies_to(src_lang, tgt_lang)
                   and GlossaryPair(g.path.name, e.source_lang, e.target_lang) not in self.disabled)
        protected = ProtectedTerms(self.do_not_translate) if self.do_not_translate else None
        return PairTerms(TermMatcher(entries), protected, self.protect)


def glossary_files(folder: Path) -> list[Path]:
    """The glossary files of the glossaries folder: the user's own first, then by name."""
    if not folder.is_dir():
        return []
    files = sorted(f for f in folder.iterdir() if f.is_file() and f.suffix.lower() in GLOSSARY_SUFFIXES
                   and not f.name.startswith("."))
    return sorted(files, key=lambda f: f.name != USER_GLOSSARY)


def read_glossaries(folder: Path) -> tuple[list[Glossary], list[str]]:
    """The glossaries of the folder, and one line for each file that cannot be used (GlossaryError)."""
    glossaries, problems = [], []
    for file in glossary_files(folder):
        try:
            glossaries.append(read_glossary(file))
        except GlossaryError as e:
            problems.append(str(e))
    return glossaries, problems


def saved_terms(paths: AppPaths, settings: Settings) -> Terms:
    """The Terms the window's settings say, with the glossaries folder's glossaries (unreadable ones left out)."""
    glossaries, _ = read_glossaries(paths.glossaries_dir)
    disabled = frozenset(GlossaryPair(name, src or None, tgt or None) for name, src, tgt in settings.glossary_pairs_off)
    return Terms(tuple(glossaries), disabled, tuple(settings.do_not_translate), settings.protect)


class PairTerms:
    """A sentence's terms for one language pair."""

    def __init__(self, matcher: TermMatcher, protected: ProtectedTerms | None, protect: bool):
        self.matcher = matcher
        self.protected = protected
        self.protect = protect

    def of(self, sentence: str, tagged: bool = False, max_length: int | None = None,
           max_positions: int | None = None) -> list[Term]:
        """The terms of `sentence`, each once, in the order of the source; with `tagged` (a
        document sentence) first its placeholder tags, as one chain in the source's order (a
        tuple; none for a sentence without tags); within `max_length` decoder positions
        where given (`fit`); none for a sentence that a model of `max_positions` source
        positions might not read at once (`readable_at_once`)."""
        return self.mask(sentence, None, tagged, max_length, max_positions).terms

    def mask(self, sentence: str, marks: Marks | None, tagged: bool = False, max_length: int | None = None,
             max_positions: int | None = None) -> Masked:
        """`sentence` as the model reads it, its do-not-translate spans replaced by `marks` (None: kept
        as written, each a term), with its terms as `of` says."""
        if max_positions is not None and not readable_at_once(sentence, max_positions):
            return Masked(sentence, [])
        glossary = self.matcher.find(sentence)
        if self.protect:
            spans = find_protected_spans(sentence, self.protected)
        else:
            spans = self.protected.find(sentence) if self.protected is not None else []
        spans = [s for s in spans if not any(m.start < s.end and s.start < m.end for m in glossary)]
        masked = marks.apply(sentence, spans) if marks is not None else Masked(sentence, [])
        found: list[tuple[int, int, str]] = []  # (start in the sentence, rank, term)
        found += [(m.start, GLOSSARY, m.entry.target) for m in glossary]
        found += [(s.start, USER if s.kind == "term" else AUTOMATIC, masked.mark_of.get(s, sentence[s.start:s.end]))
                  for s in spans]
        tags = tag_chain(sentence) if tagged else ()
        ranks: dict[str, int] = {}
        for _, rank, term in sorted(found):
            if term not in tags:  # kept by the chain, in its place
                ranks[term] = min(rank, ranks.get(term, rank))
        terms = fit(ranks, tags, max_length) if max_length is not None else ([tags] if tags else []) + list(ranks)
        return masked.keeping(terms)


class Marks:
    """How verbatim spans are marked for one model: numbered marks in a form its vocabulary spells."""

    def __init__(self, form: str):
        self.form = form

    @classmethod
    def for_translator(cls, translator) -> Marks | None:
        """The first of MARK_FORMS the translator's vocabulary spells with every digit; None if none is."""
        return next((cls(form) for form in MARK_FORMS
                     if translator.spells(form.format(1)) and translator.spells(form.format(1234567890))), None)

    def apply(self, sentence: str, spans: list[ProtectedSpan]) -> Masked:
        """`sentence` with each span a mark that it does not otherwise hold."""
        parts, mark_of, originals, position, number = [], {}, {}, 0, 0
        for span in spans:
            number += 1
            while self.form.format(number) in sentence:
                number += 1
            mark = self.form.format(number)
            parts += [sentence[position : span.start], mark]
            mark_of[span] = mark
            spaced = (span.start > 0 and sentence[span.start - 1].isspace(),
                      span.end < len(sentence) and sentence[span.end].isspace())
            originals[mark] = Verbatim(sentence[span.start : span.end], *spaced)
            position = span.end
        return Masked("".join(parts) + sentence[position:], [], originals, mark_of)


@dataclass(frozen=True)
class Verbatim:
    """A span's bytes, and whether the source had a space before and after it."""

    text: str
    space_before: bool
    space_after: bool


@dataclass(frozen=True)
class Masked:
    """A sentence as the model reads it: `text`, each verbatim span a mark (`originals`: mark -> the
    span) that its `terms` hold."""

    text: str
    terms: list[Term]
    originals: dict[str, Verbatim] = field(default_factory=dict)
    mark_of: dict[ProtectedSpan, str] = field(default_factory=dict)

    @property
    def verbatim(self) -> bool:
        """Nothing to translate: no letter outside its marks and placeholder tags."""
        text = PLACEHOLDER_TAG.sub("", self.text)
        for mark in self.originals:
            text = text.replace(mark, " ")
        return not is_translatable(text)

    def keeping(self, terms: list[Term]) -> Masked:
        """These terms; the spans whose marks they left out (no room) are written back as they were."""
        text, originals = self.text, dict(self.originals)
        for mark, span in self.originals.items():
            if mark not in terms:
                text = text.replace(mark, span.text, 1)
                del originals[mark]
        return Masked(text, terms, originals, {s: m for s, m in self.mark_of.items() if m in originals})

    def restore(self, translation: str, partial: bool = False) -> str:
        """The translation with each span's bytes where its mark is (a mark written twice: once;
        one missing, at the end, unless the translation is `partial`)."""
        for mark, span in self.originals.items():
            at = translation.find(mark)
            if at < 0:
                if not partial:
                    translation = translation.rstrip() + " " + span.text
                continue
            before, after = translation[:at], translation[at + len(mark) :].replace(mark, "")
            if span.space_before and before[-1:].isalnum():
                before += " "
            if span.space_after and after[:1].isalnum():
                after = " " + after
            translation = before + span.text + after
        return translation

    def restored(self, translation: Translation) -> Translation:
        """The engine's translation of `text` with the spans' bytes back, in its alternatives too."""
        return replace(translation, text=self.restore(translation.text),
                       alternatives=[self.restored(a) for a in translation.alternatives])

    def marking(self, start: str) -> str:
        """A start of the translation a person typed, as the model reads it: the spans it holds as marks."""
        for mark, span in self.originals.items():
            start = start.replace(span.text, mark)
        return start


def tag_chain(sentence: str) -> tuple[str | None, ...]:
    """A sentence's placeholder tags in order, a gap (None) inside each pair around words: the
    engine keeps them so, and a pair must hold some of the translation's words."""
    chain: list[str | None] = []
    opened = None  # where the words of an open pair start
    for m in PLACEHOLDER_TAG.finditer(sentence):
        tag = m.group()
        if opened is not None and tag.startswith("</") and sentence[opened : m.start()].strip():
            chain.append(None)
        chain.append(tag)
        opened = m.end() if not tag.startswith("</") and not tag.endswith("/>") else None
    return tuple(chain)


def token_bound(term: str) -> int:
    """At most how many tokens a term takes: a sentencepiece piece covers at least one character,
    and a word's leading `▁` may be a piece of its own."""
    return len(term) + len(term.split())


def fit(ranks: dict[str, int], tags: tuple[str | None, ...], max_length: int) -> list[Term]:
    """The chain of a sentence's tags, then the terms (in order, each with its rank), less those
    left out so that the rest surely fit within `max_length` decoder positions: the tags first,
    all or none (with one missing, its formatting is placed proportionally whatever the others
    do), then the terms by rank, then in order, as far as room goes."""
    room = max_length - FIXED_POSITIONS
    chain: list[Term] = []
    bound = sum(token_bound(t) if t else 1 for t in tags)  # a gap takes a token at least
    if tags and bound <= room:
        chain.append(tags)
        room -= bound
    terms = list(ranks)
    kept: set[str] = set()
    for term in sorted(terms, key=ranks.__getitem__):  # stable: in order within a rank
        if token_bound(term) <= room:
            kept.add(term)
            room -= token_bound(term)
    return chain + [t for t in terms if t in kept]


def readable_at_once(text: str, max_positions: int) -> bool:
    """Whether `text` surely fits in the model's source positions with its language code and `</s>`
    (`token_bound`, as for terms)."""
    return token_bound(text) + 2 <= max_positions


def cache_text(text: str, terms: list[Term]) -> str:
    """What a translation cache keys on for `text` translated with `terms`: the text itself when
    there are none, else the text and its terms."""
    return text if not terms else f"{text}\x00terms\x00{json.dumps(terms, ensure_ascii=False)}"

