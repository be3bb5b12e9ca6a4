"""Doubts about a translation: signs that the model probably failed, each said as a reason.

They are read from the two texts, so they apply to every translation whatever made it (the engine,
the cache, the translation memory), and, where the engine gave one, from its score:

- a loop: the same word, or run of up to four words (characters, in scripts written without
  spaces), three times or more in a row where the source has no such run;
- a length out of range: the translation far shorter or longer than the source, once each side's
  letters are scaled by how many its script spends on the same content;
- a copy: the source given back unchanged;
- another language than asked: the offline language detector is sure the translation is in
  another language (and knows the language asked for);
- a low score: the model was unsure of its own words (engine.Translation's score, a log-probability
  per token, below LOW_SCORE).

- nothing: a source with letters given back as an empty translation.

Short sources are judged for loops and emptiness only: a name, a number or a two-word heading may
rightly come back shorter, longer, or unchanged, but never as nothing or as one word sixty times.
The letters of URLs, addresses and placeholders (app.session.protected_spans), which stay as they
are, do not count. Every check is linear in the text.
"""

from __future__ import annotations

import functools
import queue
import threading
import time
import unicodedata

from dragoman.app.session import detect
from dragoman.app.session.protected_spans import ProtectedSpan, find_protected_spans
from dragoman.engine import NO_SPACE_SCRIPTS, get_language

MIN_LETTERS = 12  # below this, in the source, only loops and emptiness are judged
MAX_NGRAM = 4
LOOP_REPEATS = 3
MIN_RATIO, MAX_RATIO = 1 / 3, 3.0  # scaled translation letters / scaled source letters
SURE_SCORE = 0.8  # the detector's probability above which "another language" is said
MIN_DETECT_LETTERS = 20
# A mean log-probability per token of -1.5 is a geometric mean of e^-1.5 = 0.22 for the probability
# the model gave each token it chose: it spread most of its belief over other words at every step,
# which is guessing, not translating (a sentence it knows puts most of it on each token, a mean
# closer to 0). Beam search's score divides by length**length_penalty: per token at NLLB's 1.0.
LOW_SCORE = -1.5
# Letters a script spends on what English says in 100 (FLORES-200 devtest, character counts, rounded).
LETTERS_PER_100_LATIN = {
    "Hans": 30, "Hant": 30, "Jpan": 40, "Kore": 40, "Hang": 40, "Ethi": 65, "Hebr": 80, "Arab": 85,
    "Thai": 95, "Khmr": 110, "Mymr": 120, "Tibt": 110,
}


@functools.cache
def _deletions(kept: str) -> dict[int, None]:
    """`str.translate`'s table that deletes the characters of the Basic Multilingual Plane whose
    category starts with none of the letters in `kept` (one pass at C speed instead of a call a character)."""
    return {cp: None for cp in range(0x10000) if unicodedata.category(chr(cp))[0] not in kept}


def only(text: str, kept: str) -> str:
    """`text`'s characters whose Unicode category starts with one of the letters in `kept`."""
    if max(text, default="") <= "\uffff":
        return text.translate(_deletions(kept))
    return "".join(ch for ch in text if unicodedata.category(ch)[0] in kept)


def letters(text: str) -> int:
    return len(only(text, "LM"))


def outside_verbatim_spans(text: str) -> str:
    spans = find_protected_spans(text)
    return "".join(text[a.end : b.start] for a, b in zip([ProtectedSpan(0, 0, "")] + spans,
                                                          spans + [ProtectedSpan(len(text), len(text), "")]))


def units(text: str, script: str) -> list[str]:
    """Words without their punctuation, or letters in scripts written without spaces, case folded."""
    if script in NO_SPACE_SCRIPTS:
        return list(only(text.casefold(), "LMN"))
    words = (only(word, "LMN") for word in text.casefold().split())
    return [word for word in words if word]


def longest_loop(items: list[str]) -> int:
    """The most times a run of 1 to MAX_NGRAM items repeats back to back."""
    best = 1
    for n in range(1, MAX_NGRAM + 1):
        repeats = [1] * (len(items) + n)  # repeats[i]: copies of items[i:i+n] back to back from i
        for i in range(len(items) - 2 * n, -1, -1):
            if items[i : i + n] == items[i + n : i + 2 * n]:
                repeats[i] = repeats[i + n] + 1
                best = max(best, repeats[i])
    return best


def doubts(source: str, translation: str, source_lang: str, target_lang: str, score: float | None = None) -> list[str]:
    """The reasons to doubt `translation` of `source`, in words for the user; [] when none.
    `score`: the engine's score of it (None: not known, as for a translation from the cache)."""
    judged = letters(outside_verbatim_spans(source))
    if not judged:
        return []
    if not translation.strip():
        return ["nothing came out"]
    source_script, target_script = get_language(source_lang).script, get_language(target_lang).script
    reasons = []
    loop = longest_loop(units(translation, target_script))
    if loop >= LOOP_REPEATS and longest_loop(units(source, source_script)) < LOOP_REPEATS:
        reasons.append(f"the same words {loop} times in a row")
    if judged < MIN_LETTERS:
        return reasons
    scaled_source = letters(source) * 100 / LETTERS_PER_100_LATIN.get(source_script, 100)
    ratio = letters(translation) * 100 / LETTERS_PER_100_LATIN.get(target_script, 100) / scaled_source
    if ratio < MIN_RATIO:
        reasons.append("much shorter than the source")
    elif ratio > MAX_RATIO:
        reasons.append("much longer than the source")
    if source_lang != target_lang and " ".join(source.split()) == " ".join(translation.split()):
        reasons.append("the source, not translated")
    elif (found := detected_language(translation)) and found[:3] != target_lang[:3]:
        reasons.append(f"looks like {get_language(found).name}, not {get_language(target_lang).name}")
    if score is not None and score < LOW_SCORE:
        reasons.append(f"the model was unsure of it (score {score:.2f})")
    return reasons


def detected_language(text: str) -> str | None:
    """The FLORES code of `text`'s language when the detector is sure of it, else None."""
    if letters(text) < MIN_DETECT_LETTERS or not detect.available():
        return None
    best = detect.best_guess(text)
    return best[0] if best and best[1] >= SURE_SCORE else None


class DoubtsAlongside:
    """The doubts (`doubts`) of translations as they come, judged on a thread of its
    own while the engine's thread waits on the device; `close` waits for them.

    The thread lets go of the interpreter after each sentence: the engine's thread, back from
    waiting on the device, would otherwise wait up to the switch interval for it at every step
    (0.5 ms as the engine's loop sets it, of a step's few; bench.doubts_alongside)."""

    def __init__(self, source: str, target: str):
        self.source, self.target = source, target
        self._waiting: queue.SimpleQueue[tuple[str, str, float | None] | None] = queue.SimpleQueue()
        self._judged: dict[str, list[str]] = {}
        self._thread = threading.Thread(target=self._run, name="dragoman-doubts", daemon=True)
        self._thread.start()

    def add(self, sentence: str, translation: str, score: float | None) -> None:
        self._waiting.put((sentence, translation, score))

    def close(self) -> dict[str, list[str]]:
        """Each sentence added and its reasons; one whose judging failed is not there (the caller judges it)."""
        self._waiting.put(None)
        self._thread.join()
        return self._judged

    def _run(self) -> None:
        while (item := self._waiting.get()) is not None:
            sentence, translation, score = item
            try:
                self._judged[sentence] = doubts(sentence, translation, self.source, self.target, score)
            except Exception:  # judged again where the report is made, where an error is the caller's
                pass
            time.sleep(0)  # the interpreter to a thread waiting for it (the engine's)
