"""A sentence's terms: the strings its translation must hold verbatim (the engine's `terms=`).

One place for typed text, stdin and documents alike (`Terms.for_pair(...).of(sentence)`):

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

A translation cache keys on the sentence with its terms (`cache_text`): a sentence translated
with a glossary is not reused without it, nor the other way round, and a sentence with no terms
keeps the key it always had.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from dragoman.app.documents.segments import PLACEHOLDER_TAG
from dragoman.app.session.glossary import Glossary, GlossaryError, TermMatcher, read_glossary
from dragoman.app.session.protected_spans import ProtectedTerms, find_protected_spans
from dragoman.app.settings import AppPaths, Settings
from dragoman.engine import get_language

# What a translation must hold: a string verbatim, or a chain of them in order (None: a gap, some words).
Term = str | tuple[str | None, ...]
# The user's own glossary in the glossaries folder: it comes first, so its entries win.
USER_GLOSSARY = "my-glossary.tsv"
GLOSSARY_SUFFIXES = (".csv", ".tsv", ".txt", ".tbx", ".xml")
# Decoder positions a translation always takes besides its terms: `</s>`, the language code, the end.
FIXED_POSITIONS = 3
# What is kept first when a sentence's terms crowd its translation (after its tags).
GLOSSARY, USER, AUTOMATIC = range(3)


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
        if max_positions is not None and not readable_at_once(sentence, max_positions):
            return []
        found: list[tuple[int, int, str]] = []  # (start in the sentence, rank, term)
        glossary = self.matcher.find(sentence)
        found += [(m.start, GLOSSARY, m.entry.target) for m in glossary]
        if self.protect:
            spans = find_protected_spans(sentence, self.protected)
        else:
            spans = self.protected.find(sentence) if self.protected is not None else []
        found += [(s.start, USER if s.kind == "term" else AUTOMATIC, sentence[s.start:s.end]) for s in spans
                  if not any(m.start < s.end and s.start < m.end for m in glossary)]
        tags = tag_chain(sentence) if tagged else ()
        ranks: dict[str, int] = {}
        for _, rank, term in sorted(found):
            if term not in tags:  # kept by the chain, in its place
                ranks[term] = min(rank, ranks.get(term, rank))
        if max_length is not None:
            return fit(ranks, tags, max_length)
        return ([tags] if tags else []) + list(ranks)


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
    for term in sorted(terms, key=ranks.get):  # stable: in order within a rank
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
