"""`python -m bench.ocr [--pages N]`: OCR engines compared on scans made here, printed as JSON.

Each test page is an A4 page at 300 dpi (2480 x 3508 pixels) of text in English, Arabic or Chinese
(a paragraph four times over) drawn with Pillow in a Noto font at 12 pt, turned 1.5 degrees and given Gaussian noise, as a phone or a flatbed
leaves it. Each engine reads it; the figures are its character error rate (edit distance over the
length of the true text, whitespace left out) and its time per page (the mean of `--pages` runs,
the first, which loads the models, left out). Engines: Tesseract 5 (Debian's package, through
pytesseract) with the page's language model, and RapidOCR (rapidocr-onnxruntime, the PP-OCRv4
models in its wheel), which read Chinese and Latin letters only, where it is installed (`pip install
rapidocr-onnxruntime`; it is not a dependency of the app). `dragoman_reader` is the app's whole reading of
a page with Tesseract (ocr.Reader: skew, orientation, blocks and their colours): the time per page a user
waits before translation starts. `--scanned-pdf N` times the app's reading of an N-page scanned PDF
instead (pages read several at once). docs/ocr.md keeps the figures.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np

PAGES = {
    "eng": ("NotoSans-Regular.ttf",
            "The old town lies on a hill above the river. Its narrow streets lead to the market square, "
            "where the town hall has stood for five hundred years. Start early in the morning, when the "
            "light is soft and the cafes open their doors."),
    "ara": ("NotoNaskhArabic-Regular.ttf",
            "تقع المدينة القديمة على تلة فوق النهر. تؤدي شوارعها الضيقة إلى ساحة السوق حيث تقف دار البلدية "
            "منذ خمسمئة عام. ابدأوا في الصباح الباكر حين يكون الضوء ناعما وتفتح المقاهي أبوابها."),
    "chi_sim": ("NotoSansCJK-Regular.ttc",
                "老城位于河边的小山上。狭窄的街道通向市场广场，市政厅在那里已经矗立了五百年。"
                "清晨出发吧，那时光线柔和，咖啡馆刚刚开门。"),
}


def find_font(name: str) -> str:
    import subprocess

    paths = subprocess.run(["fc-list", "--format", "%{file}\n"], capture_output=True, text=True).stdout.split()
    return next(p for p in paths if p.endswith("/" + name))


def wrap(text: str, font, width: int, spaced: bool) -> list[str]:
    words = text.split(" ") if spaced else list(text)
    lines, line = [], ""
    for word in words:
        candidate = (line + " " + word if line else word) if spaced else line + word
        if line and font.getlength(candidate) > width:
            lines.append(line)
            line = word
        else:
            line = candidate
    return lines + [line]


def scan(text: str, font_path: str, rtl: bool, spaced: bool, seed: int = 0):
    """A page of `text` as a scan: black on off-white, 300 dpi, turned a little, noised."""
    from PIL import Image, ImageDraw, ImageFont

    width, height, margin = 2480, 3508, 250
    font = ImageFont.truetype(font_path, 50)
    lines = wrap(text, font, width - 2 * margin, spaced)
    page = Image.new("L", (width, height), 245)
    draw = ImageDraw.Draw(page)
    for number, line in enumerate(lines):
        y = margin + 80 * number
        if rtl:
            draw.text((width - margin, y), line, font=font, fill=20, anchor="ra", direction="rtl")
        else:
            draw.text((margin, y), line, font=font, fill=20)
    page = page.rotate(1.5, resample=Image.BICUBIC, expand=False, fillcolor=245)
    noise = np.random.default_rng(seed).normal(0, 12, (page.height, page.width))
    return Image.fromarray(np.clip(np.asarray(page, dtype=np.float64) + noise, 0, 255).astype(np.uint8)).convert("RGB")


def error_rate(found: str, truth: str) -> float:
    """Character error rate: Levenshtein distance over the true text's length, whitespace left out."""
    a, b = "".join(found.split()), "".join(truth.split())
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (ca != cb))
    return row[len(b)] / max(len(b), 1)


def tesseract(image, language: str) -> str:
    from dragoman.app.documents.ocr import as_raw_pixels, pytesseract_module  # as the app runs it

    return pytesseract_module().image_to_string(as_raw_pixels(image.copy()), lang=language)


def rapidocr(engine, image) -> str:
    result, _ = engine(np.asarray(image))
    return "\n".join(text for _, text, _ in result or [])


def measure(read, image, truth: str, pages: int) -> dict:
    read(image)  # models loaded
    start = time.perf_counter()
    for _ in range(pages):
        found = read(image)
    return {"cer": round(error_rate(found, truth), 4), "seconds_per_page": round((time.perf_counter() - start) / pages, 3)}


def time_scanned_pdf(pages: int) -> dict:
    """The app's reading of a PDF of `pages` scans of the English page (pdf.extract and its segments:
    every page read by OCR, several at once): its seconds, and per page."""
    import os
    import tempfile
    from pathlib import Path

    from dragoman.app.documents import pdf

    font_name, text = PAGES["eng"]
    scans = [scan(" ".join([text] * 4), find_font(font_name), rtl=False, spaced=True, seed=seed) for seed in range(pages)]
    with tempfile.TemporaryDirectory(prefix="dragoman-scans-") as folder:
        path = Path(folder) / "scans.pdf"
        scans[0].save(path, save_all=True, append_images=scans[1:], resolution=300)
        start = time.perf_counter()
        document = pdf.extract(path, source="eng_Latn")
        try:
            document.segments  # every page read
        finally:
            document.close()
        seconds = time.perf_counter() - start
    return {"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores", "pages": pages,
            "pages_at_once": min(pdf.OCR_PAGES_AT_ONCE, os.cpu_count() or 1), "seconds": round(seconds, 2),
            "seconds_per_page": round(seconds / pages, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=3)
    parser.add_argument("--scanned-pdf", type=int, metavar="N", default=0,
                        help="instead: time the app's reading of an N-page scanned PDF of the English page")
    args = parser.parse_args()
    import dragoman  # noqa: F401  (before anything imports transformers: see dragoman/__init__.py)
    if args.scanned_pdf:
        print(json.dumps(time_scanned_pdf(args.scanned_pdf), indent=2))
        return
    from dragoman.app.documents.ocr import TESSERACT_LANGUAGES, Reader

    try:
        from rapidocr_onnxruntime import RapidOCR

        engine = RapidOCR()
    except ImportError:
        engine = None
    results: dict = {"machine": f"{platform.processor() or platform.machine()}, {__import__('os').cpu_count()} cores"}
    for language, (font_name, text) in PAGES.items():
        text = " ".join([text] * 4)
        image = scan(text, find_font(font_name), rtl=language == "ara", spaced=language != "chi_sim")
        row = {"pixels": f"{image.width}x{image.height}",
               "tesseract": measure(lambda im: tesseract(im, language), image, text, args.pages),
               "dragoman_reader": measure(lambda im: "\n".join(b.text for b in Reader(TESSERACT_LANGUAGES[language]).read(im)),
                                          image, text, args.pages)}
        if engine is not None and language != "ara":  # RapidOCR's models in the wheel have no Arabic
            row["rapidocr"] = measure(lambda im: rapidocr(engine, im), image, text, args.pages)
        results[language] = row
    print(json.dumps(results, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
