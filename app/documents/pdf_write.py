"""Writing a translated PDF: each page kept, its translated blocks' text replaced in place.

For every translated block, the glyphs that drew it are taken out of the page's content stream: a
text-showing operator becomes a `TJ` whose numbers move the text position as far as the removed
glyphs did (so any text after them stays where it was), keeping the glyphs of blocks that stay;
images, vector graphics, annotations and links are not touched. The original content is wrapped in `q ... Q` and the translations are drawn
after it as real text (embedded subset fonts with ToUnicode, see pdf_fonts.py).

Typesetting: the translation is broken into lines where Unicode's line breaking rules allow (at
spaces, between CJK characters, between Thai words) to fill the block's box, at the original size where it fits, shrinking
down to `SHRINK_FLOOR` of it; then the box grows right and down into free space (up to the next
block, a ruled line or the page's text area) and the size shrinks further, down to `GROWN_FLOOR`.
A word is never cut where its script does not allow a break: a word wider than the box makes the
size go down like lines too many for it.
Right-to-left paragraphs are set flush right, their words right to left (runs of left-to-right words
keep their order). Bold and italic runs keep their style. A block read by OCR from a scan
(`Block.cover`) has no text to remove: a rectangle in its background colour hides the scanned text first. The block's own embedded font is used
where it has every character, else a system font; glyphs come from HarfBuzz (pdf_fonts.py).
"""

from __future__ import annotations

import hashlib
import itertools
import re
import unicodedata
import warnings
import zlib
from dataclasses import dataclass

from dragoman.app.documents.pdf_blocks import SHOW_OPERATORS, Block, Page
from dragoman.app.documents.pdf_fonts import Face, FontLibrary, Glyph
from dragoman.app.documents.segments import Run
from dragoman.app.documents.sentences import is_rtl

SHRINK_FLOOR = 0.9
GROWN_FLOOR = 0.5
MIN_SIZE = 4.0
SIZE_STEP = 0.95
GAP = 2.0  # points kept free between a grown box and what it grew towards


@dataclass
class Setting:
    lines: list[list[list[Glyph]]]  # each line's units, in logical order
    size: float
    box: tuple[float, float, float, float]
    rtl: bool = False


def _characters(runs: list[Run], fonts: FontLibrary, originals: dict, serif: bool) -> list[list[tuple[str, Face]]]:
    """The translation cut where a line may break (Unicode line breaking, UAX #14, from Qt: at
    spaces, between CJK characters, between Thai words), each character with the face that draws
    it: the block's own font for its style (`originals`) where it has one, else a system font."""
    from PySide6.QtCore import QTextBoundaryFinder

    pieces = [(run.atom if isinstance(run.atom, str) else run.text, run.style) for run in runs]  # a list marker as it was
    text = "".join(t for t, _ in pieces)
    finder = QTextBoundaryFinder(QTextBoundaryFinder.BoundaryType.Line, text)
    breaks = set()
    while (position := finder.toNextBoundary()) != -1:
        breaks.add(position)
    units: list[list[tuple[str, Face]]] = []
    index = 0
    for piece, style in pieces:
        style = style if isinstance(style, tuple) else (False, False)
        original = originals.get(style)
        for ch in piece:
            index += 1
            if ch in "\n\t\r":
                ch = " "
            kind = unicodedata.category(ch)[0]  # C: control or format, M: mark, L: letter
            if kind == "C":
                continue
            previous = units[-1][-1][1] if units else None
            if kind == "M" and previous and previous.covers(ch):
                units[-1].append((ch, previous))  # a mark is drawn with its base's face
                continue
            # spaces, digits and punctuation in the face of the text around them, where it has them
            if previous is not None and kind != "L" and previous.covers(ch):
                face = previous
            elif original is not None and original.covers(ch):
                face = original
            else:
                face = fonts.face_for(ch, style, serif)
            if ch == " " or not units or units[-1][0][0] == " " or index - 1 in breaks:
                units.append([(ch, face)])
            else:
                units[-1].append((ch, face))
    return units


def _shaped(unit: list[tuple[str, Face]]) -> list[Glyph]:
    """A unit's glyphs: each stretch of one face shaped whole, in visual order."""
    stretches: list[list] = []
    for ch, face in unit:
        if stretches and stretches[-1][1] is face:
            stretches[-1][0] += ch
        else:
            stretches.append([ch, face])
    shaped = [list(face.shape(text)) for text, face in stretches]
    if is_rtl("".join(ch for ch, _ in unit)):
        shaped.reverse()
    return [glyph for stretch in shaped for glyph in stretch]


def _width(glyphs, size: float) -> float:
    return sum(g.advance for g in glyphs) * size


def _is_space(unit: list[Glyph]) -> bool:
    return all(g.text.isspace() for g in unit)


def _wrap(units: list[tuple[list[Glyph], float, bool]], width: float, size: float) -> list[list[list[Glyph]]]:
    """Units (glyphs, width in ems, whether a space) filled into lines of `width`. A unit is never
    cut: one wider than a line has a line of its own, and `_fit` tries a smaller size or a wider box."""
    lines: list[list] = [[]]
    used = 0.0
    for unit, em, space in units:
        if space:
            if lines[-1]:
                lines[-1].append(unit)
                used += em * size
            continue
        if lines[-1] and used + em * size > width:
            lines.append([])
            used = 0.0
        lines[-1].append(unit)
        used += em * size
    return [line for line in map(_trim, lines) if line]


def _trim(line):
    while line and _is_space(line[-1]):
        line = line[:-1]
    return line


def _visual(line: list[list[Glyph]], rtl: bool) -> list[Glyph]:
    """A line's glyphs left to right: in a right-to-left paragraph the units are reversed, runs of
    left-to-right words (numbers, Latin names) keeping their own order."""
    if not rtl:
        return [g for unit in line for g in unit]
    out: list[list[Glyph]] = []
    ltr: list[list[Glyph]] = []
    for unit in reversed(line):
        if not _is_space(unit) and not is_rtl("".join(g.text for g in unit)):
            ltr.insert(0, unit)
            continue
        if ltr and _is_space(unit):
            ltr.insert(0, unit)
            continue
        out += _trim_ltr(ltr)
        ltr = []
        out.append(unit)
    out += _trim_ltr(ltr)
    return [g for unit in out for g in unit]


def _trim_ltr(units):
    """A left-to-right run inside a right-to-left line, its spaces moved to the run's outside."""
    leading = []
    while units and _is_space(units[0]):
        leading.append(units.pop(0))
    return units + leading


def _faces(lines) -> list:
    """The faces the lines use, in order of first use."""
    return list(dict.fromkeys(g.face for line in lines for unit in line for g in unit))


def _height(lines, size: float, leading: float) -> float:
    faces = _faces(lines)
    top = max((1 + f.descent for f in faces), default=0.8)
    bottom = min((f.descent for f in faces), default=-0.2)
    return (top - bottom) * size + (len(lines) - 1) * leading * size


def _fit(units, box, size, leading, floor) -> Setting | None:
    x0, y0, x1, y1 = box
    s = size
    while True:
        lines = _wrap(units, x1 - x0, s)
        widest = max((_width([g for unit in line for g in unit], s) for line in lines), default=0.0)
        if _height(lines, s, leading) <= y1 - y0 + 0.5 and widest <= x1 - x0 + 0.5:
            return Setting(lines, s, box)
        if s <= floor:
            return None
        s = max(s * SIZE_STEP, floor)


def _grown(box, page: Page, obstacles, align: str) -> tuple[float, float, float, float]:
    """The box grown sideways (away from the side its lines are aligned on), then down, into the free
    space of the page's text area."""
    x0, y0, x1, y1 = box
    area = [b.bbox for b in page.blocks]
    right, left = max(b[2] for b in area), min(b[0] for b in area)
    for ox0, oy0, ox1, oy1 in obstacles:
        if oy0 < y1 and oy1 > y0:
            if ox0 >= x1 - 0.5:
                right = min(right, ox0 - GAP)
            if ox1 <= x0 + 0.5:
                left = max(left, ox1 + GAP)
    right, left = max(right, x1), min(left, x0)
    if align in ("left", "justify"):
        left = x0
    elif align == "right":
        right = x1
    else:
        room = min(x0 - left, right - x1)
        left, right = x0 - room, x1 + room
    bottom = min(b[1] for b in area)
    for ox0, oy0, ox1, oy1 in obstacles:  # below: its top under the box's bottom, or over it by less than GAP
        if ox0 < right and ox1 > left and oy1 <= y0 + GAP:
            bottom = max(bottom, oy1 + GAP)
    return left, min(bottom, y0), right, y1


def typeset(block: Block, runs: list[Run], fonts: FontLibrary, page: Page, obstacles) -> Setting:
    originals = fonts.originals(block.fonts, runs)
    units = [(glyphs, sum(g.advance for g in glyphs), _is_space(glyphs))
             for glyphs in map(_shaped, _characters(runs, fonts, originals, block.serif))]
    rtl = is_rtl("".join(r.text for r in runs))
    size, leading = block.size, block.leading
    box = block.bbox
    setting = _fit(units, box, size, leading, size * SHRINK_FLOOR)
    if setting is None:
        grown = _grown(box, page, obstacles, block.align)
        setting = _fit(units, grown, size, leading, max(size * GROWN_FLOOR, min(MIN_SIZE, size)))
        if setting is None:  # does not fit even so: the smallest size, running over the box's bottom (or side)
            small = max(size * GROWN_FLOOR, min(MIN_SIZE, size))
            setting = Setting(_wrap(units, grown[2] - grown[0], small), small, grown)
    setting.rtl = rtl
    return setting


def used_box(setting: Setting, block: Block) -> tuple[float, float, float, float]:
    """The part of the setting's box its lines take: what other blocks may not grow into."""
    x0, y0, x1, y1 = setting.box
    width = max((_width([g for unit in line for g in unit], setting.size) for line in setting.lines), default=0.0)
    bottom = y1 - _height(setting.lines, setting.size, block.leading)
    if block.align == "justify" and len(setting.lines) > 1:  # its lines but the last fill the box
        return x0, bottom, x1, y1
    if setting.rtl or block.align == "right":
        return x1 - width, bottom, x1, y1
    if block.align == "center":
        middle = (x0 + x1) / 2
        return middle - width / 2, bottom, middle + width / 2, y1
    return x0, bottom, x0 + width, y1


def _color(color: tuple) -> str:
    values = " ".join(f"{float(v):.4g}" for v in color)
    return {1: f"{values} g", 3: f"{values} rg", 4: f"{values} k"}.get(len(color), "0 g")


def draw(setting: Setting, block: Block, font_names: dict[Face, str], origin) -> str:
    """Content stream operators that draw the setting (page coordinates shifted back by the media box's origin).

    Each line is one text position (Tm) and TJ arrays whose numbers move each glyph from where the
    font's own width leaves it to where HarfBuzz placed it; a glyph raised or lowered (a mark) is
    drawn with a text rise (Ts). A justified block's lines but its last are widened to the box by
    equal room after each of their spaces."""
    x0, y0, x1, y1 = setting.box
    ox, oy = origin
    s, leading = setting.size, block.leading
    top = max((1 + f.descent for f in _faces(setting.lines)), default=0.8)
    right = setting.rtl or block.align == "right"
    out = [_color(block.color), "BT"]
    current = None
    for number, line in enumerate(setting.lines):
        baseline = y1 - top * s - number * leading * s
        width = _width([g for unit in line for g in unit], s)
        glyphs = _visual(line, setting.rtl)
        spaces = sum(1 for g in glyphs if g.text.isspace())
        stretch = 0.0  # ems after each space
        if block.align == "justify" and number < len(setting.lines) - 1 and spaces and width < x1 - x0:
            stretch, width = (x1 - x0 - width) / spaces / s, x1 - x0
        x = x1 - width if right else x0 + (x1 - x0 - width) / 2 if block.align == "center" else x0
        out.append(f"1 0 0 1 {x + ox:.3f} {baseline + oy:.3f} Tm")
        pen = drawn = 0.0  # where the next glyph's origin goes, and where the text position is (ems)
        array: list[str] = []
        codes = bytearray()  # glyphs drawn one after the other without a move: one string of the array

        def shown() -> list[str]:
            if codes:
                array.append(f"<{codes.hex()}>")
                codes.clear()
            return array

        for glyph in glyphs:
            if current is not glyph.face or glyph.dy:
                if shown():
                    out.append(f"[{' '.join(array)}] TJ")
                    array = []
                if current is not glyph.face:
                    out.append(f"/{font_names[glyph.face]} {s:.3f} Tf")
                    current = glyph.face
            move = pen + glyph.dx - drawn
            if abs(move) > 1e-4:
                shown().append(f"{-move * 1000:.1f}")
            codes += glyph.face.code(glyph)
            if glyph.dy:
                out += [f"{glyph.dy * s:.3f} Ts", f"[{' '.join(shown())}] TJ", "0 Ts"]
                array = []
            drawn = pen + glyph.dx + glyph.width
            pen += glyph.advance + (stretch if glyph.text.isspace() else 0.0)
        if shown():
            out.append(f"[{' '.join(array)}] TJ")
    out.append("ET")
    return "\n".join(out)


def remove_text(pdf_page, page: Page, remove: dict[int, set[int]]) -> bytes:
    """The page's content with the given glyphs (operator -> glyph indexes) removed: an operator
    whose glyphs all go becomes a TJ of one number (as far as its text moved), one with glyphs that
    stay becomes a TJ of those glyphs with numbers where the others were."""
    import pikepdf

    out = []
    show = 0
    for instruction in pikepdf.parse_content_stream(pdf_page):
        operator = str(instruction.operator)
        if operator not in SHOW_OPERATORS or isinstance(instruction, pikepdf.ContentStreamInlineImage):
            out.append(instruction)
            continue
        if show in remove:
            if operator == '"':
                aw, ac, _ = instruction.operands
                out += [pikepdf.ContentStreamInstruction([aw], pikepdf.Operator("Tw")),
                        pikepdf.ContentStreamInstruction([ac], pikepdf.Operator("Tc"))]
            if operator in ("'", '"'):
                out.append(pikepdf.ContentStreamInstruction([], pikepdf.Operator("T*")))
            glyphs = page.glyphs[show]
            if glyphs is not None:
                array = _kept_glyphs(glyphs, remove[show])
            else:  # every glyph goes (its operator cannot be cut): as far as pdfminer saw it move
                array = pikepdf.Array([round(page.advances[show] or 0, 3)])
            out.append(pikepdf.ContentStreamInstruction([array], pikepdf.Operator("TJ")))
        else:
            out.append(instruction)
        show += 1
    return pikepdf.unparse_content_stream(out)


def _kept_glyphs(elements: list, removed: set[int]):
    """A TJ array of the glyphs not removed, numbers standing in for the others."""
    import pikepdf

    items: list = []
    glyph = 0
    for element in elements:
        if not isinstance(element, tuple):
            move = -float(element)
        elif glyph in removed:
            move = element[1]
            glyph += 1
        else:
            if items and isinstance(items[-1], bytes):
                items[-1] += element[0]
            else:
                items.append(element[0])
            glyph += 1
            continue
        if items and isinstance(items[-1], float):
            items[-1] -= move
        else:
            items.append(-move)
    return pikepdf.Array([pikepdf.String(item) if isinstance(item, bytes) else round(item, 3) for item in items])


def show_strings(pdf_page) -> list[tuple[bytes, ...]]:
    """The strings of each text-showing operator of the page's content, in order (as pdfminer saw them)."""
    import pikepdf

    shows = []
    for instruction in pikepdf.parse_content_stream(pdf_page):
        if isinstance(instruction, pikepdf.ContentStreamInlineImage) or str(instruction.operator) not in SHOW_OPERATORS:
            continue
        operands = instruction.operands
        strings = operands[-1:] if str(instruction.operator) != "TJ" else list(operands[0]) if operands else []
        shows.append(tuple(bytes(s) for s in strings if isinstance(s, pikepdf.String)))
    return shows


def _font_object(pdf, face: Face):
    import pikepdf

    descendant = pdf.make_indirect(pikepdf.Dictionary(Type=pikepdf.Name.Font, Subtype=pikepdf.Name.CIDFontType2))
    return pdf.make_indirect(pikepdf.Dictionary(
        Type=pikepdf.Name.Font, Subtype=pikepdf.Name.Type0, Encoding=pikepdf.Name("/Identity-H"),
        DescendantFonts=pikepdf.Array([descendant]),
    ))


def _finish_font(pdf, font, face: Face) -> None:
    """Fill in the font's subset, widths and ToUnicode, once every page has been drawn."""
    import pikepdf

    data, advances, bbox = face.subset()
    tag = "".join(chr(65 + b % 26) for b in hashlib.sha1(data).digest()[:6])
    name = pikepdf.Name("/" + tag + "+" + re.sub(r"[^A-Za-z0-9-]", "", face.family + "-" + face.style_name))
    descriptor = pdf.make_indirect(pikepdf.Dictionary(
        Type=pikepdf.Name.FontDescriptor, FontName=name, Flags=4, FontBBox=pikepdf.Array(bbox), ItalicAngle=0,
        Ascent=round((1 + face.descent) * 1000), Descent=round(face.descent * 1000),
        CapHeight=round(face.ascent * 700), StemV=80, FontFile2=pdf.make_indirect(_deflated(pdf, data)),
    ))
    descendant = font.DescendantFonts[0]
    descendant.BaseFont = name
    descendant.CIDSystemInfo = pikepdf.Dictionary(Registry=pikepdf.String("Adobe"), Ordering=pikepdf.String("Identity"),
                                                  Supplement=0)
    descendant.FontDescriptor = descriptor
    descendant.CIDToGIDMap = pikepdf.Name.Identity
    descendant.W = pikepdf.Array([0, pikepdf.Array(advances)])
    font.BaseFont = name
    font.ToUnicode = pdf.make_indirect(_deflated(pdf, _to_unicode(face.unicode)))


def _to_unicode(unicode: dict[int, str]) -> bytes:
    entries = sorted(unicode.items())
    chunks = []
    for i in range(0, len(entries), 100):  # at most 100 entries per bfchar section
        part = entries[i : i + 100]
        lines = "\n".join(f"<{gid:04X}> <{text.encode('utf-16-be').hex().upper()}>" for gid, text in part)
        chunks.append(f"{len(part)} beginbfchar\n{lines}\nendbfchar")
    return (
        "/CIDInit /ProcSet findresource begin\n12 dict begin\nbegincmap\n"
        "/CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def\n"
        "/CMapName /Adobe-Identity-UCS def\n/CMapType 2 def\n"
        "1 begincodespacerange\n<0000> <FFFF>\nendcodespacerange\n" + "\n".join(chunks) +
        "\nendcmap\nCMapName currentdict /CMap defineresource pop\nend\nend\n"
    ).encode("ascii")


def write_pdf(pdf, pages: list[Page], translations: dict[int, list[Run]], blocks: list[Block], fonts: FontLibrary,
              out_path, original=None) -> None:
    """Replace the translated blocks' text (blocks[i] gets translations[i]) in `pdf` and save it to
    `out_path`; with `original` (the untouched PDF), each original page comes before its translation."""
    import pikepdf

    font_objects: dict[Face, pikepdf.Object] = {}
    by_page: dict[int, list[int]] = {}
    for i in translations:
        by_page.setdefault(blocks[i].page, []).append(i)
    for page_index, numbers in sorted(by_page.items()):
        page = pages[page_index]
        pdf_page = pikepdf.Page(pdf.pages[page_index])
        obstacles = [b.bbox for b in page.blocks] + page.rules + page.figures
        drawn = []
        names: dict[Face, str] = {}
        remove: dict[int, set[int]] = {}
        for i in numbers:
            block = blocks[i]
            setting = typeset(block, translations[i], fonts, page, [o for o in obstacles if o != block.bbox])
            if setting.box != block.bbox:
                obstacles.append(used_box(setting, block))
            for face in _faces(setting.lines):
                if face not in font_objects:
                    font_objects[face] = _font_object(pdf, face)
                if face not in names:
                    names[face] = _add_font(pdf_page, font_objects[face])
            if block.cover:  # a scan's text: hidden under its background colour, where the translation goes too
                x0, y0, x1, y1 = (min(a, b) if k < 2 else max(a, b)
                                  for k, (a, b) in enumerate(zip(block.bbox, used_box(setting, block))))
                ox, oy = page.origin
                drawn.append(f"q {_color(block.cover)} {x0 + ox - 1:.3f} {y0 + oy - 1:.3f} "
                             f"{x1 - x0 + 2:.3f} {y1 - y0 + 2:.3f} re f Q")
            drawn.append(draw(setting, block, names, page.origin))
            for show, glyph in block.glyphs:
                remove.setdefault(show, set()).add(glyph)
        content = remove_text(pdf_page, page, remove)
        content = b"q\n" + content + b"\nQ\n" + "\n".join(drawn).encode("ascii") + b"\n"
        pdf_page.obj.Contents = pdf.make_indirect(_deflated(pdf, content))
    for face, font in font_objects.items():
        _finish_font(pdf, font, face)
    if original is not None:
        for index in range(len(original.pages)):
            pdf.pages.insert(2 * index, original.pages[index])
    # every stream not ours byte for byte (qpdf would recode and recompress some); ours deflated by _deflated
    save(pdf, out_path, compress_streams=False, stream_decode_level=pikepdf.StreamDecodeLevel.none,
         deterministic_id=True)  # the same document translated twice is the same file


def save(pdf, target, **options) -> None:
    """`pdf.save`, without the warnings pikepdf prints about the source's own structure (widgets
    outside its form) and without rewriting the version in its XMP metadata, which fails on a broken
    metadata stream: the metadata is the source's, untouched."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pdf.save(target, fix_metadata_version=False, **options)


def _add_font(pdf_page, font) -> str:
    """The font added to the page's resources under the first name DrgF1, DrgF2... the page does not use."""
    import pikepdf

    used = pdf_page.resources.get(pikepdf.Name.Font, pikepdf.Dictionary()).keys()
    name = next(f"DrgF{n}" for n in itertools.count(1) if f"/DrgF{n}" not in used)
    pdf_page.add_resource(font, pikepdf.Name.Font, pikepdf.Name("/" + name))
    return name


def _deflated(pdf, data: bytes):
    import pikepdf

    stream = pikepdf.Stream(pdf, b"")
    stream.write(zlib.compress(data), filter=pikepdf.Name.FlateDecode)
    return stream
