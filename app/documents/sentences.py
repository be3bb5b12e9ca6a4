"""Sentence splitting and joining for every NLLB script.

Rules, not QTextBoundaryFinder: Qt's finder splits after "Dr." and finds nothing in Thai.

- Scripts with sentence punctuation end a sentence at `.!?…` (Latin, Cyrillic, Greek, Armenian
  `։`, Arabic `؟ ۔`, Hebrew…), at the danda `। ॥` (Devanagari, Bengali, Gurmukhi, Oriya…), the
  Ethiopic `። ፧`, the Myanmar `။`, the Khmer `។`, the Tibetan shad `།`, when whitespace follows
  (closing quotes and brackets stay with the sentence). In cased scripts the next sentence must not
  start with a lower-case letter, and a known abbreviation ("Dr.", "e.g.") or a single initial
  ("J.") does not end one.
- Chinese and Japanese end at `。！？` (and their full-width forms) with no space after.
- Thai and Lao have no sentence punctuation: a space separates sentences (and some phrases), so
  the text is cut at spaces into pieces of about `THAI_PIECE` characters.
- Whatever the script, a sentence longer than `MAX_SENTENCE_CHARS` is cut at a clause mark
  (`;:,` and their CJK forms), else at a space, else at the limit: the model never sees a
  sentence it would truncate.

Sentences are joined back with the target script's convention: no space in Chinese, Japanese and
Myanmar; otherwise the original gap where there was one, else a space. Thai, Lao, Khmer and
Tibetan write words without spaces but separate sentences with one, so they keep it.
"""

from __future__ import annotations

import re
import unicodedata


MAX_SENTENCE_CHARS = 400  # ~100-150 tokens: well inside what NLLB was trained on
THAI_PIECE = 120
JOINED_SENTENCE_SCRIPTS = frozenset({"Hans", "Hant", "Hani", "Jpan", "Mymr"})  # nothing between sentences either
UNPUNCTUATED_SCRIPTS = frozenset({"Thai", "Laoo"})
CASED_SCRIPTS = frozenset({"Latn", "Cyrl", "Grek", "Armn", "Geor"})

_TERMINATORS = ".!?…։؟۔।॥።፧။។།"
_CJK_TERMINATORS = "。！？．｡"
_CLOSERS = "\"'”’»)]}」』）】〉》"
# sentence end, its closers, then (outside CJK) the whitespace that must follow
_END = re.compile(rf"[{re.escape(_TERMINATORS)}]+[{re.escape(_CLOSERS)}]*(?=\s)|[{_CJK_TERMINATORS}]+[{re.escape(_CLOSERS)}]*")
_NEXT_LETTER = re.compile(r"\s*(\S)")
_CLAUSE = re.compile(r"[;:,،؛、，；：](?=\s)|[、，；：]")
_ABBREVIATIONS = frozenset(
    """mr mrs ms dr prof sr jr st mt vs etc inc ltd co corp no nos fig figs vol vols pp p ch cf e.g i.e
    al approx dept est gen gov col lt sgt capt rev hon jan feb mar apr jun jul aug sep sept oct nov dec
    mon tue wed thu fri sat sun ca op ed eds z.b bzw usw d.h s sog vgl nr mme mlle m art av bd""".split()
)


def is_translatable(text: str) -> bool:
    """Text worth sending to the model: it has at least one letter (numbers and symbols stay)."""
    return any(ch.isalpha() for ch in text)


def _cuts_for_punctuation(text: str, script: str) -> list[int]:
    cuts = []
    for m in _END.finditer(text):
        end = m.end()
        if text[m.start()] in _CJK_TERMINATORS:
            cuts.append(end)
            continue
        if m.group()[0] == "." and script in CASED_SCRIPTS:
            word_start = m.start()  # scanned back and forth locally: a long paragraph stays linear
            while word_start > 0 and not text[word_start - 1].isspace():
                word_start -= 1
            prev = text[word_start : m.start()].casefold().lstrip("(\"'“‘«")
            if prev in _ABBREVIATIONS or (len(prev) == 1 and prev.isalpha()):
                continue
            following = _NEXT_LETTER.match(text, end)
            if following and following.group(1).islower():
                continue
        cuts.append(end)
    return cuts


def _cuts_for_spaces(text: str, target: int) -> list[int]:
    cuts, start = [], 0
    for m in re.finditer(r"\s+", text):
        if m.start() - start >= target:
            cuts.append(m.start())
            start = m.end()
    return cuts


def _split_long(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Cut text[start:end] into pieces of at most MAX_SENTENCE_CHARS, at clause marks, then spaces."""
    pieces = []
    while end - start > MAX_SENTENCE_CHARS:
        window = text[start : start + MAX_SENTENCE_CHARS]
        cut = 0
        for pattern in (_CLAUSE, re.compile(r"\s+")):
            found = [m.end() if pattern is _CLAUSE else m.start() for m in pattern.finditer(window)]
            found = [c for c in found if c >= MAX_SENTENCE_CHARS // 4]
            if found:
                cut = found[-1]
                break
        cut = cut or MAX_SENTENCE_CHARS
        piece_end = start + cut
        pieces.append((start, piece_end))
        start = piece_end
        while start < end and text[start].isspace():
            start += 1
    if start < end:
        pieces.append((start, end))
    return pieces


def split_sentences(text: str, script: str) -> list[tuple[int, int]]:
    """The sentences of `text` as (start, end) offsets, whitespace between them left out."""
    if script in UNPUNCTUATED_SCRIPTS:
        cuts = _cuts_for_spaces(text, THAI_PIECE)
    else:
        cuts = _cuts_for_punctuation(text, script)
    spans = []
    start = 0
    for cut in cuts + [len(text)]:
        s, e = start, cut
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if s < e:
            spans.extend(_split_long(text, s, e))
        start = cut
    return spans


def sentence_gap(original_gap: str, target_script: str) -> str:
    """What goes between two translated sentences, given what was between the source sentences."""
    if target_script in JOINED_SENTENCE_SCRIPTS:
        return "\n" if "\n" in original_gap else ""
    return original_gap or " "


# A character of a script written without spaces (Han, kana, Thai, Lao, Tibetan, Myanmar, Khmer,
# full-width forms): a line may break, or two lines join, between two of them with no space.
UNSPACED_CHARACTER = re.compile(
    "[\u0e00-\u0eff\u0f00-\u0fff\u1000-\u109f\u1780-\u17ff\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]"
)


def is_rtl(text: str) -> bool:
    """The text's first strong character is right to left (Arabic, Hebrew...)."""
    for ch in text:
        kind = unicodedata.bidirectional(ch)
        if kind in ("R", "AL"):
            return True
        if kind == "L":
            return False
    return False
