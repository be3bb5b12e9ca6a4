"""Pictures of text (.png, .jpg, .jpeg, .webp, .tif, .tiff): read by OCR, translated into a PNG of the same size
(STEM.<to>.png), or with `picture_as="pdf"` into a PDF of one page (STEM.<to>.pdf).

Pillow opens the picture (turned upright as its EXIF orientation says); a picture of more than
`MAX_PIXELS` pixels is refused before it is decoded (a decompression bomb: a small file that
decodes to gigabytes), and so is a TIFF of several pages. ocr.py finds its blocks of text; each
block is one segment. Writing: each translated block's box is filled with its background colour
and its translation drawn there in its ink colour, in a Noto face found as PDF fonts are
(pdf_fonts.FontLibrary), at the largest size up to the original's that fits the box, lines broken
at spaces (anywhere in CJK text), right to left where the translation is; every other pixel stays
as it was. As a PDF: a page the picture's size (at its resolution, PDF_DPI where it states none)
showing the picture, losslessly, with each block covered and its translation set as real text by
the PDF writer, as a scanned PDF's are (pdf.place_blocks).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Callable

from dragoman.app.documents.ocr import LEADING, LINE_BOX, Reader, TextBlock, is_cjk
from dragoman.app.documents.sentences import is_rtl
from dragoman.app.documents.safety import DocumentError, check_file
from dragoman.app.documents.segments import Document, Run, Segment

EXTENSIONS = (".png", ".jpg", ".jpeg", ".webp", ".tif", ".tiff")
OPTIONS = ("source", "reading", "picture_as")
MAX_PIXELS = 100_000_000  # an A3 page at 600 dpi is 70 megapixels
MIN_TEXT_PIXELS = 6  # the smallest size a translation is drawn at
FILL_PAD = 2  # pixels around a block's box that its fill covers too (antialiased edges of the letters)
PDF_DPI = 150  # the resolution a picture that states none is given as a PDF page: a phone photo fills a page


def output_suffix(options: dict) -> str:
    return ".pdf" if options.get("picture_as") == "pdf" else ".png"


def open_picture(path: Path):
    """The picture, decoded and upright; DocumentError for what is not one, or too large to decode."""
    from PIL import Image, ImageOps, UnidentifiedImageError

    check_file(path)
    Image.MAX_IMAGE_PIXELS = MAX_PIXELS  # Pillow itself refuses anything larger too
    try:
        with warnings.catch_warnings():  # the size is checked below, with the file named
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(path)
        if image.width * image.height > MAX_PIXELS:
            raise DocumentError(f"the picture is {image.width} x {image.height} pixels; the limit is "
                                f"{MAX_PIXELS // 10**6} megapixels (a decompression bomb?)")
        frames = getattr(image, "n_frames", 1)
        if frames > 1:
            raise DocumentError(f"a picture of {frames} pages or frames: only single pictures are read "
                                "(a multi-page scan: make it a PDF)")
        image.load()
        return ImageOps.exif_transpose(image)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise DocumentError(f"the picture is larger than {MAX_PIXELS // 10**6} megapixels (a decompression bomb?)") from None
    except UnidentifiedImageError:
        raise DocumentError("not a picture Pillow can read (or a corrupt one)") from None
    except (OSError, ValueError, SyntaxError) as e:
        raise DocumentError(f"corrupt or unreadable picture ({e})".splitlines()[0]) from None


def extract(path: Path, source: str = "auto", reading: Callable[[int, int], None] | None = None,
            picture_as: str = "picture") -> Document:
    image = open_picture(path)
    reader = Reader(source)
    if reading is not None:
        reading(0, 1)
    blocks = reader.read(image)
    if reading is not None:
        reading(1, 1)
    if not blocks:
        raise DocumentError("no text to translate (OCR found no text in the picture)")
    return PictureDocument(image, blocks, as_pdf=picture_as == "pdf")


class PictureDocument(Document):
    """A picture's recognised blocks as segments; `write` draws their translations in their place, or
    sets them on a PDF page of the picture."""

    def __init__(self, image, blocks: list[TextBlock], as_pdf: bool = False):
        self.image, self.blocks, self.as_pdf = image, blocks, as_pdf
        self.segments = [Segment([Run(block.text)]) for block in blocks]

    def write(self, translations: list[list[Run]], out_path: Path) -> None:
        if self.as_pdf:
            self._write_pdf(translations, out_path)
            return
        out = self.image.copy()
        if out.mode not in ("RGB", "RGBA", "L", "LA"):
            out = out.convert("RGBA" if "A" in out.getbands() or "transparency" in out.info else "RGB")
        draw_translations(out, self.blocks, ["".join(r.text for r in runs) for runs in translations])
        # Its resolution and colour profile kept: printed, it is the size of the original, in its colours.
        out.save(out_path, format="PNG", **{key: self.image.info[key] for key in ("dpi", "icc_profile")
                                            if self.image.info.get(key)})

    def _write_pdf(self, translations: list[list[Run]], out_path: Path) -> None:
        import io
        import zlib

        import pikepdf

        from dragoman.app.documents.pdf import han_face, place_blocks
        from dragoman.app.documents.pdf_blocks import read_pages
        from dragoman.app.documents.pdf_fonts import FontLibrary
        from dragoman.app.documents.pdf_write import write_pdf

        grey = self.image.mode in ("1", "L", "LA", "I", "I;16")
        picture = self.image.convert("L" if grey else "RGB")
        dpi = float((self.image.info.get("dpi") or (PDF_DPI,))[0]) or PDF_DPI
        width, height = picture.width * 72 / dpi, picture.height * 72 / dpi
        pdf = pikepdf.new()
        image = pikepdf.Stream(pdf, zlib.compress(picture.tobytes()))
        image.Type, image.Subtype, image.Filter = pikepdf.Name.XObject, pikepdf.Name.Image, pikepdf.Name.FlateDecode
        image.Width, image.Height, image.BitsPerComponent = picture.width, picture.height, 8
        image.ColorSpace = pikepdf.Name.DeviceGray if grey else pikepdf.Name.DeviceRGB
        page = pdf.add_blank_page(page_size=(width, height))
        page.Resources = pikepdf.Dictionary(XObject=pikepdf.Dictionary(Picture=image))
        page.Contents = pdf.make_stream(f"q {width:.4f} 0 0 {height:.4f} 0 0 cm /Picture Do Q".encode("ascii"))
        buffer = io.BytesIO()
        pdf.save(buffer)
        pdf.close()
        data = buffer.getvalue()
        pages = read_pages(data)
        place_blocks(pages[0], self.blocks, pages[0].placed[0][1], picture.size, [])
        with pikepdf.open(io.BytesIO(data)) as pdf:
            han = han_face("".join(r.text for runs in translations for r in runs))
            write_pdf(pdf, pages, dict(enumerate(translations)), pages[0].blocks, FontLibrary(han), out_path)


def draw_translations(image, blocks: list[TextBlock], texts: list[str]) -> None:
    """Each block's box filled with its background and its text drawn there, on `image` (changed in place).
    Blocks read from the picture turned (`TextBlock.frame`) are drawn upright on a clear layer of the
    turned picture's size, which is turned back and laid on the picture: the text stands at the block's angle."""
    from PIL import Image, ImageDraw

    from dragoman.app.documents.pdf_fonts import FontLibrary

    fonts = FontLibrary(han_face="Noto Sans CJK SC")
    layers: dict = {}  # frame -> the layer its blocks are drawn on
    for block, text in zip(blocks, texts):
        text = " ".join(text.split())
        if not text:
            continue
        if block.frame is None:
            _draw_block(ImageDraw.Draw(image), image, block, text, fonts)
            continue
        if block.frame not in layers:
            layers[block.frame] = Image.new("RGBA", block.frame.upright, (0, 0, 0, 0))
        layer = layers[block.frame]
        _draw_block(ImageDraw.Draw(layer), layer, block, text, fonts)
    for frame, layer in layers.items():
        exact = frame.angle % 90 == 0  # a quarter turn moves pixels without resampling them
        back = layer.rotate(-frame.angle, resample=Image.Resampling.NEAREST if exact else Image.Resampling.BICUBIC, expand=True)
        left, top = round((back.width - image.width) / 2), round((back.height - image.height) / 2)
        back = back.crop((left, top, left + image.width, top + image.height))
        image.paste(back.convert(image.mode) if image.mode != "RGBA" else back, (0, 0), back.getchannel("A"))


def _draw_block(draw, image, block: TextBlock, text: str, fonts) -> None:
    """The block's box (in `image`'s pixels) filled with its background, its text drawn in it."""
    left, top, right, bottom = block.box
    box = (max(left - FILL_PAD, 0), max(top - FILL_PAD, 0),
           min(right + FILL_PAD, image.width) - 1, min(bottom + FILL_PAD, image.height) - 1)
    draw.rectangle(box, fill=_colour(image, block.background))
    letter = next((ch for ch in text if ch.isalpha()), text[0])
    face = fonts.face_for(letter, (False, False))
    font, lines = _fit(text, face, right - left, bottom - top, block.size)
    rtl = is_rtl(text)
    pitch = font.size * LEADING
    for number, line in enumerate(lines):
        y = top + number * pitch
        if rtl:
            draw.text((right, y), line, font=font, fill=_colour(image, block.ink), anchor="ra", direction="rtl")
        else:
            draw.text((left, y), line, font=font, fill=_colour(image, block.ink), anchor="la")


def _fit(text: str, face, width: int, height: int, size: float):
    """(font, lines): the largest size, from the original's down, at which `text` broken into lines fits
    `width` x `height`; at the smallest size the lines may run over the box's foot."""
    from PIL import ImageFont

    size = max(int(size), MIN_TEXT_PIXELS)
    while True:
        font = ImageFont.truetype(face.path, size, index=face.index)
        lines = _wrap(text, font, width)
        if ((len(lines) - 1) * LEADING * size + LINE_BOX * size <= height and all(font.getlength(line) <= width for line in lines)) \
                or size <= MIN_TEXT_PIXELS:
            return font, lines
        size = max(int(size * 0.92), MIN_TEXT_PIXELS)


def _wrap(text: str, font, width: int) -> list[str]:
    """`text` in lines no wider than `width` where it can break: at spaces, between CJK characters."""
    pieces: list[str] = []
    for word in text.split(" "):
        if any(is_cjk(ch) for ch in word):
            pieces.extend(ch for ch in word)
        else:
            pieces.append(word)
        pieces.append(" ")
    lines, line = [], ""
    for piece in pieces[:-1]:
        if piece == " ":
            line += " " if line else ""
            continue
        candidate = line + piece
        if line.strip() and font.getlength(candidate) > width:
            lines.append(line.rstrip())
            line = piece
        else:
            line = candidate
    return lines + [line.rstrip()] if line.strip() else lines


def _colour(image, rgb: tuple[int, int, int]):
    if image.mode in ("L", "LA"):
        grey = round(0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2])
        return grey if image.mode == "L" else (grey, 255)
    return rgb if image.mode == "RGB" else (*rgb, 255)

