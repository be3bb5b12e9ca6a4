"""Fonts for translated PDF text: the PDF's own or found on the system, embedded as small subsets.

A block's translation is set in the font program the original embeds (TrueType, OpenType, or a
bare CFF program put in an OpenType font) where that program has a drawn glyph for every
character of the translation in each style (`FontLibrary.originals`); its characters are those
the PDF maps to its glyphs (ToUnicode, encoding, CFF glyph names) and those of its own Unicode
cmap, so a subset covers what the document used and a complete font all it has. Otherwise a
character is drawn with the first font already in use that has a glyph for it; else the system
is asked for one: fontconfig (`fc-list :charset=...`) on Linux, else the font folders (Windows,
macOS, Linux without fontconfig). Noto fonts are preferred (Noto Sans before the others, Noto
Serif for text set in a serif face, the CJK face of the text's language for Han characters), bold
and italic as the source run was. No font for a character is one clear line naming its script.

Text is shaped with HarfBuzz (uharfbuzz) word by word: contextual forms and ligatures (Arabic,
Indic scripts), mark positioning (Thai, Hebrew points), kerning. Each font used is embedded as a
new TrueType font holding only the glyphs drawn (outlines copied, cubic CFF curves converted to
quadratic), as a Type0/CIDFontType2 font with Identity-H encoding (character codes are the new
glyph ids, one per glyph and the text it stands for) and a ToUnicode map, so the text stays
selectable and searchable.
"""

from __future__ import annotations

import functools
import io
import os
import re
import shutil
import subprocess
import sys
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dragoman.app.documents.safety import DocumentError

if TYPE_CHECKING:
    import uharfbuzz

MAX_DESCENT = -0.3
MAX_EMS = 8  # a glyph's advance and outline reach at most this far (the widest real glyphs, ligatures, ~3 ems)
MIN_UNITS_PER_EM, MAX_UNITS_PER_EM = 16, 16384  # TrueType's range
FONT_SUFFIXES = (".ttf", ".otf", ".ttc", ".otc")
FONT_FOLDERS = {  # where fonts are found without fontconfig
    "linux": [Path("/usr/share/fonts"), Path("/usr/local/share/fonts"), Path.home() / ".local/share/fonts"],
    "win32": [Path(os.environ.get("WINDIR", "C:/Windows")) / "Fonts",
              Path(os.environ.get("LOCALAPPDATA", "")) / "Microsoft/Windows/Fonts"],
    "darwin": [Path("/System/Library/Fonts"), Path("/Library/Fonts"), Path.home() / "Library/Fonts"],
}


def script_name(ch: str) -> str:
    """The script of a character, as Unicode names it ("CYRILLIC", "CJK", "ETHIOPIC"), title-cased."""
    name = unicodedata.name(ch, "")
    return (name.split()[0] if name else f"U+{ord(ch):04X}").title()


@dataclass(frozen=True)
class Glyph:
    """One shaped glyph: its face, its name in the font, where it goes (ems), the text it stands for
    (the whole cluster on its first glyph, "" on the others), and its width as the PDF's /W gives
    it (`Face.width`)."""

    face: "Face"
    name: str
    advance: float
    dx: float
    dy: float
    text: str
    width: float


class Face:
    """One font file (a face of a collection), or a font program given as `data`, and the glyphs
    drawn with it, numbered from 1."""

    def __init__(self, path: str, index: int, family: str, style: str, data: bytes | None = None,
                 drawn_only: bool = False):
        from fontTools.ttLib import TTFont

        self.path, self.index, self.family, self.style_name, self.data = path, index, family, style, data
        self.style = ("Bold" in style, "Italic" in style or "Oblique" in style)  # (bold, italic)
        self.serif = "Serif" in family
        self.font = TTFont(io.BytesIO(data), lazy=True) if data is not None else TTFont(path, fontNumber=index, lazy=True)
        self.cmap = self.font.getBestCmap() or {}
        # a PDF's subset keeps empty glyphs for the characters it left out: those it does not cover
        self.outlined: dict[str, bool] | None = {} if drawn_only else None
        self.upm = self.font["head"].unitsPerEm
        self.hmtx = self.font["hmtx"]
        hhea = self.font["hhea"]
        # In ems; the descent lines are set by (and the PDF's descriptor says), capped so that a font
        # with deep descenders (Arabic, Devanagari) sits on the baseline a Latin font would.
        self.ascent, self.descent = hhea.ascent / self.upm, max(hhea.descent / self.upm, MAX_DESCENT)
        # (source glyph name, its text) -> its embedded glyph id (1, 2... in order of first use), as
        # the content stream writes it: two bytes
        self.codes: dict[tuple[str, str], bytes] = {}
        self.unicode: dict[int, str] = {}  # embedded glyph id -> the text it draws
        self.hb_font: uharfbuzz.Font | None = None  # made when the face first shapes text
        self.shaped: dict[str, tuple[Glyph, ...]] = {}
        self.outlines: dict[str, tuple] = {}  # glyph name -> _outline's (TrueType glyph, advance)

    def covers(self, ch: str) -> bool:
        name = self.cmap.get(ord(ch))
        if name is None or self.outlined is None or ch.isspace():
            return name is not None
        if ch not in self.outlined:
            from fontTools.pens.recordingPen import RecordingPen

            pen = RecordingPen()
            self.font.getGlyphSet()[name].draw(pen)
            self.outlined[ch] = bool(pen.value)
        return self.outlined[ch]

    def shape(self, text: str) -> tuple[Glyph, ...]:
        """The glyphs of `text` (one script, one direction) in visual order, left to right."""
        glyphs = self.shaped.get(text)
        if glyphs is None:
            glyphs = self.shaped[text] = self._shape(text)
        return glyphs

    def _harfbuzz_font(self) -> "uharfbuzz.Font":
        import uharfbuzz as hb

        if self.hb_font is None:
            blob = hb.Blob(self.data) if self.data is not None else hb.Blob.from_file_path(self.path)
            self.hb_font = hb.Font(hb.Face(blob, self.index))
        return self.hb_font

    def _shape(self, text: str) -> tuple[Glyph, ...]:
        import uharfbuzz as hb

        hb_font = self._harfbuzz_font()
        buffer = hb.Buffer()
        buffer.add_codepoints([ord(ch) for ch in text])  # clusters are then character offsets
        buffer.guess_segment_properties()
        hb.shape(hb_font, buffer, {})
        starts = sorted({info.cluster for info in buffer.glyph_infos}) + [len(text)]
        cluster_text = {a: text[a:b] for a, b in zip(starts, starts[1:])}
        order = self.font.getGlyphOrder()
        scale = hb_font.face.upem
        out, seen = [], set()
        for info, position in zip(buffer.glyph_infos, buffer.glyph_positions):
            first = info.cluster not in seen
            seen.add(info.cluster)
            name = order[info.codepoint]
            out.append(Glyph(self, name, position.x_advance / scale, position.x_offset / scale,
                             position.y_offset / scale, cluster_text[info.cluster] if first else "", self.width(name)))
        return tuple(out)

    def width(self, name: str) -> float:
        """A glyph's advance width as the PDF's /W gives it (in thousandths, rounded), in ems."""
        return round(self.hmtx[name][0] * 1000 / self.upm) / 1000

    def code(self, glyph: Glyph) -> bytes:
        """The two-byte code that draws the glyph from the embedded font. A glyph that stands for
        different texts (a base letter alone, and the first glyph of a cluster with its vowel sign)
        gets one code per text: ToUnicode maps codes, not glyphs."""
        key = (glyph.name, glyph.text)
        code = self.codes.get(key)
        if code is None:
            gid = len(self.codes) + 1
            if glyph.text:
                self.unicode[gid] = glyph.text
            code = self.codes[key] = gid.to_bytes(2, "big")
        return code

    def sets(self, text: str) -> bool:
        """The face can set `text`: a glyph with an outline for each of its characters, glyphs that
        HarfBuzz finds in the font, outlines fontTools reads and copies, metrics within a sane range.
        A PDF's embedded program may be hostile (a composite glyph containing itself, a glyph
        claiming more contours than it has, a cmap past the last glyph, extreme metrics): where it
        fails any of these, the text is set in a system font instead."""
        try:
            return all(self.covers(ch) for ch in text if not ch.isspace() and ch.isprintable()) and all(
                self._outline(glyph.name) is not None for word in text.split() for glyph in self.shape(word))
        except Exception:  # fontTools and HarfBuzz raise many kinds on a broken font, RecursionError among them
            return False

    def _outline(self, name: str):
        """(the glyph's outline as a TrueType glyph, its advance in font units), read once; a glyph
        the font lacks is empty and half an em wide. Raises where the glyph is broken or its
        outline or advance reaches past MAX_EMS."""
        if name in self.outlines:
            return self.outlines[name]
        import numpy
        from fontTools.misc.roundTools import noRound
        from fontTools.pens.cu2quPen import Cu2QuPen
        from fontTools.pens.ttGlyphPen import TTGlyphPen

        pen = TTGlyphPen(None)
        if "glyf" in self.font:
            self._draw_decomposed(name, pen)
        else:  # CFF: cubic curves made quadratic, the contours turned to TrueType's direction
            quadratic = Cu2QuPen(pen, max_err=self.upm / 1000, reverse_direction=True)
            if self.data is None and name in self.font.getGlyphSet():
                # an installed font: HarfBuzz's charstring interpreter is many times faster than
                # fontTools' and draws the same outlines (seac accents drawn out too)
                self._harfbuzz_font().draw_glyph_with_pen(self.font.getGlyphID(name), quadratic)
            if not pen.points:  # a PDF's own program, a blank glyph, or a table HarfBuzz does not read
                self._draw_decomposed(name, quadratic)
        glyph = pen.glyph(round=noRound)
        # rounded as fontTools rounds (half up), all coordinates at once
        coordinates = numpy.frombuffer(glyph.coordinates.array, dtype=numpy.float64)
        numpy.floor(coordinates + 0.5, out=coordinates)
        advance = self.hmtx[name][0] if name in self.hmtx.metrics else self.upm // 2
        reach = MAX_EMS * self.upm
        # not "> reach": a coordinate that is not a number fails too
        if not 0 <= advance <= reach or not (numpy.abs(coordinates) <= reach).all():
            raise ValueError(f"glyph {name} reaches past {MAX_EMS} ems")
        self.outlines[name] = glyph, advance
        return self.outlines[name]

    def _draw_decomposed(self, name: str, pen) -> None:
        """Draws the glyph with fontTools, its components drawn out: the subset keeps no glyph they
        refer to. fontTools raises on a broken glyph, which `sets` needs of a PDF's own program."""
        from fontTools.pens.recordingPen import DecomposingRecordingPen

        glyph_set = self.font.getGlyphSet()
        recording = DecomposingRecordingPen(glyph_set)
        if name in glyph_set:
            glyph_set[name].draw(recording)
        recording.replay(pen)

    def subset(self) -> tuple[bytes, list[int], list[int]]:
        """(a TrueType font of the glyphs drawn, each glyph's advance in 1/1000 em, its bbox in 1/1000 em)."""
        from fontTools.fontBuilder import FontBuilder

        sources = [".notdef"] + [name for name, _ in self.codes]  # in the order of their ids
        order = [".notdef"] + [f"g{i}" for i in range(1, len(sources))]
        glyphs, advances = {}, []
        for new, source in zip(order, sources):
            glyphs[new], advance = self._outline(source)
            advances.append(advance)
        builder = FontBuilder(self.upm, isTTF=True)
        # the source font's dates, not today's: the same document translated twice is the same file
        builder.font.recalcTimestamp = False
        builder.font["head"].created = builder.font["head"].modified = self.font["head"].modified
        builder.setupGlyphOrder(order)
        builder.setupCharacterMap({})
        builder.setupGlyf(glyphs)
        glyf = builder.font["glyf"]
        metrics = {}
        for name, advance in zip(order, advances):
            glyph = glyf[name]
            glyph.recalcBounds(glyf)
            metrics[name] = (advance, getattr(glyph, "xMin", 0))
        builder.setupHorizontalMetrics(metrics)
        hhea = self.font["hhea"]
        builder.setupHorizontalHeader(ascent=hhea.ascent, descent=hhea.descent)
        builder.setupNameTable({"familyName": self.family, "styleName": self.style_name})
        builder.setupOS2(sTypoAscender=hhea.ascent, sTypoDescender=hhea.descent, usWinAscent=hhea.ascent,
                         usWinDescent=-hhea.descent)
        builder.setupPost()
        out = io.BytesIO()
        builder.save(out)
        scale = 1000 / self.upm
        boxes = [round(v * scale) for v in _bbox(glyf, order)]
        return out.getvalue(), [round(a * scale) for a in advances], boxes


def _bbox(glyf, order) -> list[int]:
    boxes = [glyf[n] for n in order if getattr(glyf[n], "numberOfContours", 0)]
    if not boxes:
        return [0, 0, 0, 0]
    return [min(g.xMin for g in boxes), min(g.yMin for g in boxes), max(g.xMax for g in boxes), max(g.yMax for g in boxes)]


def embedded_face(source, style: tuple[bool, bool]) -> Face | None:
    """The font program a PDF embeds (pdf_blocks.SourceFont) as a face whose Unicode cmap holds the
    characters it draws there and those of its own Unicode cmap; a subset's face covers only those
    whose glyph has an outline. None where the program cannot be read."""
    from fontTools.agl import toUnicode
    from fontTools.ttLib import TTFont, newTable
    from fontTools.ttLib.tables._c_m_a_p import CmapSubtable

    try:
        program = _opentype_from_cff(source.program) if source.cff else source.program
        font = TTFont(io.BytesIO(program))
        order = font.getGlyphOrder()
        if source.cff:  # glyphs named by CID (CID-keyed) or by what they draw (the Adobe glyph list)
            names = set(order)
            mapping = {ord(ch): f"cid{cid:05d}" for ch, cid in source.glyphs.items() if f"cid{cid:05d}" in names}
            for name in order:
                if len(text := toUnicode(name)) == 1:
                    mapping.setdefault(ord(text), name)
        else:
            mapping = {ord(ch): order[gid] for ch, gid in source.glyphs.items() if gid < len(order)}
            tables = {(t.platformID, t.platEncID): t.cmap for t in font["cmap"].tables} if "cmap" in font else {}
            symbol, mac = tables.get((3, 0), {}), tables.get((1, 0), {})
            for ch, code in source.codes.items():
                name = symbol.get(0xF000 + code) or symbol.get(code) or mac.get(code)
                if name:
                    mapping[ord(ch)] = name
        own = font.getBestCmap() or {}
        if any(own.get(codepoint) != name for codepoint, name in mapping.items()):  # a cmap for HarfBuzz to read
            mapping = {**own, **mapping}
            subtables = []
            bmp = {c: n for c, n in mapping.items() if c <= 0xFFFF}
            for table_format, encoding, chars in ((4, 1, bmp), (12, 10, mapping)):
                table = CmapSubtable.newSubtable(table_format)
                table.platformID, table.platEncID, table.language, table.cmap = 3, encoding, 0, chars
                subtables.append(table)
            font["cmap"] = newTable("cmap")
            font["cmap"].tableVersion, font["cmap"].tables = 0, subtables
            out = io.BytesIO()
            font.save(out)
            program = out.getvalue()
        family, _, style_name = re.sub(r"[-,]", "-", source.name).partition("-")  # Arial,Bold; Helvetica-Cn
        face = Face(source.name, 0, family or "Embedded", style_name or STYLE_NAMES[style], data=program,
                    drawn_only=source.subset)
        hhea = face.font["hhea"]
        if not MIN_UNITS_PER_EM <= face.upm <= MAX_UNITS_PER_EM or max(hhea.ascent, -hhea.descent) > MAX_EMS * face.upm:
            return None  # extreme metrics: the translation would be set far off its line
        return face
    except Exception:  # a broken or unusual program: the translation is set in a system font
        return None


def _opentype_from_cff(data: bytes) -> bytes:
    """A bare CFF program (FontFile3 /Type1C or /CIDFontType0C) in an OpenType font: the tables a
    font needs around it, advances from its charstrings, ascent and descent from its bounding box."""
    from fontTools.cffLib import CFFFontSet
    from fontTools.fontBuilder import FontBuilder
    from fontTools.pens.basePen import NullPen
    from fontTools.ttLib import newTable

    cff = CFFFontSet()
    cff.decompile(io.BytesIO(data), None)
    top = cff[cff.fontNames[0]]
    order = top.getGlyphOrder()
    scale = getattr(top, "FontMatrix", [0.001])[0]
    metrics = {}
    for name in order:
        charstring = top.CharStrings[name]
        charstring.draw(NullPen())  # which sets its width
        metrics[name] = (round(charstring.width), 0)
    builder = FontBuilder(round(1 / scale) if scale > 0 else 1000, isTTF=False)
    builder.setupGlyphOrder(order)
    builder.setupCharacterMap({})
    builder.font["CFF "] = newTable("CFF ")
    builder.font["CFF "].cff = cff
    builder.setupHorizontalMetrics(metrics)
    bbox = getattr(top, "FontBBox", [0, -200, 1000, 800])
    builder.setupHorizontalHeader(ascent=round(bbox[3]), descent=round(bbox[1]))
    builder.setupPost()
    out = io.BytesIO()
    builder.save(out)
    return out.getvalue()


STYLE_NAMES = {(False, False): "Regular", (True, False): "Bold", (False, True): "Italic", (True, True): "Bold Italic"}


def _rank(family: str, style: str, wanted: tuple[bool, bool], han_face: str, serif: bool) -> tuple:
    kind = "Noto Serif" if serif else "Noto Sans"
    family_rank = (
        0 if family == kind else
        1 if family == han_face.replace("Noto Sans", kind) else
        2 if family.startswith(kind) and "Mono" not in family else
        3 if family.startswith("Noto Sans") and "Mono" not in family else
        4 if family.startswith("Noto Serif") else
        6 if "Mono" in family else 5
    )
    return (family_rank, style != STYLE_NAMES[wanted], style != "Regular", family, style)


def _fontconfig_candidates(ch: str) -> list[tuple[str, int, str, str]]:
    """(file, index, family, style) of the installed fonts that have a glyph for `ch`."""
    try:
        listing = subprocess.run(
            ["fc-list", "--format", "%{file}\t%{index}\t%{family[0]}\t%{style[0]}\n", f":charset={ord(ch):x}"],
            capture_output=True, text=True, timeout=30, check=False,
        ).stdout
    except OSError:
        return []
    out = []
    for line in listing.splitlines():
        parts = line.split("\t")
        if len(parts) == 4 and parts[0].lower().endswith(FONT_SUFFIXES):
            out.append((parts[0], int(parts[1] or 0), parts[2], parts[3]))
    return out


@functools.cache
def folder_candidates(folders: tuple[Path, ...]) -> list[tuple[str, int, str, str]]:
    """(file, index, family, style) of every font in the folders, named as the fonts name themselves."""
    from fontTools.ttLib import TTFont

    out = []
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*")):
            if path.suffix.lower() not in FONT_SUFFIXES:
                continue
            count = 1
            if path.suffix.lower() in (".ttc", ".otc"):
                with open(path, "rb") as f:
                    head = f.read(12)
                count = int.from_bytes(head[8:12], "big") if head[:4] == b"ttcf" else 0
            for index in range(min(count, 64)):
                try:
                    names = TTFont(path, fontNumber=index, lazy=True)["name"]
                except Exception:  # not a font after all: the next one
                    continue
                family = names.getDebugName(16) or names.getDebugName(1)
                style = names.getDebugName(17) or names.getDebugName(2) or "Regular"
                if family:
                    out.append((str(path), index, family, style))
    return out


MAX_NAMED_MISSING = 5  # characters a note names


class FontLibrary:
    """The faces used for one document, in the order they were first needed."""

    def __init__(self, han_face: str = "Noto Sans CJK SC"):
        self.faces: dict[tuple[str, int], Face] = {}
        self.missing: dict[str, str] = {}  # characters no installed font has -> their script
        self.han_face = han_face
        self.found: dict[tuple, Face | None] = {}  # (character, style, serif) -> what the system gave
        self.chosen: dict[tuple, Face] = {}
        self.use_fontconfig = shutil.which("fc-list") is not None
        self.embedded: dict[tuple, Face | None] = {}  # (SourceFont, style) -> its face

    def originals(self, fonts: dict, runs) -> dict[tuple[bool, bool], Face]:
        """The faces of the block's own embedded fonts (`fonts`: (bold, italic) -> SourceFont) by
        style, where they have a glyph for every character of the translation's runs; else none."""
        faces = {}
        for run in runs:
            if run.atom is not None or not run.text.strip():
                continue
            style = run.style if isinstance(run.style, tuple) else (False, False)
            source = fonts.get(style)
            if source is None:
                return {}
            key = (source, style)
            if key not in self.embedded:
                self.embedded[key] = embedded_face(source, style)
            face = self.embedded[key]
            if face is None or not face.sets(run.text):
                return {}
            faces[style] = face
        return faces

    def face_for(self, ch: str, style: tuple[bool, bool], serif: bool = False) -> Face:
        """A face with a glyph for `ch`, in `style` (bold, italic) and a serif one for `serif` text
        where one is installed."""
        key = (ch, style, serif)
        face = self.chosen.get(key)
        if face is None:
            face = self.chosen[key] = self._choose(ch, style, serif)
        return face

    def _choose(self, ch: str, style: tuple[bool, bool], serif: bool) -> Face:
        for face in self.faces.values():
            if face.style == style and face.serif == serif and face.covers(ch):
                return face
        key = (ch, style, serif)
        if key not in self.found:
            self.found[key] = self._find(ch, style, serif)
        found = self.found[key]
        if found is None:
            # A character no font has (a rare sign, or a script without a font) is drawn as the
            # missing-glyph box of a font that exists, and said once (`missing_note`): one sign
            # must not cost the document. With no font at all there is nothing to draw with.
            fallback_key = (" ", style, serif)
            if fallback_key not in self.found:
                self.found[fallback_key] = self._find(" ", style, serif)
            found = self.found[fallback_key]
            if found is None:
                raise DocumentError(
                    f"no font for the {script_name(ch)} script (U+{ord(ch):04X}) is installed: "
                    f"install a Noto font that covers it (e.g. the fonts-noto packages on Linux)"
                )
            self.missing[ch] = script_name(ch)
        return found

    def missing_note(self) -> str | None:
        """One line naming the characters no installed font has (drawn as boxes), if any."""
        if not self.missing:
            return None
        named = sorted(self.missing.items())[:MAX_NAMED_MISSING]
        shown = ", ".join(f"U+{ord(ch):04X} ({script})" for ch, script in named)
        more = f" and {len(self.missing) - len(named)} more" if len(self.missing) > len(named) else ""
        return (f"no installed font has {shown}{more}: drawn as boxes; install a Noto font that covers them "
                f"(e.g. the fonts-noto packages on Linux)")

    def _find(self, ch: str, style: tuple[bool, bool], serif: bool) -> Face | None:
        """The best installed face with a glyph for `ch`, in `style` (and serif) where there is a choice."""
        if self.use_fontconfig:
            candidates = _fontconfig_candidates(ch)
        else:
            folders = FONT_FOLDERS.get("linux" if sys.platform.startswith("linux") else sys.platform, [])
            candidates = folder_candidates(tuple(folders))
        for path, index, family, style_name in sorted(candidates, key=lambda c: _rank(c[2], c[3], style, self.han_face, serif)):
            face = self.faces.get((path, index))
            if face is None:
                try:
                    face = Face(path, index, family, style_name)
                except Exception:  # an unreadable font file: the next candidate
                    continue
            if face.covers(ch):
                self.faces[(path, index)] = face
                return face
        return None
