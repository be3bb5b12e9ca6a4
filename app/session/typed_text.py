"""Typed text (the window's source pane, the CLI's stdin): each line cut into what the model gets.

A line is cut as a plain-text document's line is (app.documents.text.line_parts): indentation,
list markers, table borders, rulers, lines without letters, URLs and e-mail addresses stay as
written. The rest is split into sentences with the documents' splitter, because NLLB drops
sentences from long multi-sentence inputs; each sentence is translated on its own and the
translations are joined with the target script's convention (a space, or nothing in Chinese and
Japanese). Unsplit, a line is one sentence, as typed.
"""

from __future__ import annotations

from dragoman.app.documents.sentences import sentence_gap, split_sentences
from dragoman.app.documents.text import line_parts


class TypedText:
    """`sentences`: what to translate, in order; `line_of[j]`: the line sentence j belongs to;
    `line(i, translations)` and `lines(translations)` join translations back into lines."""

    def __init__(self, lines: list[str], source_script: str, target_script: str, split: bool = True,
                 whole_lines: bool = False):
        """`split`: each line cut into sentences, else each line one sentence (less what shows no
        letters); `whole_lines`: each line one sentence exactly as given, blank ones too."""
        self.sentences: list[str] = []
        self.line_of: list[int] = []
        self._pieces: list[list[str | int]] = []  # per line: verbatim text, or the index of a sentence
        for number, line in enumerate(lines):
            pieces: list[str | int] = []
            if whole_lines:
                parts = [(line, True)]
            elif split:
                parts = line_parts(line)
            else:
                parts = [(line, any(ch.isalpha() for ch in line))]
            for text, translate in parts:
                if not translate:
                    pieces.append(text)
                    continue
                spans = split_sentences(text, source_script) if split and not whole_lines else [(0, len(text))]
                previous = None
                for start, end in spans:
                    if previous is not None:
                        pieces.append(sentence_gap(text[previous:start], target_script))
                    pieces.append(len(self.sentences))
                    self.sentences.append(text[start:end])
                    self.line_of.append(number)
                    previous = end
            self._pieces.append(pieces)

    def line(self, number: int, translations: list[str | None]) -> str:
        """Line `number` with the translations known so far (None: not yet, left out)."""
        return "".join(piece if isinstance(piece, str) else translations[piece] or "" for piece in self._pieces[number])

    def spans(self, number: int, translations: list[str | None]) -> list[tuple[int, int, int]]:
        """(sentence index, start, end) of each sentence's translation within `line(number, translations)`."""
        found, at = [], 0
        for piece in self._pieces[number]:
            text = piece if isinstance(piece, str) else translations[piece] or ""
            if not isinstance(piece, str):
                found.append((piece, at, at + len(text)))
            at += len(text)
        return found

    def lines(self, translations: list[str | None]) -> list[str]:
        return [self.line(number, translations) for number in range(len(self._pieces))]
