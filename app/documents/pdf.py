"""PDF (.pdf): translated into a PDF with the original layout (STEM.<to>.pdf), or into plain text.

PDF out (the default): pikepdf opens and checks the file (see `open_checked`), pdf_blocks.py reads
each page's text as blocks with pdfminer.six, a range of pages at a time as the translation asks
for its segments (`PdfDocument.segment_stream`), pdf_write.py replaces each translated block's text
in place. A sentence that runs from one block into the next (into the next column, onto the next page)
is one segment; its translation is shared among the blocks by their lengths. With `bilingual`,
each original page is followed by its translation (STEM.<to>.bilingual.pdf). A page without text
that is a picture (a scan) is read by OCR (ocr.py, in the `source` language): its blocks are covered
in their background colour and their translations set in their place, the picture untouched
(`ScanReading`); a scan under an invisible OCR text layer is translated from that layer, its text
covered in the picture's colours likewise.

Text out (`pdf_as="text"`, STEM.<to>.txt): pypdf extracts each page's text; lines are joined into
paragraphs (a hyphen at a line end joins the word), pages are separated by a blank line and a form
feed. pypdf's text marks no paragraph breaks (it never gives a blank line), so a paragraph ends
where the gap down to the next line is clearly wider than the page's usual line spacing.

Encrypted PDFs open only when they have no user password. The PDF libraries' own log lines are
silenced: a bad file is one DocumentError line.
"""

from __future__ import annotations

import io
import logging
import re
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Generator, Iterator

from dragoman.app.documents.pdf_blocks import Page, continues, cut_runs, join_lines, read_page_ranges, usable_cores
from dragoman.app.documents.safety import DocumentError, check_file
from dragoman.app.documents.segments import Document, ReadAsAsked, Run, Segment
from dragoman.app.documents.text import SlotDocument
from dragoman.app.wording import counted, one_line

if TYPE_CHECKING:
    from PIL import Image

    from dragoman.app.documents.ocr import Reader

EXTENSIONS = (".pdf",)
OPTIONS = ("pdf_as", "bilingual", "source", "reading")
MAX_PAGES = 5000
MAX_STREAM_BYTES = 64 * 1024 * 1024  # one content stream, font or form, inflated
MAX_INFLATED_BYTES = 512 * 1024 * 1024  # all of them together (images are never inflated): pdfminer keeps them
MAX_PAGE_CONTENT_BYTES = 16 * 1024 * 1024  # a page's content streams, decoded: a dense map page holds a few MiB
MAX_CONTENT_BYTES = 256 * 1024 * 1024  # all pages' content streams, decoded (pdfminer keeps them while it reads)
SCAN_COVER = 0.5  # a page without text whose largest picture covers this share of it is a scan, read by OCR
PICTURE_COVER = 0.1  # a picture covering this share of a page with text is read by OCR too (a pasted scan, a figure)
OCR_PAGES_AT_ONCE = 4  # pages OCR reads at once, at most one a core: each holds its decoded pictures

for _name in ("pypdf", "pdfminer", "fontTools"):
    logging.getLogger(_name).setLevel(logging.CRITICAL)


def output_suffix(options: dict) -> str:
    if options.get("pdf_as") == "text":
        return ".txt"
    return ".bilingual.pdf" if options.get("bilingual") else ".pdf"


def _check_header(path: Path) -> None:
    check_file(path)
    with open(path, "rb") as f:
        if not f.read(1024).lstrip().startswith(b"%PDF"):
            raise DocumentError("not a PDF (it does not start with %PDF)")


def extract(path: Path, pdf_as: str = "pdf", bilingual: bool = False, source: str = "auto",
            reading: Callable[[int, int], None] | None = None) -> Document:
    """The PDF, checked and opened; its pages are read as its segments are asked for
    (`PdfDocument`). `reading(done, total)` follows the pages OCR reads."""
    _check_header(path)
    if pdf_as == "text":
        return _extract_text(path)
    import pikepdf

    from dragoman.app.documents.pdf_forms import inline_text_forms
    from dragoman.app.documents.pdf_write import save

    pdf = open_checked(path)
    try:
        inline_text_forms(pdf)  # text drawn by form XObjects becomes the page's own (app.documents.pdf_forms)
        buffer = io.BytesIO()
        save(pdf, buffer, stream_decode_level=pikepdf.StreamDecodeLevel.none)
    except pikepdf.PdfError as e:
        pdf.close()
        raise DocumentError(f"corrupt or unreadable PDF ({e})".splitlines()[0]) from None
    except BaseException:
        pdf.close()
        raise
    return PdfDocument(pdf, buffer.getvalue(), bilingual, ScanReading(pdf, source, reading))


class UndecodablePicture(DocumentError):
    """A picture whose data its filter cannot decode (a broken stream, or JBIG2 without jbig2dec):
    left as it is, and said in the job's notes."""


class ScanReading:
    """Pictures of text on the pages, read by OCR as the pages come, range by range: a page without
    text whose largest picture covers at least SCAN_COVER of it (a scan), and on a page with text
    each picture covering at least PICTURE_COVER of it (a pasted scan, a figure of text) that no
    invisible OCR layer lies over. Each block found becomes a block of the page, its place covered in
    its background colour before its translation is set (`Block.cover`); on a page with text, a
    block found where the page's text already is (text set over a picture) is left to that text. An
    invisible OCR layer over such a picture is translated instead, its blocks given the picture's
    colours there; an invisible block over no such picture stays as it is. `reading(done, total)`
    follows the pages OCR reads, the total growing as pages come. Where OCR cannot read (no
    Tesseract, no model for the language's script) a PDF with text is translated without the
    pictures' text, which `notes` says; one of scans alone is refused (`check_read`)."""

    def __init__(self, pdf, source: str, reading: Callable[[int, int], None] | None = None):
        self.pdf, self.source, self.reading = pdf, source, reading
        self.reader: Reader | None = None
        self.unreadable = ""  # why OCR cannot read here
        self.undecodable = ""  # why a picture could not be read, the first such
        self.planned = self.done = 0  # pages to read by OCR, so far
        self.unread_scans = self.unread_pictures = 0
        self.scanned = False  # a page without text had pictures

    def read(self, pages) -> None:
        """The pictures of these pages read, their blocks added to the pages."""
        plans = []  # (page, its pictures to read)
        for page in pages:
            pictures = _pictures(self.pdf, page)
            hidden = [block for block in page.blocks if block.invisible and block.translate]
            if hidden:
                _colour_hidden(hidden, pictures)
            if pictures:
                x0, y0, x1, y1 = (float(v) for v in self.pdf.pages[page.index].mediabox)
                plans.append((page, _to_read(page, pictures, (x1 - x0) * (y1 - y0))))
            self.scanned = self.scanned or bool(page.images and not page.blocks)
        plans = [(page, pictures) for page, pictures in plans if pictures]
        if not plans:
            return
        self.planned += len(plans)
        self.tell(self.done)
        if self.reader is None and not self.unreadable:
            from dragoman.app.documents.ocr import Reader

            try:
                self.reader = Reader(self.source)
            except DocumentError as e:
                self.unreadable = str(e)
        if self.reader is None:
            for page, pictures in plans:
                if page.blocks:
                    self.unread_pictures += len(pictures)
                else:
                    self.unread_scans += 1
                self.tell(self.done + 1)
        else:
            first = self.done
            scans = {id(page) for page, _ in plans if not page.blocks}
            for page, reason in _ocr_pages(self.reader, plans, lambda done, total: self.tell(first + done)):
                self.undecodable = self.undecodable or reason
                if id(page) in scans:
                    self.unread_scans += 1
                else:
                    self.unread_pictures += 1

    def tell(self, done: int) -> None:
        self.done = done
        if self.reading is not None:
            self.reading(done, self.planned)

    def check_read(self, pages) -> None:
        """Once every page is read: DocumentError where none has text to translate."""
        if any(page.blocks for page in pages):
            return
        if self.why_unread:
            raise DocumentError(self.why_unread)
        raise DocumentError("no text to translate (OCR found no text in the scanned pages)" if self.scanned
                            else "no text to translate (the PDF has no text)")

    @property
    def notes(self) -> tuple[str, ...]:
        unread = ([f"{counted(self.unread_scans, 'page')} of pictures without text"] if self.unread_scans else []) + \
            ([f"{counted(self.unread_pictures, 'picture')} on pages of text"] if self.unread_pictures else [])
        return (f"{' and '.join(unread)} left as they are: {self.why_unread}",) if unread else ()

    @property
    def why_unread(self) -> str:
        """Why pictures were left unread: OCR cannot read here, or a picture could not be decoded."""
        return self.unreadable or self.undecodable


@dataclass
class Picture:
    """An image XObject drawn on a page, upright or turned by a multiple of 90 degrees (or flipped)."""

    stream: Any  # pikepdf.Stream
    placement: tuple[float, float, float, float]  # its box on the page, in pdfminer's coordinates
    turn: Image.Transpose | None  # the Pillow transpose that shows the decoded picture as it is placed (None: as decoded)
    page_number: int

    @property
    def area(self) -> float:
        x0, y0, x1, y1 = self.placement
        return (x1 - x0) * (y1 - y0)

    def decoded(self):
        """The picture as the page shows it, RGB; its size is checked before it is decoded."""
        import pikepdf

        from dragoman.app.documents.picture import MAX_PIXELS

        width, height = int(self.stream.get("/Width", 0)), int(self.stream.get("/Height", 0))
        if width * height > MAX_PIXELS:
            raise DocumentError(f"page {self.page_number}: a picture of {width} x {height} pixels; the limit is "
                                f"{MAX_PIXELS // 10**6} megapixels")
        most = 8 * width * height + 65536  # 16-bit RGBA and some: a stream that inflates to more is a bomb
        if decoded_size(self.stream, most) > most:
            raise DocumentError(f"page {self.page_number}: a picture inflates to more than its size says: a decompression bomb")
        try:
            image = pikepdf.PdfImage(self.stream).as_pil_image()
        except Exception as e:  # pikepdf's decoders raise kinds of their own (JBIG2 without jbig2dec: DependencyError)
            reason = re.sub(r" ?<[^<>]* at 0x[0-9a-f]+>", "", one_line(e))  # PIL names its buffer: no address in a note
            raise UndecodablePicture(f"page {self.page_number}: its scanned picture cannot be decoded ({reason})") from None
        image = image.convert("RGB")
        return image if self.turn is None else image.transpose(self.turn)


def _pictures(pdf, page) -> list[Picture]:
    """The page's image XObjects drawn on it (not inside forms) upright, turned by a multiple of 90
    degrees or flipped (others cannot be read as a rectangle), the largest first."""
    import pikepdf
    from PIL import Image

    xobjects = pdf.pages[page.index].obj.get("/Resources", pikepdf.Dictionary()).get("/XObject", pikepdf.Dictionary())
    pictures = []
    for name, placement, (a, b, c, d, _, _) in page.placed:
        stream = xobjects.get("/" + name)
        if not isinstance(stream, pikepdf.Stream) or stream.get("/Subtype") != pikepdf.Name.Image:
            continue
        # where the picture's right (a, b) and its down (-c, -d) go on the page (PDF's y goes up)
        if abs(b) < 1e-6 * abs(a) and abs(c) < 1e-6 * abs(d):
            turn = {(True, True): None, (False, True): Image.Transpose.FLIP_LEFT_RIGHT,
                    (True, False): Image.Transpose.FLIP_TOP_BOTTOM, (False, False): Image.Transpose.ROTATE_180}[(a > 0, d > 0)]
        elif abs(a) < 1e-6 * abs(b) and abs(d) < 1e-6 * abs(c):
            turn = {(True, False): Image.Transpose.ROTATE_90, (False, True): Image.Transpose.ROTATE_270,
                    (True, True): Image.Transpose.TRANSVERSE, (False, False): Image.Transpose.TRANSPOSE}[(b > 0, c > 0)]
        else:
            continue
        pictures.append(Picture(stream, placement, turn, page.index + 1))
    return sorted(pictures, key=lambda p: -p.area)


def _to_read(page, pictures: list[Picture], area: float) -> list[Picture]:
    """The pictures of the page (of `area` square points) OCR reads: a scan's (a page without text), or
    those large enough on a page with text that no invisible OCR layer lies over."""
    if not page.blocks:
        return pictures[:1] if pictures[0].area >= SCAN_COVER * area else []
    return [p for p in pictures if p.area >= PICTURE_COVER * area
            and not any(block.invisible and _inside(block.bbox, p.placement) for block in page.blocks)]


def _inside(box, outer) -> bool:
    """The centre of `box` lies in `outer`."""
    x, y = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    return outer[0] <= x <= outer[2] and outer[1] <= y <= outer[3]


def _overlaps(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _ocr_pages(reader, plans: list, reading: Callable[[int, int], None] | None) -> list[tuple[Page, str]]:
    """Each page's pictures read by OCR, the blocks found added to the page (`place_blocks`), page
    after page; `reading(done, total)` after each. The first page is read first (with source "auto"
    it chooses the model), then up to OCR_PAGES_AT_ONCE at a time: each Tesseract process runs on
    one thread (app.documents.ocr), so pages read at once use the cores. Pictures are decoded one at
    a time, since qpdf's objects are for one thread; a stop (`reading` raising) ends the reading
    once the pages being read are done. Returns (page, why) for each picture that could not be
    decoded, left as it is."""
    decoding = threading.Lock()
    undecodable: list[tuple[Page, str]] = []

    def read(pictures: list[Picture]) -> tuple[list[tuple[Picture, tuple[int, int], list]], list[str]]:
        """(each picture with its size and the blocks read in it, why each other could not be decoded)"""
        found, failed = [], []
        for picture in pictures:
            try:
                with decoding:
                    image = picture.decoded()
            except UndecodablePicture as e:
                failed.append(str(e))
                continue
            found.append((picture, image.size, reader.read(image)))
        return found, failed

    def place(page, read_back) -> None:
        found, failed = read_back
        text = [block.bbox for block in page.blocks]  # the page's own text, before what OCR adds
        for picture, size, blocks in found:
            place_blocks(page, blocks, picture.placement, size, text)
        undecodable.extend((page, why) for why in failed)

    (first, pictures), rest = plans[0], plans[1:]
    place(first, read(pictures))
    if reading is not None:
        reading(1, len(plans))
    workers = min(OCR_PAGES_AT_ONCE, usable_cores())
    with ThreadPoolExecutor(workers, thread_name_prefix="dragoman-ocr") as pool:
        futures = [pool.submit(read, pictures) for _, pictures in rest]
        try:
            for done, ((page, _), future) in enumerate(zip(rest, futures), 2):
                place(page, future.result())
                if reading is not None:
                    reading(done, len(plans))
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    return undecodable


def place_blocks(page, found: list, placement: tuple[float, float, float, float], size: tuple[int, int], text: list) -> None:
    """Blocks read in a picture (ocr.TextBlock) of `size` pixels placed on the page at `placement`, added
    to the page's blocks as blocks whose place is covered before their translation is set; but for
    those where `text` (boxes of the page's own text) already is. A block read turned is set level in its place."""
    from dragoman.app.documents.ocr import LEADING
    from dragoman.app.documents.pdf_blocks import Block, Line

    fx0, fy0, fx1, fy1 = placement
    sx, sy = (fx1 - fx0) / size[0], (fy1 - fy0) / size[1]
    for block in found:
        left, top, right, bottom = block.bounds()
        em = block.size * sy
        # the box as the writer sets lines in it: from the first line's top, `lines` lines LEADING apart
        y1 = fy1 - top * sy + 0.1 * em
        y0 = min(fy1 - bottom * sy, y1 - block.lines * LEADING * em)
        x0, x1 = fx0 + left * sx, fx0 + right * sx
        if any(_overlaps((x0, fy1 - bottom * sy, x1, fy1 - top * sy), box) for box in text):
            continue
        line = Line([(block.text, (False, False), None)], x0, y0, x1, y1, em, y0 + 0.25 * em)
        page.blocks.append(Block(page.index, [line], color=tuple(v / 255 for v in block.ink),
                                 align="right" if block.rtl else "left", cover=tuple(v / 255 for v in block.background)))


def han_face(text: str) -> str:
    """The Noto CJK face for Han characters: the Japanese or Korean one where the text has kana or hangul."""
    return ("Noto Sans CJK JP" if re.search(r"[\u3040-\u30ff]", text) else
            "Noto Sans CJK KR" if re.search(r"[\uac00-\ud7af]", text) else "Noto Sans CJK SC")


def _colour_hidden(blocks, pictures: list[Picture]) -> None:
    """The colours of the picture under each block of an invisible OCR layer: its background (what
    covers it) and its ink (what the translation is set in). A block over no picture (invisible text
    that is no OCR layer) stays as it is."""
    import numpy as np

    from dragoman.app.documents.ocr import colours

    decoded: dict[int, Any] = {}
    for block in blocks:
        picture = next((p for p in pictures if _inside(block.bbox, p.placement)), None)
        if picture is None:
            block.translate = False
            continue
        if id(picture) not in decoded:
            decoded[id(picture)] = np.asarray(picture.decoded())
        pixels = decoded[id(picture)]
        fx0, fy0, fx1, fy1 = picture.placement
        sx, sy = pixels.shape[1] / (fx1 - fx0), pixels.shape[0] / (fy1 - fy0)
        x0, y0, x1, y1 = block.bbox
        box = (max(int((x0 - fx0) * sx), 0), max(int((fy1 - y1) * sy), 0),
               min(int((x1 - fx0) * sx) + 1, pixels.shape[1]), min(int((fy1 - y0) * sy) + 1, pixels.shape[0]))
        background, ink = colours(pixels, box)
        block.cover, block.color = tuple(v / 255 for v in background), tuple(v / 255 for v in ink)


def open_checked(path: Path):
    """The PDF opened with pikepdf; password-protected, corrupt and hostile files refused."""
    import pikepdf

    try:
        pdf = pikepdf.open(path)
    except pikepdf.PasswordError:
        raise DocumentError("password-protected PDF") from None
    except (pikepdf.PdfError, OSError, ValueError, RecursionError) as e:
        reason = (str(e).splitlines() or [type(e).__name__])[0].replace(f"{path}: ", "")  # qpdf starts with the path
        raise DocumentError(f"corrupt or unreadable PDF ({reason})") from None
    try:
        count = len(pdf.pages)
        if count > MAX_PAGES:
            raise DocumentError(f"too many pages ({count}; the limit is {MAX_PAGES})")
        if count == 0:
            raise DocumentError("corrupt PDF (it has no pages)")
        _check_streams(pdf)
    except DocumentError:
        pdf.close()
        raise
    except (pikepdf.PdfError, RecursionError, ValueError, TypeError) as e:
        pdf.close()
        raise DocumentError(f"corrupt or unreadable PDF ({e})".splitlines()[0]) from None
    return pdf


def _check_streams(pdf) -> None:
    """Refuse decompression bombs: every stream the reader decodes (all but images; an "image" a page
    uses as its content or a font uses as its program too), decoded through its whole filter chain
    with a bound rather than trusted; and a page whose content streams together decode to more than
    MAX_PAGE_CONTENT_BYTES (text and drawing operators the layout reader would spend minutes on), or
    pages whose content streams together decode to more than MAX_CONTENT_BYTES."""
    import pikepdf

    used = set()  # the streams read as content or font programs, whatever their /Subtype says
    content_bytes = 0
    for page in pdf.pages:
        contents = page.obj.get("/Contents")
        streams = list(contents) if isinstance(contents, pikepdf.Array) else [contents] if contents is not None else []
        page_bytes = 0
        for stream in streams:
            if isinstance(stream, pikepdf.Stream):
                used.add(stream.objgen)
                page_bytes += decoded_size(stream, MAX_PAGE_CONTENT_BYTES - page_bytes)
                if page_bytes > MAX_PAGE_CONTENT_BYTES:
                    raise DocumentError(f"a page's content decodes to over {MAX_PAGE_CONTENT_BYTES // 2**20} MiB of "
                                        "text and drawing operators, which is refused")
        content_bytes += page_bytes
        if content_bytes > MAX_CONTENT_BYTES:
            raise DocumentError(f"its pages' content decodes to over {MAX_CONTENT_BYTES // 2**20} MiB of text and "
                                "drawing operators, which is refused")
    for obj in pdf.objects:
        if isinstance(obj, pikepdf.Dictionary) and obj.get("/Type") == pikepdf.Name.FontDescriptor:
            used.update(obj[name].objgen for name in ("/FontFile", "/FontFile2", "/FontFile3")
                        if isinstance(obj.get(name), pikepdf.Stream))
    total = 0
    for obj in pdf.objects:
        if not isinstance(obj, pikepdf.Stream) or (obj.get("/Subtype") == pikepdf.Name.Image and obj.objgen not in used):
            continue
        size = decoded_size(obj, MAX_STREAM_BYTES)
        if size > MAX_STREAM_BYTES:
            raise DocumentError(f"a stream of the PDF inflates to over {MAX_STREAM_BYTES // 2**20} MiB: a decompression bomb")
        total += size
        if total > MAX_INFLATED_BYTES:
            raise DocumentError(f"the PDF's streams inflate to over {MAX_INFLATED_BYTES // 2**20} MiB: a decompression bomb")


def decoded_size(stream, limit: int) -> int:
    """How many bytes `stream`'s filters give (Flate, LZW, RunLength, ASCIIHex, ASCII85, in its
    order), each stage decoded at most to `limit` + 1 bytes: more than `limit` means over it. A
    filter the reader does not expand (an image codec) ends the count; broken data counts as decoded
    so far (the reader stops there too)."""
    import pikepdf

    filters = stream.get("/Filter")
    names = [str(f) for f in filters] if isinstance(filters, pikepdf.Array) else [str(filters)] if filters else []
    data = stream.read_raw_bytes()
    for name in names:
        decode = _DECODERS.get(name)
        if decode is None:
            break
        try:
            data = decode(data, limit + 1)
        except (ValueError, zlib.error, EOFError):
            break
        if len(data) > limit:
            break
    return len(data)


def _inflate(data: bytes, cap: int) -> bytes:
    return zlib.decompressobj().decompress(data, cap)


def _hex(data: bytes, cap: int) -> bytes:
    digits = re.sub(rb"\s+", b"", data.split(b">", 1)[0])
    return bytes.fromhex((digits + b"0" * (len(digits) % 2)).decode("ascii"))


def _ascii85(data: bytes, cap: int) -> bytes:
    body = data.strip().removeprefix(b"<~").split(b"~>", 1)[0]
    if len(body) + 3 * body.count(b"z") > cap:  # each `z` stands for four zero bytes
        return b"\0" * cap
    import base64

    return base64.a85decode(body, ignorechars=b" \t\n\r\f\0")


def _run_length(data: bytes, cap: int) -> bytes:
    out, i = bytearray(), 0
    while i < len(data) and len(out) < cap:
        length = data[i]
        if length == 128:
            break
        if length < 128:
            out += data[i + 1 : i + 2 + length]
            i += 2 + length
        else:
            out += data[i + 1 : i + 2] * (257 - length)
            i += 2
    return bytes(out[:cap])


def _lzw(data: bytes, cap: int) -> bytes:
    from pdfminer.lzw import LZWDecoder

    out = bytearray()
    for piece in LZWDecoder(io.BytesIO(data)).run():
        out += piece
        if len(out) >= cap:
            break
    return bytes(out[:cap])


_DECODERS = {"/FlateDecode": _inflate, "/Fl": _inflate, "/LZWDecode": _lzw, "/LZW": _lzw,
             "/RunLengthDecode": _run_length, "/RL": _run_length, "/ASCIIHexDecode": _hex, "/AHx": _hex,
             "/ASCII85Decode": _ascii85, "/A85": _ascii85}


class PdfDocument(ReadAsAsked):
    """The translatable blocks of a PDF as segments, read as they are asked for (ReadAsAsked): the
    pages a range at a time (pdf_blocks.read_page_ranges). `write` puts the translations in their
    place."""

    def __init__(self, pdf, data: bytes, bilingual: bool, scans: ScanReading):
        self.pdf, self.data, self.bilingual, self.scans = pdf, data, bilingual, scans
        self.pages: list = []
        self.blocks: list = []
        self.chains: list[list[int]] = []
        super().__init__()

    def _read_segments(self) -> Generator[Segment, None, None]:
        """Each chain's segment once the chain is settled (`_chains`); then the whole document checked."""
        ranges = read_page_ranges(self.data, len(self.pdf.pages))
        order: list[int] = []  # the translated blocks, in reading order

        def read_more() -> bool:
            """The next range of pages read, its blocks added; False when all are."""
            try:
                pages = next(ranges, None)
            except DocumentError:
                raise
            except (RecursionError, MemoryError):
                raise DocumentError("PDF nested too deeply or too large to read") from None
            except Exception as e:  # pdfminer raises many kinds on a broken file
                raise DocumentError(f"corrupt or unreadable PDF ({type(e).__name__}: {e})".splitlines()[0]) from None
            if pages is None:
                return False
            for page in pages:
                if page.blocks and not _shows_match(self.pdf.pages[page.index], page):
                    for block in page.blocks:  # its text operators could not be matched: its text stays as it is
                        block.translate = False
            self.scans.read(pages)
            for page in pages:
                for block in page.blocks:
                    if block.translate:
                        order.append(len(self.blocks))
                    self.blocks.append(block)
            self.pages.extend(pages)
            return True

        for chain in _chains(self.blocks, order, read_more):
            self.chains.append(chain)
            runs: list[Run] = []
            for i in chain:
                runs = join_lines(runs, self.blocks[i].runs)
            yield Segment(runs)
        if len(self.pages) != len(self.pdf.pages):
            raise DocumentError(f"corrupt PDF (its page tree gives {len(self.pdf.pages)} pages, {len(self.pages)} readable)")
        self.scans.check_read(self.pages)
        self.notes = self.scans.notes

    def write(self, translations: list[list[Run]], out_path: Path) -> None:
        import pikepdf

        from dragoman.app.documents.pdf_fonts import FontLibrary
        from dragoman.app.documents.pdf_write import write_pdf

        han = han_face("".join(r.text for runs in translations for r in runs))
        by_block: dict[int, list[Run]] = {}  # a block's index -> its share of its chain's translation
        for chain, runs in zip(self.chains, translations):
            by_block.update(zip(chain, _share(runs, [len(self.blocks[i].text) for i in chain])))
        original = pikepdf.open(io.BytesIO(self.data)) if self.bilingual else None
        fonts = FontLibrary(han)
        try:
            write_pdf(self.pdf, self.pages, by_block, self.blocks, fonts, out_path, original)
        finally:
            if original is not None:
                original.close()
        missing = fonts.missing_note()
        if missing:
            self.notes = (*self.notes, missing)

    def close(self) -> None:
        self._reading.close()  # a stop before the last page: the readers' pending ranges dropped
        self.pdf.close()


CHAIN_LOOKAHEAD = 8  # blocks looked at for a sentence's continuation (past footnotes, a footer, a header)


def _shows_match(pdf_page, page: Page) -> bool:
    """The page's text-showing operators, as the writer will parse them, are those its blocks were
    read from. A page that pikepdf cannot parse (an inline JBIG2 image without jbig2dec, say) is
    kept as it is, as one that does not match."""
    from dragoman.app.documents.pdf_write import show_strings

    try:
        return show_strings(pdf_page) == page.shows
    except Exception:  # pikepdf raises kinds of its own: the page's text is not touched
        return False


def _chains(blocks: list, order: list[int], read_more: Callable[[], bool] = lambda: False) -> Iterator[list[int]]:
    """The translated blocks (indexes, in reading order) grouped where a sentence runs from one
    into the next: the next block of the same size, past headers and footers, that continues it,
    from the foot of a column to the head of the next (not from one label of a form to the next).
    `read_more()` adds the next pages' blocks to `blocks` and `order` (False: none are left); each
    chain is given once the blocks it could run into are read (CHAIN_LOOKAHEAD past its last)."""
    on_page: dict[int, list] = {}
    indexed = 0  # blocks in on_page

    def index_new() -> None:
        nonlocal indexed
        for block in blocks[indexed:]:
            on_page.setdefault(block.page, []).append(block)
        indexed = len(blocks)

    def more() -> bool:
        found = read_more()
        index_new()
        return found

    index_new()

    def at_foot(block, besides) -> bool:
        """No translated block (page numbers do not count) of the block's size but `besides` below it in its column."""
        x0, y0, x1, _ = block.bbox
        return not any(other.translate and other is not block and other is not besides
                       and abs(other.size - block.size) < 0.1 * block.size
                       and other.bbox[0] < x1 and other.bbox[2] > x0 and other.bbox[3] <= y0 for other in on_page[block.page])

    def goes_on(block, after) -> bool:
        """`after` is where `block` goes on: the head of the next column or page, or right below it."""
        if not continues(block, after):
            return False
        (x0, y0, x1, y1), (a0, _, a1, a_top) = block.bbox, after.bbox
        if after.page == block.page:
            if a0 < x1 and a1 > x0:  # the same column: the next line, aligned alike
                aligned = abs(a0 - x0) < 1 or abs((a0 + a1) - (x0 + x1)) < 2 * block.size  # left, or centred
                return aligned and y0 - a_top < block.size
            # the head of the next column starts no lower than the block, and the block is a paragraph's
            # lines, not a form's label (one line; the next label of its row starts as high)
            if a_top < y1 - block.size or len(block.lines) < 2:
                return False
        return at_foot(block, after)

    joined: set[int] = set()
    position = 0
    while True:
        while position >= len(order):  # a range may hold no translated block
            if not more():
                return
        i = order[position]
        if i not in joined:
            chain, at = [i], position
            while True:
                last = blocks[chain[-1]]
                while at + CHAIN_LOOKAHEAD >= len(order) and more():  # the blocks it could run into, read
                    pass
                following = [(p, j) for p, j in enumerate(order[at + 1 : at + 1 + CHAIN_LOOKAHEAD], at + 1)
                             if j not in joined and abs(blocks[j].size - last.size) < 0.1 * last.size]
                if not following or not goes_on(last, blocks[following[0][1]]):
                    break
                at, j = following[0]
                chain.append(j)
                joined.add(j)
            yield chain
        position += 1


def _share(runs: list[Run], lengths: list[int]) -> list[list[Run]]:
    """A chain's translation shared among its blocks by their source lengths, cut at spaces."""
    text = "".join(r.text for r in runs)
    spaces = [m.start() for m in re.finditer(r"\s", text)]
    cuts, done = [0], 0
    for length in lengths[:-1]:
        done += length
        target = round(len(text) * done / sum(lengths))
        cut = min(spaces, key=lambda p: abs(p - target)) if spaces else target
        cuts.append(max(cut, cuts[-1]))
    cuts.append(len(text) + 1)
    parts = []
    for start, end in zip(cuts, cuts[1:]):
        part = cut_runs(runs, start, end)
        while part and part[0].atom is None and not part[0].text.strip():
            part.pop(0)
        if part and part[0].atom is None:
            part[0] = Run(part[0].text.lstrip(), part[0].style)
        parts.append(part)
    return parts


def _extract_text(path: Path) -> SlotDocument:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(path)
        if reader.is_encrypted and not reader.decrypt(""):
            raise DocumentError("password-protected PDF")
        pages = [_page_text(page) for page in reader.pages]
    except DocumentError:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as e:
        raise DocumentError(f"corrupt or unreadable PDF ({e})") from None
    doc = SlotDocument()
    for number, page in enumerate(pages):
        if number:
            doc.add_text("\n\f\n")
        for paragraph in re.split(r"\n\s*\n", page):
            text = re.sub(r"(\w)-\n(\w)", r"\1\2", paragraph.strip())
            text = re.sub(r"\s*\n\s*", " ", text)
            if text:
                doc.add_segment([Run(text)])
                doc.add_text("\n\n")
    return doc


PARAGRAPH_GAP = 1.5  # a gap this many times the page's usual line spacing ends a paragraph


def _page_text(page) -> str:
    """The page's text (as pypdf's `extract_text`), with a blank line at each paragraph break."""
    lines: list[list] = [["", None]]  # [text, baseline height] of each line

    def visit(text, cm, tm, font_dict, font_size):
        for piece in re.split(r"(?<=\n)", text):
            if not piece:
                continue
            if lines[-1][1] is None and piece.strip():
                lines[-1][1] = tm[4] * cm[1] + tm[5] * cm[3] + cm[5]
            lines[-1][0] += piece
            if piece.endswith("\n"):
                lines.append(["", None])

    text = page.extract_text(visitor_text=visit) or ""
    if "".join(t for t, _ in lines).strip() != text.strip():
        return text  # the visitor did not see what extract_text returned: no breaks rather than wrong ones
    placed = [(t, y) for t, y in lines if t.strip() and y is not None]
    gaps = sorted(a[1] - b[1] for a, b in zip(placed, placed[1:]) if a[1] - b[1] > 0)
    # the usual spacing: the smallest gap, leaving out small shifts (superscripts) under half the median
    spacing = min(g for g in gaps if g >= gaps[len(gaps) // 2] / 2) if gaps else 0
    out = []
    for i, (t, y) in enumerate(placed):
        if i and spacing and placed[i - 1][1] - y > PARAGRAPH_GAP * spacing:
            out.append("\n")
        out.append(t if t.endswith("\n") else t + "\n")
    return "".join(out)
