"""Reading the text of a picture (a scan, a photo, a screenshot) offline: Tesseract 5 through pytesseract.

Tesseract is the system's (Debian: `tesseract-ocr` and a `tesseract-ocr-LANG` package per language,
models installed with it, nothing downloaded). docs/ocr.md says why it was chosen and how well it
reads. `Reader(source).read(image)` gives the picture's blocks of text (Tesseract's paragraphs):
their text (lines joined as a sentence runs on, without spaces between CJK characters), their box
in the picture's pixels, their line count and height, and the colours of their background and of
their ink, measured in the picture, for whoever sets the translation in their place.

The model is chosen from the source language (FLORES-200): the language's own model where it is
installed, else the model of its script (Debian's `tesseract-ocr-script-*`); a language whose script
no installed model reads is one DocumentError line naming it and the package to install. With
source "auto" each installed language model reads the first picture on its own (Tesseract reading
with several at once does worse the more it is given, and its script detection takes Chinese for
Korean), the one surest of the most letters reads the rest, and the language is detected in the
recognised text (app.session.detect).
"""

from __future__ import annotations

import math
import os
import re
import statistics
from dataclasses import dataclass
from functools import lru_cache

from dragoman.app.documents.safety import DocumentError
from dragoman.app.documents.sentences import is_rtl

# Tesseract's language models -> FLORES-200 codes, for the languages both know.
TESSERACT_LANGUAGES = {
    "afr": "afr_Latn", "amh": "amh_Ethi", "ara": "arb_Arab", "asm": "asm_Beng", "aze": "azj_Latn",
    "bel": "bel_Cyrl", "ben": "ben_Beng", "bod": "bod_Tibt", "bos": "bos_Latn", "bul": "bul_Cyrl",
    "cat": "cat_Latn", "ceb": "ceb_Latn", "ces": "ces_Latn", "chi_sim": "zho_Hans", "chi_tra": "zho_Hant",
    "cym": "cym_Latn", "dan": "dan_Latn", "deu": "deu_Latn", "dzo": "dzo_Tibt", "ell": "ell_Grek",
    "eng": "eng_Latn", "epo": "epo_Latn", "est": "est_Latn", "eus": "eus_Latn", "fas": "pes_Arab",
    "fin": "fin_Latn", "fra": "fra_Latn", "gle": "gle_Latn", "glg": "glg_Latn", "guj": "guj_Gujr",
    "hat": "hat_Latn", "heb": "heb_Hebr", "hin": "hin_Deva", "hrv": "hrv_Latn", "hun": "hun_Latn",
    "hye": "hye_Armn", "ind": "ind_Latn", "isl": "isl_Latn", "ita": "ita_Latn", "jav": "jav_Latn",
    "jpn": "jpn_Jpan", "kan": "kan_Knda", "kat": "kat_Geor", "kaz": "kaz_Cyrl", "khm": "khm_Khmr",
    "kir": "kir_Cyrl", "kor": "kor_Hang", "lao": "lao_Laoo", "lav": "lvs_Latn", "lit": "lit_Latn",
    "ltz": "ltz_Latn", "mal": "mal_Mlym", "mar": "mar_Deva", "mkd": "mkd_Cyrl", "mlt": "mlt_Latn",
    "mri": "mri_Latn", "mya": "mya_Mymr", "nep": "npi_Deva", "nld": "nld_Latn", "nor": "nob_Latn",
    "oci": "oci_Latn", "ori": "ory_Orya", "pan": "pan_Guru", "pol": "pol_Latn", "por": "por_Latn",
    "pus": "pbt_Arab", "ron": "ron_Latn", "rus": "rus_Cyrl", "sin": "sin_Sinh", "slk": "slk_Latn",
    "slv": "slv_Latn", "snd": "snd_Arab", "spa": "spa_Latn", "sqi": "als_Latn", "srp": "srp_Cyrl",
    "sun": "sun_Latn", "swa": "swh_Latn", "swe": "swe_Latn", "tam": "tam_Taml", "tat": "tat_Cyrl",
    "tel": "tel_Telu", "tgk": "tgk_Cyrl", "tgl": "tgl_Latn", "tha": "tha_Thai", "tir": "tir_Ethi",
    "tur": "tur_Latn", "uig": "uig_Arab", "ukr": "ukr_Cyrl", "urd": "urd_Arab", "uzb": "uzn_Latn",
    "vie": "vie_Latn", "yid": "ydd_Hebr", "yor": "yor_Latn",
}
# Tesseract's script models (all the languages of a script in one) -> the ISO 15924 codes of FLORES-200.
TESSERACT_SCRIPTS = {
    "Latin": "Latn", "Arabic": "Arab", "HanS": "Hans", "HanT": "Hant", "Cyrillic": "Cyrl", "Devanagari": "Deva",
    "Greek": "Grek", "Hebrew": "Hebr", "Japanese": "Jpan", "Hangul": "Hang", "Thai": "Thai", "Bengali": "Beng",
    "Ethiopic": "Ethi", "Armenian": "Armn", "Georgian": "Geor", "Tamil": "Taml", "Telugu": "Telu",
    "Kannada": "Knda", "Malayalam": "Mlym", "Gujarati": "Gujr", "Gurmukhi": "Guru", "Oriya": "Orya",
    "Sinhala": "Sinh", "Khmer": "Khmr", "Lao": "Laoo", "Myanmar": "Mymr", "Tibetan": "Tibt",
}
LEADING = 1.2  # baseline to baseline, in ems: what a block's lines are taken to be set at
LINE_BOX = 0.9  # the height of a line's ink, in ems
COLUMN_GAP = 1.5  # a gap between words this many line heights wide may part two columns
SIZE_JUMP = 2.0  # lines this many times taller than the next are not one paragraph with it (a heading and its text)
MIN_CONFIDENCE = 40  # a block Tesseract is less sure of than this (mean over its words) is a picture's texture, not text
OSD_CONFIDENCE = 2.0  # Tesseract's orientation detection is believed from this confidence on
DESKEW_FROM = 2.0  # degrees: a picture whose lines slope more is turned level before it is read (Tesseract reads 1 or 2 well)
MAX_SKEW = 10  # degrees: the most a picture's lines are looked for sloping
TURNS = (0, 90, 180, 270)  # degrees counter-clockwise a picture may need turning to be upright
SENTENCE_END = re.compile(r"[.!?:;…。！？；؟]['\"’”」』)]*$")
CJK = ("\u2e80", "\u9fff")  # CJK characters: no space between them where a line breaks


@dataclass(frozen=True)
class Frame:
    """A picture turned `angle` degrees counter-clockwise about its centre (Pillow's `rotate(angle,
    expand=True)`) to set its text upright: `size` is the picture's, `upright` the turned one's."""

    angle: float
    size: tuple[int, int]
    upright: tuple[int, int]

    def to_picture(self, x: float, y: float) -> tuple[float, float]:
        """A point of the upright picture in the picture's own pixels."""
        theta = math.radians(self.angle)
        u, v = x - self.upright[0] / 2, y - self.upright[1] / 2
        # turning back clockwise by `angle` on screen (y points down)
        return (u * math.cos(theta) - v * math.sin(theta) + self.size[0] / 2,
                u * math.sin(theta) + v * math.cos(theta) + self.size[1] / 2)


@dataclass
class TextBlock:
    """A block of text found in a picture; `box` is (left, top, right, bottom) in its pixels, or in
    those of the picture turned upright where `frame` says it was read turned."""

    text: str
    box: tuple[int, int, int, int]
    lines: int
    line_height: float  # pixels: the median height of its lines' boxes
    background: tuple[int, int, int]  # RGB
    ink: tuple[int, int, int]
    rtl: bool = False
    frame: Frame | None = None

    def outline(self) -> list[tuple[float, float]]:
        """The box's corners in the picture's own pixels (turned with the text where it was read turned)."""
        left, top, right, bottom = self.box
        corners: list[tuple[float, float]] = [(left, top), (right, top), (right, bottom), (left, bottom)]
        return [self.frame.to_picture(x, y) for x, y in corners] if self.frame else corners

    def bounds(self) -> tuple[int, int, int, int]:
        """The smallest box of the picture's own pixels that holds the block."""
        xs, ys = zip(*self.outline())
        return math.floor(min(xs)), math.floor(min(ys)), math.ceil(max(xs)), math.ceil(max(ys))

    @property
    def size(self) -> float:
        """The text's size in pixels (an em), as near as the boxes tell: lines LEADING apart, a line's box
        (ascenders to descenders, which not every line has) about LINE_BOX of the size."""
        height = self.box[3] - self.box[1]
        if self.lines > 1:
            return height / ((self.lines - 1) * LEADING + LINE_BOX)
        return self.line_height / LINE_BOX


# Tesseract's own OpenMP threads (its default) read a page several times slower on a few cores
# than one thread does (docs/ocr.md, "Time per page"): each Tesseract process runs on one.
TESSERACT_ENVIRONMENT = {"OMP_THREAD_LIMIT": "1"}


def pytesseract_module():
    """pytesseract, the Tesseract processes it starts given TESSERACT_ENVIRONMENT (it passes its
    module's `environ` to each; the app's own OpenMP, torch's, is not touched)."""
    import pytesseract

    setattr(pytesseract.pytesseract, "environ", {**os.environ, **TESSERACT_ENVIRONMENT})  # setattr: a module's global
    return pytesseract


@lru_cache(maxsize=1)
def installed_models() -> tuple[str, ...]:
    """The Tesseract models installed (language and script names), or a DocumentError if there is no Tesseract."""
    pytesseract = pytesseract_module()

    try:
        return tuple(pytesseract.get_languages(config=""))
    except (pytesseract.TesseractNotFoundError, OSError):
        raise DocumentError("reading pictures of text needs Tesseract OCR, which is not installed "
                            "(Debian/Ubuntu: apt install tesseract-ocr)") from None


def model_for(source: str) -> str:
    """The Tesseract model (`eng`, `ara`, `Arabic`...) that reads `source` (a FLORES-200 code)."""
    installed = installed_models()
    for model, code in TESSERACT_LANGUAGES.items():
        if code == source and model in installed:
            return model
    script = source.rpartition("_")[2]
    for model, code in TESSERACT_SCRIPTS.items():
        if code == script and model in installed:
            return model
    from dragoman.engine import get_language

    language = get_language(source)
    own = next((m for m, code in TESSERACT_LANGUAGES.items() if code == source), None)
    package = f"tesseract-ocr-{own.replace('_', '-')}" if own else "tesseract-ocr-script-<script>"
    raise DocumentError(f"cannot read {language.name} text in pictures: no installed OCR model reads its "
                        f"{script} script (Debian/Ubuntu: apt install {package})")


class Reader:
    """Recognises the blocks of text of pictures in one source language (or "auto")."""

    def __init__(self, source: str):
        self.source = source
        self.model = model_for(source) if source != "auto" else None

    def read(self, image) -> list[TextBlock]:
        """The picture's blocks of text, in reading order. A picture whose text is turned (a page scanned
        sideways or upside down; Tesseract's orientation detection, else the surest of the four turns)
        or sloping by DESKEW_FROM degrees or more is read turned upright, its blocks' `frame` saying how."""
        import numpy as np

        rgb = image.convert("RGB")
        skew = _skew(rgb)
        skew = skew if abs(skew) >= DESKEW_FROM else 0.0
        turn = _orientation(_turned(rgb, skew)) if "osd" in installed_models() else None
        if self.model is None:
            candidates = [m for m in installed_models() if m in TESSERACT_LANGUAGES]
            if not candidates:
                raise DocumentError("no Tesseract language model is installed (Debian/Ubuntu: apt install tesseract-ocr-eng)")
        else:
            candidates = [self.model]
        tried = [(model, skew + t) for model in candidates for t in ([turn] if turn is not None else TURNS)]
        readings = {key: _recognise(_turned(rgb, key[1]), key[0]) for key in tried}
        # Tesseract reads a turned page's lines of text standing up too: the reading of level lines is the one
        self.model, angle = max(tried, key=lambda key: (round(_sureness(readings[key])), -abs(_slope(readings[key]))))
        data = readings[(self.model, angle)]
        upright = _turned(rgb, angle)
        frame = Frame(angle, rgb.size, upright.size) if angle else None
        rgb = upright
        pixels = np.asarray(rgb)
        # Tesseract's paragraphs, one that ends without a sentence's end joined to the next of its block or
        # to a next that starts in lower case (Tesseract starts a paragraph after a short line even mid-sentence),
        # unless their lines' sizes differ by SIZE_JUMP (a heading above its text)
        line_heights = {(data["block_num"][i], data["par_num"][i], data["line_num"][i]): data["height"][i]
                        for i, level in enumerate(data["level"]) if level == 4}
        paragraphs: list[dict[tuple[int, int, int], list[int]]] = []  # (block, paragraph, line) -> its words
        last: tuple[int, int] | None = None
        for i, word in enumerate(data["text"]):
            if not word.strip() or float(data["conf"][i]) < 0:
                continue
            key = (data["block_num"][i], data["par_num"][i])
            if key != last:
                runs_on = (last is not None and (last[0] == key[0] or word[:1].islower()) and paragraphs
                           and not SENTENCE_END.search(data["text"][max(j for line in paragraphs[-1].values() for j in line)])
                           and _same_size(line_heights.get(list(paragraphs[-1])[-1], 0),
                                          line_heights.get((*key, data["line_num"][i]), 0)))
                if not runs_on:
                    paragraphs.append({})
                last = key
            paragraphs[-1].setdefault((*key, data["line_num"][i]), []).append(i)
        blocks = []
        pictures = _pictures(data)
        for lines in (part for paragraph in paragraphs for column in _columns(paragraph, data)
                      for part in _around(column, data, pictures)):
            words = [i for line in lines.values() for i in line]
            if statistics.mean(float(data["conf"][i]) for i in words) < MIN_CONFIDENCE:
                continue
            text = ""
            for line in lines.values():
                text = _joined(text, _joined_words([data["text"][i] for i in line]))
            letters = [ch for ch in text if ch.isalpha()]
            if len(letters) < 2 and not any(is_cjk(ch) for ch in letters):  # no text, or a drop cap or a figure's label
                continue
            box = _box(words, data)
            heights = [max(data["top"][i] + data["height"][i] for i in line) - min(data["top"][i] for i in line)
                       for line in lines.values()]
            background, ink = colours(pixels, box)
            blocks.append(TextBlock(text, box, len(lines), statistics.median(heights), background, ink, is_rtl(text), frame))
        return blocks

    def language(self, blocks: list[TextBlock]) -> str | None:
        """The source language: the one given, or with "auto" the one detected in the blocks' text."""
        if self.source != "auto":
            return self.source
        from dragoman.app.session.detect import detect_language

        return detect_language("\n".join(block.text for block in blocks))


def _same_size(a: float, b: float) -> bool:
    """Whether two lines' heights (pixels; 0 where unknown) may be lines of one paragraph."""
    return not (a and b) or max(a, b) < SIZE_JUMP * min(a, b)


def _columns(lines: dict, data: dict) -> list[dict]:
    """A paragraph cut into columns where Tesseract ran its lines across them (two columns of text, a
    table's cells): at an x that every line either leaves a gap of COLUMN_GAP line heights at or lies
    wholly on one side of, and that at least one line has text on both sides of; left column first."""
    def left(i):
        return data["left"][i]

    def right(i):
        return data["left"][i] + data["width"][i]

    candidates = []
    for words in lines.values():
        ordered = sorted(words, key=left)
        height = statistics.median(data["height"][i] for i in words)
        candidates += [(right(a) + left(b)) / 2 for a, b in zip(ordered, ordered[1:]) if left(b) - right(a) > COLUMN_GAP * height]
    for x in candidates:
        if all(right(i) < x or left(i) > x for words in lines.values() for i in words):
            sides: tuple[dict, dict] = ({}, {})
            for key, words in lines.items():
                for i in words:
                    sides[left(i) > x].setdefault(key, []).append(i)
            return [part for side in sides for part in _columns(side, data)]
    return [lines]


def _box(words: list[int], data: dict) -> tuple[int, int, int, int]:
    return (min(data["left"][i] for i in words), min(data["top"][i] for i in words),
            max(data["left"][i] + data["width"][i] for i in words), max(data["top"][i] + data["height"][i] for i in words))


def _meet(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _pictures(data: dict) -> list[tuple[int, int, int, int]]:
    """The boxes of the blocks Tesseract found no text in (pictures, rules)."""
    with_text = {data["block_num"][i] for i, word in enumerate(data["text"]) if word.strip()}
    return [(data["left"][i], data["top"][i], data["left"][i] + data["width"][i], data["top"][i] + data["height"][i])
            for i, level in enumerate(data["level"]) if level == 2 and data["block_num"][i] not in with_text]


def _around(lines: dict, data: dict, pictures: list) -> list[dict]:
    """A paragraph cut into runs of lines where it wraps around a picture (its first lines beside the
    picture, the next under it): where one box over its lines would reach over a picture that none of
    its lines does, so that covering the box would hide a piece of the picture."""
    parts: list[dict] = []
    for key, words in lines.items():
        if parts:
            run = [*parts[-1].values(), words]
            box = _box([i for line in run for i in line], data)
            if not any(_meet(box, p) and not any(_meet(_box(line, data), p) for line in run) for p in pictures):
                parts[-1][key] = words
                continue
        parts.append({key: words})
    return parts


def _orientation(image) -> int | None:
    """How many degrees counter-clockwise the picture must turn for its text to stand upright, as
    Tesseract's orientation detection says; None where it cannot tell (too little text)."""
    pytesseract = pytesseract_module()

    try:
        found = pytesseract.image_to_osd(as_raw_pixels(image), config="--psm 0", output_type=pytesseract.Output.DICT)
    except pytesseract.TesseractError:
        return None
    return (-int(found["rotate"])) % 360 if float(found["orientation_conf"]) >= OSD_CONFIDENCE else None


def _turned(image, angle: float):
    """The picture turned `angle` degrees counter-clockwise, grown to hold it all, the corners filled in
    its border's colour."""
    import numpy as np
    from PIL import Image

    if not angle:
        return image
    if angle % 90 == 0:
        return image.rotate(angle, expand=True)
    border = tuple(int(v) for v in np.median(np.asarray(image)[0], axis=0))  # the top row's median colour
    return image.rotate(angle, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=border)


def _slope(data: dict) -> float:
    """The degrees by which a reading's lines of text fall to the right: the median over lines of three
    words or more of their words' centres' slope (near 90 where Tesseract read lines standing up)."""
    lines: dict[tuple[int, int, int], list[tuple[float, float]]] = {}
    for i, word in enumerate(data["text"]):
        if word.strip() and float(data["conf"][i]) > 0:
            lines.setdefault((data["block_num"][i], data["par_num"][i], data["line_num"][i]), []).append(
                (data["left"][i] + data["width"][i] / 2, data["top"][i] + data["height"][i] / 2))
    slopes = []
    for centres in lines.values():
        if len(centres) >= 3:
            xs, ys = zip(*centres)
            mx, my = statistics.mean(xs), statistics.mean(ys)
            spread = sum((x - mx) ** 2 for x in xs)
            slopes.append(90.0 if not spread else math.degrees(math.atan(sum((x - mx) * (y - my) for x, y in centres) / spread)))
    return statistics.median(slopes) if slopes else 0.0


def _skew(image) -> float:
    """The degrees (within MAX_SKEW) the picture must turn counter-clockwise to set its lines of text
    level, lying or standing: the angle at which the ink's profile across the lines (its rows, or its
    columns) is sharpest, on a copy about 800 pixels wide, in whole degrees then tenths."""
    import numpy as np
    from PIL import Image

    grey = image.convert("L")
    grey = grey.reduce(max(1, max(grey.size) // 800))
    ink = Image.fromarray((np.asarray(grey) < np.median(np.asarray(grey)) - 40).astype(np.uint8) * 255)

    def sharpness(angle: float) -> float:
        turned = np.asarray(ink.rotate(angle, resample=Image.Resampling.NEAREST, expand=True), dtype=np.float64)
        return max(float(np.square(np.diff(turned.sum(axis=axis))).sum()) for axis in (0, 1))

    best = max(range(-MAX_SKEW, MAX_SKEW + 1), key=sharpness)
    return max((best + k / 10 for k in range(-9, 10)), key=sharpness)


def as_raw_pixels(image):
    """The picture (one of ours: the reader's copies) to be written for Tesseract as raw pixels (PPM)
    rather than pytesseract's default PNG, whose compression of an A4 page took longer than
    Tesseract's reading of it (docs/ocr.md, "Time per page")."""
    image.format = "PPM"  # what pytesseract writes it as
    return image


def _recognise(image, model: str) -> dict:
    pytesseract = pytesseract_module()

    try:
        return pytesseract.image_to_data(as_raw_pixels(image), lang=model, config="--psm 3",
                                         output_type=pytesseract.Output.DICT)
    except pytesseract.TesseractError as e:
        lines = str(e.message).strip().splitlines()
        raise DocumentError(f"Tesseract could not read the picture ({lines[-1]})" if lines
                            else "Tesseract could not read the picture") from None


def _sureness(data: dict) -> float:
    """How much of a reading Tesseract is sure of: its confidence summed over the letters it read."""
    return sum(float(conf) * sum(ch.isalpha() for ch in word) for word, conf in zip(data["text"], data["conf"])
               if float(conf) > 0)


def colours(pixels, box: tuple[int, int, int, int]) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(background, ink) of a box of an RGB array: the background is the mean of the box's pixels nearer
    its median (text covers the lesser part of a box), the ink the mean of the 3% farthest from it
    (the cores of the strokes, not their antialiased edges)."""
    import numpy as np

    left, top, right, bottom = box
    area = pixels[top:bottom, left:right].reshape(-1, 3).astype(np.float64)
    if not len(area):
        return (255, 255, 255), (0, 0, 0)
    median = np.median(area, axis=0)
    distance = np.abs(area - median).sum(axis=1)
    near = area[distance <= np.percentile(distance, 50)]
    far = area[distance >= np.percentile(distance, 97)]
    background = tuple(int(round(v)) for v in near.mean(axis=0))
    ink = tuple(int(round(v)) for v in far.mean(axis=0))
    return background, ink  # type: ignore[return-value]


def is_cjk(ch: str) -> bool:
    return CJK[0] <= ch <= CJK[1] or "\u3000" <= ch <= "\u303f" or "\uff00" <= ch <= "\uffef"


def _joined_words(words: list[str]) -> str:
    """A line's words: Tesseract gives each Chinese or Japanese character as a word; no spaces between those."""
    text = ""
    for word in words:
        text += word if not text or (is_cjk(text[-1]) and is_cjk(word[0])) else " " + word
    return text


def _joined(text: str, line: str) -> str:
    """A block's text with its next line: a hyphen at the end joins the word, CJK runs on, else a space."""
    if not text:
        return line
    if text.endswith("-") and text[-2:-1].isalpha() and line[:1].islower():
        return text[:-1] + line
    if is_cjk(text[-1]) or is_cjk(line[:1] or " "):
        return text + line
    return text + " " + line




def picture_text(image, source: str = "auto") -> str:
    """The text of a picture (a pasted screenshot, say) as plain text: its blocks in reading order, a blank
    line between two; DocumentError where OCR cannot read it or finds no text."""
    blocks = Reader(source).read(image)
    if not blocks:
        raise DocumentError("no text found in the picture")
    return "\n\n".join(block.text for block in blocks)
