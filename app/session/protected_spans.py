"""Do-not-translate: the spans of a sentence that must come back verbatim, with their offsets.

Always protected (`find_protected_spans`):

- URLs: `http://`, `https://`, `ftp://`, `file://`, `mailto:` and `www.` up to a space, a quote
  or angle bracket, or a character of a script written without spaces; trailing sentence
  punctuation (`.,;:!?`, quotes) and closing brackets that open nowhere in the URL are not part of it.
- E-mail addresses: `local@domain.tld`, the local part at most 64 characters, the domain dotted,
  in letters of scripts written with spaces (so that an address ends where Chinese text resumes).
- Placeholders: `{name}`, `{0}`, `{}`, `{0:.2f}`, `${name}`, `{{ name }}`; printf's `%s`, `%d`, `%1$s`,
  `%(name)s`, `%-5.2f`, `%%`; Qt's `%1`; `$1`. A bare `%x` needs a non-letter after it (`%age`
  is a word), and `50% of` is a number with its unit, not a placeholder (`% o` is not printf here).
- Numbers with units as written: `5 kg`, `3,5 GHz`, `−4 °C`, `50%`, `10 km/h`, `1 000 m` (groups
  of three after a space, a no-break or a thin space), `$5.99`, `20 €`.

Plus, when given, a user's list of terms (`ProtectedTerms`), matched as glossary terms are: whole
words ignoring case, any position in scripts without spaces. Where spans overlap the leftmost
wins, then the longest.

Each scanner starts only where its first character can start a span and looks ahead a bounded
number of characters (`MAX_URL_CHARS` for URLs, a few dozen otherwise), and the scan goes on after
each span it finds: a sentence costs time linear in its length. The only regular expressions
are character classes, which find where a span may start.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass
from typing import Callable, Iterable

from dragoman.app.documents.sentences import UNSPACED_CHARACTER
from dragoman.app.session.glossary import MAX_TERM_CHARS, Entry, TermMatcher

MAX_URL_CHARS = 2048
MAX_PLACEHOLDER_CHARS = 64
MAX_NUMBER_CHARS = 40
MAX_LOCAL_PART = 64  # RFC 5321
MAX_DOMAIN = 253
MAX_TERMS = 10_000

URL_PREFIXES = ("https://", "http://", "ftp://", "file://", "mailto:", "www.")
_URL_STOP = set("<>\"`{}|\\^") | {"\u201c", "\u201d", "\u00ab", "\u00bb"}
_TRAILING = set(".,;:!?'\"*_") | {"\u2019", "\u201d"}
_CLOSERS = {")": "(", "]": "[", "}": "{"}
_LOCAL = set("._%+-")
_PRINTF_FLAGS = set("-+#0'")
_PRINTF_LENGTHS = ("hh", "ll", "h", "l", "L", "q", "j", "z", "t")
_PRINTF_CONVERSIONS = set("diouxXeEfFgGaAcspn@")
CURRENCY_SYMBOLS = set("$€£¥₹₽₩₺₴₦₱฿₫")
_NUMBER_SEPARATORS = set(".,\u00a0\u202f\u2009")
_UNIT_SPACES = set(" \u00a0\u202f\u2009")
_MINUS = set("-+\u2212")
# Units as written after a number. Left out: words that follow numbers in prose ("5 in", "5 A").
UNITS = frozenset("""
    % ‰ ° °C °F K
    nm µm μm mm cm dm m km mi ft yd
    mg g kg t lb lbs oz
    ml mL cl dl l L m² m³ cm² cm³ km² ha
    ns µs ms s min h hr hrs
    KB kB MB GB TB PB KiB MiB GiB TiB bit bits kbit Mbit Gbit bps kbps Mbps Gbps
    Hz kHz MHz GHz
    W kW MW GW Wh kWh MWh mAh Ah V mV kV mA Ω kΩ J kJ cal kcal Pa kPa hPa MPa bar psi dB
    km/h m/s mph rpm fps px pt em rem dpi ppi
    € £ ¥ ₹ ₽ ₩ ₺ ₴ ₦ ₱ ฿ ₫ $ USD EUR GBP JPY CHF CNY
""".split())
MAX_UNIT_CHARS = max(map(len, UNITS))


@dataclass(frozen=True)
class ProtectedSpan:
    start: int
    end: int
    kind: str  # "term", "url", "email", "placeholder" or "number"


class ProtectedTerms:
    """A user's do-not-translate list: each term is kept as the sentence writes it."""

    def __init__(self, terms: Iterable[str]):
        terms = list(terms)
        if len(terms) > MAX_TERMS:
            raise ValueError(f"the do-not-translate list holds more than {MAX_TERMS:,} terms")
        entries = []
        for number, term in enumerate(terms, 1):
            folded = " ".join(unicodedata.normalize("NFC", term).split()) if isinstance(term, str) else ""
            if not folded:
                raise ValueError(f"do-not-translate term #{number} is empty")
            if len(folded) > MAX_TERM_CHARS:
                raise ValueError(f"do-not-translate term #{number} is longer than {MAX_TERM_CHARS} characters")
            entries.append(Entry(folded, folded, None, None, number))
        self.matcher = TermMatcher(entries)

    def find(self, sentence: str) -> list[ProtectedSpan]:
        return [ProtectedSpan(m.start, m.end, "term") for m in self.matcher.find(sentence)]


def find_protected_spans(text: str, terms: ProtectedTerms | None = None) -> list[ProtectedSpan]:
    """The spans of `text` to keep verbatim, in order, none overlapping."""
    found: list[ProtectedSpan] = terms.find(text) if terms is not None else []
    # Only the scanners whose spans the text has the characters for, each only where its span may
    # start: the text is searched for those characters, not walked in Python character by character.
    scanners = [scanner for scanner in _SCANNERS if scanner.needs(text)]
    if scanners:
        starts = _starts_of(frozenset(scanner.starts.pattern for scanner in scanners))
        i = 0
        while (candidate := starts.search(text, i)) is not None:
            i = candidate.start()
            best = None
            for scanner in scanners:
                if not scanner.starts.match(text, i):
                    continue
                end = scanner.scan(text, i)
                if end is not None and (best is None or end > best.end):
                    best = ProtectedSpan(i, end, scanner.kind)
            if best is None:
                i += 1
            else:
                found.append(best)
                i = best.end
    found.sort(key=lambda s: (s.start, -s.end))
    spans: list[ProtectedSpan] = []
    for span in found:
        if not spans or span.start >= spans[-1].end:
            spans.append(span)
    return spans


def _word(c: str) -> bool:
    return c.isalnum() or c == "_" or unicodedata.category(c).startswith("M")


def _after_boundary(text: str, i: int) -> bool:
    """Whether a span may start at i: not inside a word (a word of a script without spaces ends anywhere)."""
    return i == 0 or not _word(text[i - 1]) or bool(UNSPACED_CHARACTER.match(text[i - 1]))


def _before_boundary(text: str, i: int) -> bool:
    return i >= len(text) or not _word(text[i]) or bool(UNSPACED_CHARACTER.match(text[i]))


def _url(text: str, i: int) -> int | None:
    if not _after_boundary(text, i) or (i and text[i - 1] in "@/.:"):
        return None
    head = text[i : i + 8].lower()
    prefix = next((p for p in URL_PREFIXES if head.startswith(p)), None)
    if prefix is None:
        return None
    j, limit = i + len(prefix), min(len(text), i + MAX_URL_CHARS)
    while j < limit and not text[j].isspace() and text[j] not in _URL_STOP and not UNSPACED_CHARACTER.match(text[j]) \
            and unicodedata.category(text[j])[0] != "C":
        j += 1
    # Trailing punctuation belongs to the sentence; a closer belongs to the URL only if it opens there.
    while j > i + len(prefix):
        last = text[j - 1]
        if last in _TRAILING:
            j -= 1
        elif last in _CLOSERS and text.count(_CLOSERS[last], i, j) < text.count(last, i, j):
            j -= 1
        else:
            break
    body = text[i + len(prefix) : j]
    if not body or (prefix == "www." and "." not in body.strip(".")):
        return None
    if prefix == "mailto:" and "@" not in body:
        return None
    return j


def _address_letter(c: str) -> bool:
    """A letter or digit of an address: not one of a script without spaces, which the sentence goes on in."""
    return _word(c) and not UNSPACED_CHARACTER.match(c)


def _email(text: str, i: int) -> int | None:
    if not _after_boundary(text, i) or (i and (text[i - 1] in _LOCAL | {"@"} or _address_letter(text[i - 1]))) \
            or not (_address_letter(text[i]) or text[i] in "%+-"):
        return None
    j = i
    while j < len(text) and j - i <= MAX_LOCAL_PART and (_address_letter(text[j]) or text[j] in _LOCAL):
        j += 1
    if j >= len(text) or text[j] != "@" or j - i > MAX_LOCAL_PART or text[j - 1] == "." or ".." in text[i:j]:
        return None
    start = k = j + 1
    while k < len(text) and k - start <= MAX_DOMAIN and (
            _address_letter(text[k]) and text[k] != "_" or text[k] in ".-"):
        k += 1
    while k > start and text[k - 1] in ".-":
        k -= 1
    labels = text[start:k].split(".")
    if len(labels) < 2 or not all(labels) or len(labels[-1]) < 2 or not labels[-1].isalpha() or k - start > MAX_DOMAIN:
        return None
    return k


def _braces(text: str, i: int) -> int | None:
    """`{name}`, `${name}`, `{{ name }}`."""
    j = i + 1 if text[i] == "$" else i
    if j >= len(text) or text[j] != "{" or (j and text[j - 1] == "{"):
        return None
    if text.startswith("{{", j):
        k = j + 2
        while k < len(text) and k - j < MAX_PLACEHOLDER_CHARS and text[k] not in "{}\n":
            k += 1
        return k + 2 if text.startswith("}}", k) and text[j + 2 : k].strip() else None
    k = j + 1
    while k < len(text) and k - j < MAX_PLACEHOLDER_CHARS and text[k] not in "{}" and not text[k].isspace():
        k += 1
    return k + 1 if k < len(text) and text[k] == "}" else None


def _percent(text: str, i: int) -> int | None:
    """printf's conversions (`%s`, `%1$s`, `%(name)s`, `%-5.2f`, `%%`) and Qt's `%1`."""
    if text[i] != "%":
        return None
    n = len(text)
    j = i + 1
    if j < n and text[j] == "%":
        return j + 1
    explicit = False  # a part only placeholders have: an argument, flags, a width or a precision
    qt = None  # the end of Qt's %1 (digits alone), if printf finds no conversion
    if j < n and text[j] == "(":
        close = text.find(")", j, j + MAX_PLACEHOLDER_CHARS)
        if close < 0 or not text[j + 1 : close].replace("_", "a").isalnum():
            return None
        j, explicit = close + 1, True
    else:
        k = j
        while k < n and k - j < 2 and text[k].isdecimal():
            k += 1
        if k > j and k < n and text[k] == "$":
            j, explicit = k + 1, True
        elif k > j and text[j] != "0":
            qt = k
    while j < n and text[j] in _PRINTF_FLAGS:
        j, explicit = j + 1, True
    while j < n and (text[j].isdigit() or text[j] == "*"):
        j, explicit = j + 1, True
    if j < n and text[j] == ".":
        j, explicit = j + 1, True
        while j < n and (text[j].isdigit() or text[j] == "*"):
            j += 1
    length = next((x for x in _PRINTF_LENGTHS if text.startswith(x, j)), "")
    j += len(length)
    if j >= n or text[j] not in _PRINTF_CONVERSIONS:
        return qt
    j += 1
    if not (explicit or length) and j < n and text[j].isalpha():
        return None  # "%age": a word
    return j


def _dollar(text: str, i: int) -> int | None:
    """`$1`: a numbered group or argument."""
    if text[i] != "$" or not _after_boundary(text, i):
        return None
    j = i + 1
    while j < len(text) and j - i <= 2 and text[j].isdigit():
        j += 1
    return j if j > i + 1 and _before_boundary(text, j) else None


def _digits(text: str, i: int) -> int | None:
    """The end of a number starting at i (digits, with separators between digits), or None."""
    j, limit = i, min(len(text), i + MAX_NUMBER_CHARS)
    if j >= limit or not text[j].isdecimal():
        return None
    while j < limit:
        if text[j].isdecimal():
            j += 1
        elif text[j] in _NUMBER_SEPARATORS and j + 1 < limit and text[j + 1].isdecimal():
            j += 1
        elif text[j] == " " and _group_of_three(text, j + 1):  # "1 000 m"
            j += 1
        else:
            break
    return j


def _group_of_three(text: str, i: int) -> bool:
    return text[i : i + 3].isdecimal() and len(text[i : i + 3]) == 3 and not text[i + 3 : i + 4].isdecimal()


def _number(text: str, i: int) -> int | None:
    """A number with its unit after it, or a currency symbol before it."""
    if not _after_boundary(text, i):
        return None
    j = i
    if text[j] in CURRENCY_SYMBOLS:
        j += 1
        if j < len(text) and text[j] in _UNIT_SPACES:
            j += 1
        end = _digits(text, j)
        return end if end is not None and _before_boundary(text, end) else None
    if text[j] in _MINUS:
        j += 1
    end = _digits(text, j)
    if end is None:
        return None
    k = end + 1 if end < len(text) and text[end] in _UNIT_SPACES else end
    for size in range(min(MAX_UNIT_CHARS, len(text) - k), 0, -1):
        if text[k : k + size] in UNITS and _before_boundary(text, k + size):
            return k + size
    return None


def _has_url_prefix(text: str) -> bool:
    lower = text.lower()
    return "://" in lower or "www." in lower or "mailto:" in lower


@dataclass(frozen=True)
class _Scanner:
    kind: str
    scan: Callable[[str, int], int | None]  # (text, i) -> the end of its span starting at i, or None
    needs: Callable[[str], object]  # true of every text that may hold such a span
    starts: re.Pattern[str]  # matches at every character where one may start


def _chars(chars: Iterable[str]) -> str:
    return "".join(re.escape(c) for c in sorted(chars))


# \d is str.isdecimal's class (Unicode's Nd).
_DIGIT = re.compile(r"\d")
_SCANNERS = (
    _Scanner("url", _url, _has_url_prefix, re.compile("[hHfFmMwW]")),
    _Scanner("email", _email, lambda text: "@" in text, re.compile(".", re.DOTALL)),
    _Scanner("placeholder", _braces, lambda text: "{" in text, re.compile("[{$]")),
    _Scanner("placeholder", _percent, lambda text: "%" in text, re.compile("%")),
    _Scanner("placeholder", _dollar, lambda text: "$" in text, re.compile(r"\$")),
    _Scanner("number", _number, _DIGIT.search, re.compile(rf"[\d{_chars(CURRENCY_SYMBOLS | _MINUS)}]")),
)


@functools.lru_cache(maxsize=None)
def _starts_of(patterns: frozenset[str]) -> re.Pattern[str]:
    """Where any of the scanners whose start patterns these are may start a span."""
    return re.compile("|".join(sorted(patterns)), re.DOTALL)
