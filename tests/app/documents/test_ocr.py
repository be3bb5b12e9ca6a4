"""OCR of pictures and scans made here: text drawn with Pillow in Noto fonts (English, Arabic,
Chinese), turned a little and noised, read by the system's Tesseract, translated and drawn back."""

import re
import subprocess

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from dragoman.app.cli import main
from dragoman.app.documents import DocumentError, translate_document
from dragoman.app.documents.ocr import TESSERACT_LANGUAGES, Reader, installed_models
from dragoman.app.documents.picture import FILL_PAD, extract
from dragoman.engine import LANGUAGE_CODES

from bench.ocr import error_rate

from document_fakes import upper_keeping_tags

ENGLISH = ["The old town lies on a hill above the river.", "Its narrow streets lead to the market square."]
ARABIC = ["تقع المدينة القديمة على تلة فوق النهر.", "تؤدي شوارعها الضيقة إلى ساحة السوق."]
CHINESE = ["老城位于河边的小山上。", "狭窄的街道通向市场广场。"]
FONTS = {"eng_Latn": "NotoSans-Regular.ttf", "arb_Arab": "NotoNaskhArabic-Regular.ttf", "zho_Hans": "NotoSansCJK-Regular.ttc"}
# The character error rate each script is read within (edit distance over length, spaces left out)
# on these scans; Tesseract's Chinese model is the weakest (docs/ocr.md).
MAX_ERROR = {"eng_Latn": 0.03, "arb_Arab": 0.08, "zho_Hans": 0.15}
BACKGROUND, INK, MARK = (236, 230, 214), (30, 30, 60), (200, 40, 40)


def font_path(name):
    files = subprocess.run(["fc-list", "--format", "%{file}\n"], capture_output=True, text=True).stdout.split()
    return next(f for f in files if f.endswith("/" + name))


def make_scan(lines, language, angle=1.0, seed=0):
    """`lines` drawn as a scan: 40 px text on paper-coloured ground, a red square in the corner (not
    text), turned by `angle` degrees and noised."""
    font = ImageFont.truetype(font_path(FONTS[language]), 40)
    image = Image.new("RGB", (1200, 140 + 70 * len(lines)), BACKGROUND)
    draw = ImageDraw.Draw(image)
    for number, line in enumerate(lines):
        if language == "arb_Arab":
            draw.text((1100, 60 + 70 * number), line, font=font, fill=INK, anchor="ra", direction="rtl")
        else:
            draw.text((80, 60 + 70 * number), line, font=font, fill=INK)
    image = image.rotate(angle, resample=Image.BICUBIC, fillcolor=BACKGROUND)
    noise = np.random.default_rng(seed).normal(0, 8, (image.height, image.width, 1))
    image = Image.fromarray(np.clip(np.asarray(image, dtype=np.float64) + noise, 0, 255).astype(np.uint8))
    ImageDraw.Draw(image).rectangle((1150, 5, 1190, 45), fill=MARK)  # drawn after the noise: exact pixels
    return image


def outside(boxes, shape):
    """A mask of the pixels outside every box (grown by the fill's padding)."""
    mask = np.ones(shape[:2], dtype=bool)
    for left, top, right, bottom in boxes:
        mask[max(top - FILL_PAD, 0):bottom + FILL_PAD, max(left - FILL_PAD, 0):right + FILL_PAD] = False
    return mask


@pytest.mark.parametrize("language, lines", [("eng_Latn", ENGLISH), ("arb_Arab", ARABIC), ("zho_Hans", CHINESE)])
def test_recognises_each_script_within_its_error_rate(language, lines):
    blocks = Reader(language).read(make_scan(lines, language))
    found = "".join(block.text for block in blocks)
    assert error_rate(found, "".join(lines)) <= MAX_ERROR[language], found
    assert blocks[0].rtl == (language == "arb_Arab")
    # the background and ink measured near what was drawn (noise has a mean of 0)
    assert all(abs(a - b) < 12 for a, b in zip(blocks[0].background, BACKGROUND))
    assert all(abs(a - b) < 60 for a, b in zip(blocks[0].ink, INK))


def test_a_sentence_over_two_lines_is_one_block():
    blocks = Reader("eng_Latn").read(make_scan(["The museum by the bridge shows the history", "of the town in ten rooms."], "eng_Latn"))
    assert len(blocks) == 1 and blocks[0].lines == 2
    assert "history of the town" in blocks[0].text


def test_each_tesseract_process_runs_on_one_openmp_thread_and_reads_raw_pixels(tmp_path, monkeypatch):
    """Tesseract's OpenMP threads read a page several times slower on a few cores: each process
    that reads a picture is given OMP_THREAD_LIMIT=1, and the app's own environment stays as it was
    (listing the models, which reads nothing, may run without it). The picture is handed over
    as raw pixels (PPM), not as a PNG that takes longer to compress than Tesseract takes to read."""
    import os
    import shutil

    import pytesseract

    seen = tmp_path / "environments.txt"
    wrapper = tmp_path / "tesseract"
    wrapper.write_text(f'#!/bin/sh\necho "$1 limit=$OMP_THREAD_LIMIT" >> {seen}\nexec {shutil.which("tesseract")} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setattr(pytesseract.pytesseract, "tesseract_cmd", str(wrapper))
    monkeypatch.delenv("OMP_THREAD_LIMIT", raising=False)
    blocks = Reader("eng_Latn").read(make_scan(ENGLISH, "eng_Latn"))
    assert "old town" in " ".join(b.text for b in blocks)
    reads = [line.split() for line in seen.read_text().splitlines() if not line.startswith("--")]  # no --list-langs, --version
    assert len(reads) >= 2 and {limit for _, limit in reads} == {"limit=1"}  # orientation and recognition at least
    assert all(picture.endswith(".PPM") for picture, _ in reads)  # raw pixels: no PNG compression to wait for
    assert "OMP_THREAD_LIMIT" not in os.environ


def test_auto_reads_with_the_surest_model_and_detects_the_language():
    reader = Reader("auto")
    blocks = reader.read(make_scan(CHINESE, "zho_Hans"))
    assert reader.model == "chi_sim"
    assert reader.language(blocks) == "zho_Hans"
    assert error_rate("".join(b.text for b in blocks), "".join(CHINESE)) <= MAX_ERROR["zho_Hans"]


def test_a_script_no_installed_model_reads_is_one_line_naming_it():
    if any(m in installed_models() for m in ("hye", "Armenian")):
        pytest.skip("an Armenian model is installed here")
    with pytest.raises(DocumentError, match=r"^cannot read Armenian text in pictures: .*Armn script.*tesseract-ocr-hye\)$"):
        Reader("hye_Armn")


def test_the_language_table_holds_nllb_codes():
    assert set(TESSERACT_LANGUAGES.values()) <= set(LANGUAGE_CODES)
    assert len(set(TESSERACT_LANGUAGES.values())) == len(TESSERACT_LANGUAGES)


@pytest.mark.parametrize("language, lines", [("eng_Latn", ENGLISH), ("arb_Arab", ARABIC)])
def test_a_translated_picture_keeps_its_size_and_every_pixel_outside_the_text(tmp_path, language, lines):
    source = tmp_path / "letter.png"
    original = make_scan(lines, language)
    original.save(source, dpi=(300, 300))
    boxes = [block.box for block in extract(source, source=language).blocks]
    out = translate_document(source, tmp_path / "letter.fra_Latn.png", upper_keeping_tags, options={"source": language})
    translated = Image.open(out)
    assert translated.size == original.size and translated.mode == "RGB"
    assert translated.info["dpi"] == pytest.approx((300, 300), abs=0.01)  # PNG keeps dots per metre; printed, the size of the original
    before, after = np.asarray(original), np.asarray(translated)
    keep = outside(boxes, before.shape)
    assert np.array_equal(before[keep], after[keep])  # the red square and the paper, byte for byte
    assert not np.array_equal(before[~keep], after[~keep])
    assert source.read_bytes() == open(source, "rb").read() and Image.open(source).size == original.size
    if language == "eng_Latn":  # the translation (upper case) is read again where the text was
        again = Reader("eng_Latn").read(translated)
        assert "OLD TOWN" in " ".join(b.text for b in again)
        left, top, right, bottom = boxes[0]
        x0, y0, x1, y1 = again[0].box
        assert left - 5 <= x0 and top - 5 <= y0 and y0 < bottom


def turned_scan(turn):
    """The English scan turned `turn` degrees counter-clockwise: a few (a crooked scan) or a quarter
    (a page scanned sideways), the corners filled with paper."""
    if abs(turn) < 45:
        return make_scan(ENGLISH, "eng_Latn", angle=turn)
    return make_scan(ENGLISH, "eng_Latn", angle=0).rotate(turn, expand=True, fillcolor=BACKGROUND)


@pytest.mark.parametrize("turn", [5, -6, 90, 270])
def test_a_crooked_or_sideways_scan_is_read_upright_and_its_translation_drawn_at_its_angle(tmp_path, turn):
    source = tmp_path / "turned.png"
    original = turned_scan(turn)
    original.save(source)
    blocks = extract(source, source="eng_Latn").blocks
    assert error_rate("".join(b.text for b in blocks), "".join(ENGLISH)) <= MAX_ERROR["eng_Latn"]
    assert all(abs((b.frame.angle + turn + 180) % 360 - 180) < 1 for b in blocks)  # read turned back upright
    out = translate_document(source, tmp_path / "turned.fra_Latn.png", upper_keeping_tags, options={"source": "eng_Latn"})
    translated = Image.open(out)
    assert translated.size == original.size
    before, after = np.asarray(original), np.asarray(translated)
    keep = outside([tuple(v + (2 if k > 1 else -2) for k, v in enumerate(b.bounds())) for b in blocks], before.shape)
    assert np.array_equal(before[keep], after[keep])  # outside the turned blocks, byte for byte
    again = Reader("eng_Latn").read(translated)  # the translation stands as the text stood
    assert "OLD TOWN" in " ".join(b.text for b in again)
    assert all(abs((b.frame.angle + turn + 180) % 360 - 180) < 1 for b in again)
    x0, y0, x1, y1 = min(again, key=lambda b: b.box[1]).box  # the first line where the first line was, both upright
    left, top, right, bottom = min(blocks, key=lambda b: b.box[1]).box
    assert abs(x0 - left) < 10 and top - 5 <= y0 < bottom and x1 <= right + 5


def test_a_picture_that_decodes_too_large_is_refused_in_one_line(tmp_path):
    bomb = tmp_path / "bomb.png"
    Image.new("1", (12000, 12000)).save(bomb)  # 144 megapixels in a few kilobytes
    assert bomb.stat().st_size < 100_000
    with pytest.raises(DocumentError, match=r"^the picture is 12000 x 12000 pixels; the limit is 100 megapixels"):
        translate_document(bomb, tmp_path / "bomb.fra_Latn.png", upper_keeping_tags, options={"source": "eng_Latn"})
    assert not (tmp_path / "bomb.fra_Latn.png").exists()


def test_not_a_picture_and_no_text_are_one_line_each(tmp_path):
    fake = tmp_path / "photo.jpg"
    fake.write_bytes(b"not a JPEG at all")
    with pytest.raises(DocumentError, match="^not a picture Pillow can read"):
        translate_document(fake, tmp_path / "out.png", upper_keeping_tags, options={"source": "eng_Latn"})
    blank = tmp_path / "blank.png"
    Image.new("RGB", (400, 300), BACKGROUND).save(blank)
    with pytest.raises(DocumentError, match=r"^no text to translate \(OCR found no text in the picture\)$"):
        translate_document(blank, tmp_path / "blank.fra_Latn.png", upper_keeping_tags, options={"source": "eng_Latn"})


def test_dragoman_translate_reads_a_picture_with_the_real_engine(tiny_checkpoint, tmp_path, capsys):
    source = tmp_path / "sign.jpg"
    make_scan(ENGLISH, "eng_Latn").save(source, quality=95)
    args = ["translate", "--model", str(tiny_checkpoint), "--from", "eng_Latn", "--to", "fra_Latn", "--device", "cpu",
            "--dtype", "float32", "--beams", "1", "--max-length", "12", str(source)]
    assert main(args) == 0
    out = tmp_path / "sign.fra_Latn.png"
    assert str(out) in capsys.readouterr().out
    assert Image.open(out).size == Image.open(source).size


def make_scanned_pdf(path, scans):
    """A PDF of A5 pages, each only a scan (a PNG) covering it, as a scanner's software makes them."""
    from reportlab.lib.pagesizes import A5
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A5)
    for scan in scans:
        c.drawImage(ImageReader(scan), 0, 0, width=A5[0], height=A5[1])
        c.showPage()
    c.save()


def page_text_boxes(path):
    """(text, bbox) of each text box pdfminer finds on each page of the PDF."""
    from pdfminer.high_level import extract_pages
    from pdfminer.layout import LTTextBox

    return [[(box.get_text(), box.bbox) for box in page if isinstance(box, LTTextBox)] for page in extract_pages(path)]


def test_a_scanned_pdf_is_read_by_ocr_and_its_translation_set_where_the_text_was(tmp_path):
    import pikepdf

    source = tmp_path / "scan.pdf"
    make_scanned_pdf(source, [make_scan(ENGLISH + [""] * 6, "eng_Latn", seed=1), make_scan([""] * 8, "eng_Latn", seed=2)])
    out = translate_document(source, tmp_path / "scan.fra_Latn.pdf", upper_keeping_tags, options={"source": "eng_Latn"})
    with pikepdf.open(source) as before, pikepdf.open(out) as after:
        assert len(after.pages) == 2 and [p.mediabox for p in after.pages] == [p.mediabox for p in before.pages]
        for old, new in zip(before.pages, after.pages):  # each page's picture byte for byte
            a, b = (page.Resources.XObject for page in (old, new))
            assert [x.read_raw_bytes() for x in a.values()] == [x.read_raw_bytes() for x in b.values()]
    boxes = page_text_boxes(out)
    text, (x0, y0, x1, y1) = boxes[0][0]
    assert "OLD TOWN" in text  # the English page's translation, at the top left where its text was
    from reportlab.lib.pagesizes import A5

    assert x0 < A5[0] * 0.15 and y1 > A5[1] * 0.75
    assert boxes[1] == []  # a scan of a blank page: nothing read, nothing drawn


def test_a_scan_under_an_invisible_ocr_layer_is_translated_from_that_layer(tmp_path):
    import pikepdf
    from reportlab.lib.pagesizes import A5
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    scan = make_scan(ENGLISH + [""] * 6, "eng_Latn", angle=0)
    source = tmp_path / "searchable.pdf"
    c = canvas.Canvas(str(source), pagesize=A5)
    c.drawImage(ImageReader(scan), 0, 0, width=A5[0], height=A5[1])
    scale = A5[0] / scan.width
    for number, line in enumerate(ENGLISH):  # where an OCR program puts its words: over the picture's
        text = c.beginText(80 * scale, A5[1] - (60 + 70 * number + 40) * scale)
        text.setTextRenderMode(3)
        text.setFont("Helvetica", 40 * scale)
        text.textLine(line)
        c.drawText(text)
    c.showPage()
    c.save()
    out = translate_document(source, tmp_path / "searchable.fra_Latn.pdf", upper_keeping_tags)
    with pikepdf.open(source) as before, pikepdf.open(out) as after:
        a, b = before.pages[0].Resources.XObject, after.pages[0].Resources.XObject
        assert [x.read_raw_bytes() for x in a.values()] == [x.read_raw_bytes() for x in b.values() if x.Subtype == "/Image"]
        content = after.pages[0].Contents.read_bytes()
    (text, bbox), *rest = page_text_boxes(out)[0]
    assert "OLD TOWN" in text and "old town" not in text  # the hidden words gone, their translation shown
    cover = re.search(rb"q ([\d.]+) ([\d.]+) ([\d.]+) rg [\d. -]+ re f Q", content)
    assert cover and all(abs(float(v) * 255 - w) < 12 for v, w in zip(cover.groups(), BACKGROUND))
    assert bbox[0] < 80 * scale + 5 and bbox[3] > A5[1] - 140 * scale


def test_reading_scans_reports_each_page_and_a_stop_ends_it_with_nothing_written(tmp_path):
    from dragoman.app.documents import Cancelled

    source = tmp_path / "two.pdf"
    make_scanned_pdf(source, [make_scan(ENGLISH + [""] * 6, "eng_Latn", seed=1), make_scan(ENGLISH[::-1] + [""] * 6, "eng_Latn", seed=3)])
    pages = []
    translate_document(source, tmp_path / "two.fra_Latn.pdf", upper_keeping_tags, options={"source": "eng_Latn"},
                       reading=lambda done, total: pages.append((done, total)))
    assert pages == [(0, 2), (1, 2), (2, 2)]

    def stop_after_one(done, total):
        if done == 1:
            raise Cancelled()

    with pytest.raises(Cancelled):
        translate_document(source, tmp_path / "stopped.pdf", upper_keeping_tags, options={"source": "eng_Latn"},
                           reading=stop_after_one)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["two.fra_Latn.pdf", "two.pdf"]
    pictured = []
    picture = tmp_path / "one.png"
    make_scan(ENGLISH, "eng_Latn").save(picture)
    translate_document(picture, tmp_path / "one.fra_Latn.png", upper_keeping_tags, options={"source": "eng_Latn"},
                       reading=lambda done, total: pictured.append((done, total)))
    assert pictured == [(0, 1), (1, 1)]


def test_scanned_pages_are_read_several_at_once_and_placed_as_one_at_a_time_places_them(tmp_path, monkeypatch):
    """After the first page, pages are read at once (each Tesseract process on one thread), their
    blocks placed page by page: the same blocks in the same order as reading one page at a time,
    and the progress said in page order."""
    import threading

    from dragoman.app.documents import pdf
    from dragoman.app.documents.ocr import Reader as OcrReader

    source = tmp_path / "four.pdf"
    make_scanned_pdf(source, [make_scan(lines + [""] * 4, "eng_Latn", seed=seed)
                              for seed, lines in enumerate([ENGLISH, ENGLISH[::-1], ENGLISH, ENGLISH[::-1]])])
    reading, most, lock = [0], [0], threading.Lock()
    read = OcrReader.read

    def counted_read(self, image):
        with lock:
            reading[0] += 1
            most[0] = max(most[0], reading[0])
        try:
            return read(self, image)
        finally:
            with lock:
                reading[0] -= 1

    def blocks(at_once):
        monkeypatch.setattr(pdf, "OCR_PAGES_AT_ONCE", at_once)
        monkeypatch.setattr(pdf, "usable_cores", lambda: 4)
        progress = []
        document = pdf.extract(source, source="eng_Latn", reading=lambda done, total: progress.append(done))
        try:
            document.segments  # the pages read
            assert progress == [0, 1, 2, 3, 4]
            return [(page.index, block.text, block.bbox, block.cover) for page in document.pages for block in page.blocks]
        finally:
            document.close()

    monkeypatch.setattr(OcrReader, "read", counted_read)
    one_at_a_time = blocks(1)
    assert most[0] == 1
    assert blocks(3) == one_at_a_time and {page for page, *_ in one_at_a_time} == {0, 1, 2, 3}
    assert most[0] > 1  # the last three pages were read at once


def test_a_picture_through_the_session_counts_its_reading_then_its_sentences_and_stops_before_the_engine(
        translator, tmp_path, monkeypatch):
    from dragoman.app.documents import Cancelled
    from dragoman.app.session.jobs import DocumentJob
    from dragoman.app.session.session import TranslationSession

    picture = tmp_path / "note.png"
    make_scan(ENGLISH, "eng_Latn").save(picture)
    job = DocumentJob(picture, tmp_path / "note.fra_Latn.png", "eng_Latn", "fra_Latn", options={"max_length": 12})
    progress = []
    TranslationSession(translator, None).translate_document(job, progress=lambda done, total: progress.append((done, total)))
    assert progress[:2] == [(0, 1), (1, 1)] and progress[-1][0] == progress[-1][1] >= 2  # pages, then sentences
    assert Image.open(job.output_path).size == Image.open(picture).size

    calls = []
    monkeypatch.setattr(translator, "translate", lambda *a, **k: calls.append(a))
    stopped = DocumentJob(picture, tmp_path / "stopped.png", "eng_Latn", "fra_Latn")
    with pytest.raises(Cancelled):
        TranslationSession(translator, None).translate_document(stopped, should_stop=lambda: True)
    assert not calls and not stopped.output_path.exists()


def test_without_tesseract_a_pdf_of_text_and_scans_is_translated_without_its_scans_which_a_note_says(tmp_path, monkeypatch):
    import dragoman.app.documents.ocr as ocr
    from reportlab.lib.pagesizes import A5
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    def absent():
        raise DocumentError("reading pictures of text needs Tesseract OCR, which is not installed")

    monkeypatch.setattr(ocr, "installed_models", absent)
    source = tmp_path / "mixed.pdf"
    c = canvas.Canvas(str(source), pagesize=A5)
    c.setFont("Helvetica", 11)
    c.drawString(40, 500, "A page of real text.")
    c.showPage()
    c.drawImage(ImageReader(make_scan(ENGLISH + [""] * 6, "eng_Latn")), 0, 0, width=A5[0], height=A5[1])
    c.showPage()
    c.save()
    notes = []
    out = translate_document(source, tmp_path / "mixed.fra_Latn.pdf", upper_keeping_tags,
                             options={"source": "eng_Latn"}, note=notes.append)
    assert notes == ["1 page of pictures without text left as they are: reading pictures of text needs Tesseract OCR, which is not installed"]
    first, second = page_text_boxes(out)
    assert "A PAGE OF REAL TEXT." in first[0][0] and second == []
    scan_only = tmp_path / "scan.pdf"
    make_scanned_pdf(scan_only, [make_scan(ENGLISH, "eng_Latn")])
    with pytest.raises(DocumentError, match="^reading pictures of text needs Tesseract OCR"):
        translate_document(scan_only, tmp_path / "scan.fra_Latn.pdf", upper_keeping_tags, options={"source": "eng_Latn"})


def render(path, page, scale=2):
    """A page of the PDF rendered as an RGB array (pdfium), `scale` pixels a point."""
    import pypdfium2

    document = pypdfium2.PdfDocument(str(path))
    try:
        return np.asarray(document[page].render(scale=scale).to_pil().convert("RGB"))
    finally:
        document.close()


def make_photo(width=400, height=300):
    """A picture without text: a gradient and a few discs."""
    x = np.linspace(0, 1, width)[None, :, None]
    y = np.linspace(0, 1, height)[:, None, None]
    photo = Image.fromarray((255 * np.concatenate([x + 0 * y, y + 0 * x, (x + y) / 2], axis=2)).astype(np.uint8))
    draw = ImageDraw.Draw(photo)
    for k in range(4):
        draw.ellipse((40 + 80 * k, 80, 110 + 80 * k, 150 + 20 * k), fill=(200, 60 + 40 * k, 90))
    return photo


SCALE = 500 / 1200  # the pasted scan at 0.42 points a pixel: its 40 px text is 17 pt
SCAN_BOX, PHOTO_BOX = (60, 420, 560, 420 + make_scan(ENGLISH, "eng_Latn").height * SCALE), (60, 60, 460, 360)


def make_report(path):
    """Two A4 pages of text, each with a pasted scan and a photo below it; on the second an invisible
    OCR layer lies over the scan, as OCR programs write it."""
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    scan = make_scan(ENGLISH, "eng_Latn", seed=4)
    c = canvas.Canvas(str(path), pagesize=A4)
    for number in range(2):
        c.setFont("Helvetica", 14)
        c.drawString(60, 780, "A page of real text.")
        c.drawString(60, 760, "The picture below is a scan of a letter.")
        c.drawImage(ImageReader(scan), SCAN_BOX[0], SCAN_BOX[1], width=500, height=SCAN_BOX[3] - SCAN_BOX[1])
        c.drawImage(ImageReader(make_photo()), PHOTO_BOX[0], PHOTO_BOX[1], width=400, height=300)
        if number == 1:
            for line_number, line in enumerate(ENGLISH):
                text = c.beginText(SCAN_BOX[0] + 80 * SCALE, SCAN_BOX[3] - (60 + 70 * line_number + 40) * SCALE)
                text.setTextRenderMode(3)
                text.setFont("Helvetica", 40 * SCALE)
                text.textLine(line)
                c.drawText(text)
        c.showPage()
    c.save()


def rendered_area(box, height_points, scale=2, pad=-2):
    """The slices of a page rendered at `scale` that show `box` (PDF points), shrunk by -`pad` pixels."""
    return (slice(int(scale * (height_points - box[3])) - pad, int(scale * (height_points - box[1])) + pad),
            slice(int(scale * box[0]) - pad, int(scale * box[2]) + pad))


def assert_pictures_kept(source, out):
    """The translated PDF's pages hold the source's pictures byte for byte and, rendered, show the photo
    and the scan's red square as they were."""
    import pikepdf
    from reportlab.lib.pagesizes import A4

    with pikepdf.open(source) as before, pikepdf.open(out) as after:
        assert len(after.pages) == len(before.pages)
        for old, new in zip(before.pages, after.pages):
            a, b = old.Resources.XObject, new.Resources.XObject
            assert {k: a[k].read_raw_bytes() for k in a} == {k: b[k].read_raw_bytes() for k in a}
    mark = (SCAN_BOX[0] + 1150 * SCALE, SCAN_BOX[3] - 45 * SCALE, SCAN_BOX[0] + 1190 * SCALE, SCAN_BOX[3] - 5 * SCALE)
    for number in range(2):
        before, after = render(source, number), render(out, number)
        assert before.shape == after.shape
        for box in (PHOTO_BOX, mark):
            assert np.array_equal(before[rendered_area(box, A4[1])], after[rendered_area(box, A4[1])])


def test_a_page_of_text_with_a_pasted_scan_has_both_translated_and_the_rest_untouched(tmp_path):
    source = tmp_path / "report.pdf"
    make_report(source)
    out = translate_document(source, tmp_path / "report.fra_Latn.pdf", upper_keeping_tags, options={"source": "eng_Latn"})
    assert_pictures_kept(source, out)
    for number, boxes in enumerate(page_text_boxes(out)):
        text = " ".join(t for t, _ in boxes)
        assert "A PAGE OF REAL TEXT." in text and "THE PICTURE BELOW" in text
        assert text.count("OLD TOWN") == 1 and "old town" not in text, (number, text)  # the scan's text, once
        (x0, y0, x1, y1), = [box for t, box in boxes if "OLD TOWN" in t]
        assert SCAN_BOX[0] - 2 <= x0 < SCAN_BOX[0] + 100 * SCALE and SCAN_BOX[1] < y0 and y1 <= SCAN_BOX[3] + 2
        assert not any(t.strip() for t, (bx0, by0, bx1, by1) in boxes if by1 < PHOTO_BOX[3])  # nothing read in the photo


def test_a_page_of_text_with_a_pasted_scan_through_the_real_engine(tiny_checkpoint, tmp_path):
    source = tmp_path / "report.pdf"
    make_report(source)
    args = ["translate", "--model", str(tiny_checkpoint), "--from", "eng_Latn", "--to", "fra_Latn", "--device", "cpu",
            "--dtype", "float32", "--beams", "1", "--max-length", "12", str(source)]
    assert main(args) == 0
    out = tmp_path / "report.fra_Latn.pdf"
    assert_pictures_kept(source, out)
    import pikepdf

    with pikepdf.open(out) as pdf:  # on each page the scan's text covered (read by OCR; read from the layer)
        assert all(re.search(rb"rg [\d. -]+ re f Q", page.Contents.read_bytes()) for page in pdf.pages)


def test_a_picture_as_a_pdf_is_one_page_of_its_size_with_the_translation_as_text_where_the_text_was(tmp_path):
    import pikepdf

    source = tmp_path / "letter.png"
    scan = make_scan(ENGLISH, "eng_Latn")
    scan.save(source, dpi=(200, 200))
    blocks = extract(source, source="eng_Latn").blocks
    out = translate_document(source, tmp_path / "letter.fra_Latn.pdf", upper_keeping_tags,
                             options={"source": "eng_Latn", "picture_as": "pdf"})
    assert out.name == "letter.fra_Latn.pdf"
    with pikepdf.open(out) as pdf:
        assert len(pdf.pages) == 1
        assert [float(v) for v in pdf.pages[0].mediabox] == pytest.approx([0, 0, 1200 * 72 / 200, scan.height * 72 / 200], abs=0.01)  # PNG keeps dots a metre
        picture, = [x for x in pdf.pages[0].Resources.XObject.values() if x.Subtype == "/Image"]
        assert np.array_equal(np.asarray(pikepdf.PdfImage(picture).as_pil_image()), np.asarray(scan))  # lossless
    (boxes,) = page_text_boxes(out)
    assert len(boxes) == len(blocks) == 2
    points = 72 / 200
    for (text, (x0, y0, x1, y1)), block in zip(boxes, blocks):
        left, top, right, bottom = (v * points for v in block.box)
        assert text.startswith("T:") and text.upper() == text  # real text, the translation
        assert abs(x0 - left) < 3 and scan.height * points - bottom - 3 <= y0 and y1 <= scan.height * points - top + 8


def test_dragoman_translate_picture_as_pdf_with_the_real_engine(tiny_checkpoint, tmp_path, capsys):
    import pikepdf

    source = tmp_path / "sign.jpg"
    make_scan(ENGLISH, "eng_Latn").save(source, quality=95)
    args = ["translate", "--model", str(tiny_checkpoint), "--from", "eng_Latn", "--to", "fra_Latn", "--device", "cpu",
            "--dtype", "float32", "--beams", "1", "--max-length", "12", "--picture-as", "pdf", str(source)]
    assert main(args) == 0
    out = tmp_path / "sign.fra_Latn.pdf"
    assert str(out) in capsys.readouterr().out and not (tmp_path / "sign.fra_Latn.png").exists()
    with pikepdf.open(out) as pdf:  # a JPEG without a resolution: PDF_DPI
        assert len(pdf.pages) == 1 and [float(v) for v in pdf.pages[0].mediabox][2] == pytest.approx(1200 * 72 / 150)


def test_a_heading_does_not_run_on_into_the_text_under_it():
    """A heading without a full stop over a paragraph that starts in lower case (a drop cap read as
    a small letter, say) stays a block of its own: set at the paragraph's size it would not fit."""
    image = Image.new("RGB", (1400, 420), BACKGROUND)
    draw = ImageDraw.Draw(image)
    draw.text((80, 30), "Chapter Two", font=ImageFont.truetype(font_path(FONTS["eng_Latn"]), 120), fill=INK)
    font = ImageFont.truetype(font_path(FONTS["eng_Latn"]), 40)
    draw.text((80, 230), "and then we went down to the river", font=font, fill=INK)
    draw.text((80, 300), "where the boats were waiting for us.", font=font, fill=INK)
    blocks = Reader("eng_Latn").read(image)
    assert [b.text for b in blocks] == ["Chapter Two", "and then we went down to the river where the boats were waiting for us."]


def test_a_paragraph_wrapping_around_a_picture_is_cut_where_it_leaves_its_side():
    """Lines beside a picture, then lines under it: one box over them all would cover a corner of the
    picture, so they are two blocks; a paragraph whose box misses the picture stays one."""
    from dragoman.app.documents.ocr import _around

    boxes = [(420, 100), (420, 130), (40, 160), (40, 190)]  # (left, top) of four lines, 20 px high
    data = {"left": [b[0] for b in boxes], "top": [b[1] for b in boxes], "width": [800 - b[0] for b in boxes],
            "height": [20] * 4}
    lines = {(1, 1, n): [n] for n in range(4)}
    picture = (40, 20, 400, 150)
    assert [list(part) for part in _around(lines, data, [picture])] == [[(1, 1, 0), (1, 1, 1)], [(1, 1, 2), (1, 1, 3)]]
    assert len(_around(lines, data, [(40, 300, 400, 400)])) == 1


def test_a_scan_that_cannot_be_decoded_is_left_as_it_is_and_the_rest_translated_which_a_note_says(tmp_path):
    """A scanned page whose picture its filter cannot decode (here a broken JPEG; a JBIG2 scan where
    jbig2dec is not installed fails alike, as pdf.js's issue12963.pdf did) no longer stops the job:
    the page of text is translated, the scan kept as it was, and the notes say which and why. A PDF
    of such scans alone is refused with the same reason."""
    import pikepdf

    source = tmp_path / "mixed.pdf"
    make_scanned_pdf(source, [make_scan(ENGLISH, "eng_Latn")] * 2)
    with pikepdf.open(source, allow_overwriting_input=True) as pdf:
        page = pdf.pages[0]
        page.Contents = pdf.make_stream(b"BT /F1 11 Tf 40 500 Td (A page of real text.) Tj ET")
        page.Resources.Font = pikepdf.Dictionary(F1=pdf.make_indirect(pikepdf.Dictionary(
            Type=pikepdf.Name.Font, Subtype=pikepdf.Name.Type1, BaseFont=pikepdf.Name.Helvetica)))
        for image in pdf.pages[1].get_images().values():
            image.write(b"\xff\xd8 not a jpeg after all", filter=pikepdf.Name.DCTDecode)
        scan = bytes(next(iter(pdf.pages[1].get_images().values())).read_raw_bytes())
        pdf.save(source)
    notes = []
    out = translate_document(source, tmp_path / "mixed.fra_Latn.pdf", upper_keeping_tags,
                             options={"source": "eng_Latn"}, note=notes.append)
    [note] = notes
    assert note.startswith("1 page of pictures without text left as they are: page 2: its scanned picture cannot be decoded (")
    first, second = page_text_boxes(out)
    assert "A PAGE OF REAL TEXT." in first[0][0] and second == []
    with pikepdf.open(out) as translated:
        assert bytes(next(iter(translated.pages[1].get_images().values())).read_raw_bytes()) == scan
    scans_only = tmp_path / "scans.pdf"
    with pikepdf.open(source) as pdf:
        del pdf.pages[0]
        pdf.save(scans_only)
    with pytest.raises(DocumentError, match="^page 1: its scanned picture cannot be decoded"):
        translate_document(scans_only, tmp_path / "scans.fra_Latn.pdf", upper_keeping_tags, options={"source": "eng_Latn"})
