"""Completing a translation from its start as a person typed it (`CompletionStart`)."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from dragoman.engine.decoding import DecodingOptions, OptionsError
from dragoman.engine.tokenizer import NllbTokenizer


@dataclass
class CompletionStart:
    """How a sentence is completed from the start of its translation that a person typed.

    A start that ends within a word ("Bonjo") or after a space is first forced without its last
    partial word and the space (`attempts[0]`), so that the model writes the word in its own pieces
    ("▁Bonjour", not "▁Bon" "jo" + "ur"); that completion is kept when its text goes on from what
    was typed. Otherwise the start is forced whole, in the pieces of the typed text (`attempts[-1]`).
    Either way the search is `generate` with `decoder_input_ids` = `</s>`, the language code, the attempt."""

    typed: str
    shown: str  # the typed text as the tokens give it back (normalized, without a leading space)
    attempts: list[list[int]]  # forced target tokens, the last one the whole typed start

    def goes_on(self, text: str) -> bool:
        """Whether `text`, a decoded hypothesis, goes on from the typed start."""
        return text.startswith(self.shown)

    def as_typed(self, text: str) -> str:
        """`text`, which goes on from the typed start, with that start exactly as typed."""
        return self.typed + text[len(self.shown):]


def completion_start(tokenizer: NllbTokenizer, typed: str, options: DecodingOptions) -> CompletionStart:
    """How a translation is completed from `typed`, its start (`CompletionStart`); a start
    that leaves no token to generate within max_length raises OptionsError."""
    tok = tokenizer
    whole = tok.encode_target_start(typed)
    room = options.length - 2  # after `</s>` and the language code
    if len(whole) >= room:
        raise OptionsError("start", f"of {len(whole)} tokens leaves nothing to complete within max_length "
                                    f"{options.length} (the start may have {room - 1} tokens at most)")
    head = typed.rstrip()
    if head == typed and _ends_in_a_word(typed):
        while _ends_in_a_word(head):
            head = head[:-1]
        head = head.rstrip()
    first = tok.encode_target_start(head) if head.strip() else []
    attempts = [whole] if head == typed or first == whole else [first, whole]
    return CompletionStart(typed, tok.decode(whole), attempts)


def _ends_in_a_word(text: str) -> bool:
    return bool(text) and unicodedata.category(text[-1])[0] in "LMN"
