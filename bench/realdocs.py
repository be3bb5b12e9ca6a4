"""Every document of a folder through the app's document path, and what changed in each:
`python -m bench.realdocs DIR [--to fra_Latn zho_Hans]`.

Each file goes through the app's document path with one of two translators. With `--checkpoint DIR`,
the real engine on that checkpoint (a small random one: `tests/nllb_checkpoint.py`) through the
app's translation pipeline, as `dragoman translate` runs it: its vocabulary cannot spell
everything and its translations are random tokens to the length limit. Otherwise
`app.documents.translate_document` with `StandIn`, a deterministic translator as hard as a model: every word comes back rewritten
to another length, some sentences much shorter, in CJK characters without spaces for a target
written without them, the placeholder tags lost in some sentences, and about one sentence in a
hundred empty. Then the source and the output are read with the format's own library
(python-docx, python-pptx, openpyxl, odfpy, lxml, markdown-it-py, pypdf; plain parsing for
subtitles and text) into `Facts`, and compared: the output opens; it has as many paragraphs, table
cells, slides, sheets, pages and cues; no paragraph or page that had letters comes back empty; bold and italic are
still in each paragraph that had them; and link targets, anchors, cue timings, formulas,
relationships and media parts (every member of an archive that is not XML) are identical. One line per file, its problems below it, and "N files, P problems"
per target; exit status 1 if there was any problem.

A file the app refuses is a problem only if its format's library reads text in it.
"""

from __future__ import annotations

import argparse
import codecs
import hashlib
import re
import sys
import tempfile
import time
import warnings
import zipfile
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from lxml import etree

from dragoman.app.documents import DocumentError, is_supported, output_path, translate_document
from dragoman.app.documents.picture import EXTENSIONS as PICTURES
from dragoman.app.session.jobs import DocumentJob
from dragoman.app.session.session import TranslationSession
from dragoman.engine import NO_SPACE_SCRIPTS, Translator, get_language

TAG = re.compile(r"(<\s*/?\s*x\s*\d+\s*/?\s*>)", re.IGNORECASE)  # the driver's placeholder tags
LETTERS = re.compile(r"[^\W\d_]+")
FAKE_LETTERS = "aeioulnrstvmcdpbgéèàùôç"
CJK_PUNCTUATION = str.maketrans({".": "。", "!": "！", "?": "？", ",": "，", ";": "；", ":": "："})
XML_MEMBERS = (".xml", ".rels", ".xhtml", ".html", ".htm", ".opf", ".ncx")


class StandIn:
    """`translate_batch` for `translate_document`: a deterministic stand-in for the model."""

    def __init__(self, target_script: str):
        self.spaced = target_script not in NO_SPACE_SCRIPTS

    def __call__(self, texts: list[str]) -> list[str]:
        return [self.translate(text) for text in texts]

    def translate(self, text: str) -> str:
        seed = zlib.crc32(text.encode())
        if seed % 97 == 5:  # nothing came back
            return ""
        if seed % 3 == 0:  # the model dropped the tags
            text = TAG.sub("", text)
        short = seed % 4 == 1  # a much shorter translation: every third word
        out = "".join(part if TAG.fullmatch(part) else self.rewrite(part, short) for part in TAG.split(text))
        return out if out != text else out + " é."

    def rewrite(self, piece: str, short: bool) -> str:
        words = piece.split()
        first = next((i for i, w in enumerate(words) if LETTERS.search(w)), 0)
        # a shorter translation keeps every third word, its first and last words and what has no letters
        words = [w for i, w in enumerate(words)
                 if not short or i % 3 == 0 or i in (first, len(words) - 1) or not LETTERS.search(w)]
        if not self.spaced:
            return "".join(LETTERS.sub(self.cjk, w).translate(CJK_PUNCTUATION) for w in words)
        lead = piece[: len(piece) - len(piece.lstrip())]
        trail = piece[len(piece.rstrip()) :] if piece.strip() else ""
        return lead + " ".join(LETTERS.sub(self.word, w) for w in words) + trail

    @staticmethod
    def word(m: re.Match) -> str:
        source = m.group(0)
        h = zlib.crc32(source.encode())
        size = len(source) + 1 + h % 4 if h % 2 else max(1, len(source) // 2)
        out = "".join(FAKE_LETTERS[(h + 7 * i * i) % len(FAKE_LETTERS)] for i in range(size))
        return out.capitalize() if source[0].isupper() else out

    @staticmethod
    def cjk(m: re.Match) -> str:
        h = zlib.crc32(m.group(0).encode())
        return "".join(chr(0x4E00 + (h >> (3 * i)) % 0x5000) for i in range(1 + h % 3))


def stand_in(path: Path, out_path: Path, target: str) -> None:
    """Translate the document at `path` into `out_path` with `StandIn`."""
    script = get_language(target).script
    translate_document(path, out_path, StandIn(script), target_script=script)


class EngineDocuments:
    """Translate a document as `dragoman translate` does: the engine on `checkpoint` (CPU), through
    a translation pipeline without the user's cache and memory."""

    def __init__(self, checkpoint: Path, source: str):
        self.pipeline = TranslationSession(Translator(checkpoint, device="cpu"))
        self.source = source

    def __call__(self, path: Path, out_path: Path, target: str) -> None:
        self.pipeline.translate_document(DocumentJob(path, out_path, self.source, target))


@dataclass
class Block:
    kind: str  # paragraph, cell, cue
    text: str = ""
    marks: set = field(default_factory=set)  # "bold", "italic"


@dataclass
class Facts:
    blocks: list[Block] = field(default_factory=list)
    counts: dict = field(default_factory=dict)  # slides, sheets, table cells: must be equal
    kept: dict = field(default_factory=dict)  # name -> list that must come back identical
    # name -> list that must come back in order among the output's: a text's lines without letters,
    # among which a translation the model wrote without letters may come too
    kept_within: dict = field(default_factory=dict)


class Unreadable(Exception):
    """The format's own library cannot read the file."""


def local(el) -> str:
    return el.tag.rsplit("}", 1)[-1] if isinstance(el.tag, str) else ""


def attr(el, name: str) -> str | None:
    """An attribute by local name, whatever its namespace."""
    return next((v for k, v in el.attrib.items() if k.rsplit("}", 1)[-1] == name), None)


def has_letters(text: str) -> bool:
    return any(ch.isalpha() for ch in text)


def xml_blocks(root, blocks: frozenset, text_tags: frozenset | None, marks_of, skips=frozenset()) -> list[Block]:
    """The paragraphs under `root` (elements named in `blocks`), each with its own text (a nested
    paragraph's is its own) and the marks `marks_of(element)` of the elements its letters or digits
    sit in (a bold space is no bold; a bold figure is, and a translation may put a mark on one).
    `text_tags`: only these elements hold text (OOXML `t`); None: mixed content, tails too."""
    out: list[Block] = []
    state: dict = {}  # element -> (the paragraph it is in, the marks it is in)

    def add(block, marks, text):
        if block is not None and text:
            block.text += text
            if any(ch.isalnum() for ch in text):
                block.marks |= marks

    for el in root.iter():
        parent = el.getparent()
        block, marks = state.get(parent, (None, frozenset()))
        if local(el) in skips:
            block, marks = None, frozenset()
        elif local(el) in blocks:
            block, marks = Block("paragraph"), frozenset(marks_of(el))
            out.append(block)
        else:
            marks = marks | marks_of(el)
        state[el] = (block, marks)
        if isinstance(el.tag, str) and (text_tags is None or local(el) in text_tags):
            add(block, marks, el.text)
        if text_tags is None and parent is not None:
            add(*state[parent], el.tail)
    return out


def parse(data: bytes, html: bool = False):
    if html:  # UTF-8 whatever the page declares (pages that declare another charset often are UTF-8)
        import lxml.html

        try:
            data = re.sub(r"^\s*<\?xml[^>]*\?>", "", data.decode("utf-8"))
        except UnicodeDecodeError:
            pass
        return lxml.html.document_fromstring(data).getroottree()
    return etree.fromstring(data, etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)).getroottree()


def media(archive: zipfile.ZipFile) -> list:
    return [(i.filename, hashlib.sha1(archive.read(i)).hexdigest()) for i in archive.infolist()
            if not i.filename.lower().endswith(XML_MEMBERS) and not i.is_dir()]


# Office Open XML: paragraphs w:p / a:p, text w:t / a:t, runs w:r / a:r with their properties.
def ooxml_marks(el) -> set:
    if local(el) != "r":
        return set()
    props = next((c for c in el if local(c) == "rPr"), None)
    if props is None:
        return set()
    marks = {name for name, flag in (("bold", "b"), ("italic", "i")) if attr(props, flag) in ("1", "true")}
    for child in props:
        if local(child) in ("b", "i") and attr(child, "val") not in ("0", "false", "off"):
            marks.add("bold" if local(child) == "b" else "italic")
    return marks


def ooxml_facts(path: Path, blocks: frozenset) -> Facts:
    facts = Facts(kept={"links": [], "anchors": [], "relationships": []})
    cells = 0
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        rels = {}
        for name in names:
            if name.endswith(".rels"):
                part = re.sub(r"(^|/)_rels/([^/]+)\.rels$", r"\1\2", name)
                targets = {attr(r, "Id"): attr(r, "Target") for r in parse(archive.read(name)).getroot()}
                rels[part] = targets
                facts.kept["relationships"] += sorted((name, k, v) for k, v in targets.items())
        for name in names:
            if not name.endswith(".xml"):
                continue
            root = parse(archive.read(name)).getroot()
            facts.blocks += xml_blocks(root, blocks, frozenset({"t"}), ooxml_marks)
            for el in root.iter():
                tag = local(el)
                if tag in ("hyperlink", "hlinkClick", "hlinkHover"):
                    rid = attr(el, "id")
                    target = rels.get(name, {}).get(rid) if rid else "#" + (attr(el, "anchor") or attr(el, "location") or "")
                    facts.kept["links"].append((name, target))
                elif tag == "bookmarkStart":
                    facts.kept["anchors"].append(attr(el, "name"))
                elif tag == "tc":
                    cells += 1
        facts.kept["media"] = media(archive)
    facts.counts["table cells"] = cells
    return facts


def docx_facts(path: Path) -> Facts:
    import docx

    try:
        docx.Document(str(path))
    except Exception as e:
        raise Unreadable(f"python-docx: {e}") from None
    return ooxml_facts(path, frozenset({"p"}))


def pptx_facts(path: Path) -> Facts:
    import pptx

    try:
        slides = len(pptx.Presentation(str(path)).slides)
    except Exception as e:
        raise Unreadable(f"python-pptx: {e}") from None
    facts = ooxml_facts(path, frozenset({"p"}))
    facts.counts["slides"] = slides
    return facts


def xlsx_facts(path: Path) -> Facts:
    import openpyxl

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            book = openpyxl.load_workbook(str(path))
    except Exception as e:
        raise Unreadable(f"openpyxl: {e}") from None
    facts = ooxml_facts(path, frozenset({"si", "is", "p"}))
    facts.counts["sheets"] = len(book.sheetnames)
    formulas = []
    for sheet in book.worksheets:
        for row in sheet.iter_rows():
            for cell in row:
                if cell.data_type == "f":
                    value = cell.value
                    formulas.append((sheet.title, cell.coordinate, type(value).__name__, getattr(value, "ref", None),
                                     getattr(value, "text", value)))
                elif isinstance(cell.value, str):
                    facts.blocks.append(Block("cell", cell.value))
    facts.kept["formulas"] = formulas
    return facts


def odt_facts(path: Path) -> Facts:
    from odf.opendocument import load

    try:
        load(str(path))
    except Exception as e:
        raise Unreadable(f"odfpy: {e}") from None
    facts = Facts(kept={"links": [], "anchors": []})
    cells = 0
    with zipfile.ZipFile(path) as archive:
        roots = [parse(archive.read(n)).getroot() for n in ("styles.xml", "content.xml") if n in archive.namelist()]
        styled: dict[str, set] = {}
        for root in roots:
            for el in root.iter():
                if local(el) == "text-properties" and local(el.getparent()) == "style":
                    marks = set()
                    if attr(el, "font-weight") == "bold":
                        marks.add("bold")
                    if attr(el, "font-style") == "italic":
                        marks.add("italic")
                    styled[attr(el.getparent(), "name")] = marks
        for root in roots:
            facts.blocks += xml_blocks(root, frozenset({"p", "h"}), None,
                                       lambda el: styled.get(attr(el, "style-name"), set()) if local(el) == "span" else set())
            for el in root.iter():
                if local(el) == "a":
                    facts.kept["links"].append(attr(el, "href"))
                elif local(el) in ("bookmark", "bookmark-start"):
                    facts.kept["anchors"].append(attr(el, "name"))
                elif local(el) == "table-cell":
                    cells += 1
        facts.kept["media"] = media(archive)
    facts.counts["table cells"] = cells
    return facts


HTML_BLOCKS = frozenset("p h1 h2 h3 h4 h5 h6 li td th dt dd caption figcaption title text".split())
HTML_MARKS = {"b": "bold", "strong": "bold", "i": "italic", "em": "italic"}


def html_tree_facts(tree, facts: Facts) -> None:
    root = tree.getroot()
    facts.blocks += xml_blocks(root, HTML_BLOCKS, None, lambda el: {HTML_MARKS[local(el)]} if local(el) in HTML_MARKS else set(),
                               skips=frozenset({"script", "style", "noscript"}))
    for el in root.iter():
        if local(el) == "a":
            if el.get("href") is not None:
                facts.kept.setdefault("links", []).append(el.get("href"))
            for name in ("name", "id"):
                if el.get(name) is not None:
                    facts.kept.setdefault("anchors", []).append(el.get(name))
        elif local(el) in ("td", "th"):
            facts.counts["table cells"] = facts.counts.get("table cells", 0) + 1


CHARSET = re.compile(r"charset\s*=\s*[\w.:-]+", re.IGNORECASE)


def data_head(path: Path) -> str:
    """The first 4 KiB of a page as text, in the encoding its BOM names (UTF-8 without one)."""
    data = path.read_bytes()[:4096]
    for bom, encoding in ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
                          (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16")):
        if data.startswith(bom):
            return data.decode(encoding, errors="ignore")
    return data.decode("utf-8", errors="ignore")


def html_facts(path: Path) -> Facts:
    try:
        tree = parse(path.read_bytes(), html=True)
    except Exception as e:
        raise Unreadable(f"lxml: {e}") from None
    # The doctype as the file writes it (lxml gives every tree one), and the charset meta tags with
    # the charset's name left out: a page is written in the encoding it was read in, and a
    # declaration that names another (pages declaring gb2312 in UTF-8) is corrected to it.
    head = data_head(path)
    doctype = re.search(r"<!doctype[^>]*>", head, re.IGNORECASE)
    facts = Facts(kept={"links": [], "anchors": [], "doctype": [doctype and doctype.group(0)]})
    facts.kept["meta"] = [sorted((k, CHARSET.sub("charset=*", v) if k == "content" else "*" if k == "charset" else v)
                                 for k, v in m.attrib.items())
                          for m in tree.iter("meta") if m.get("charset") or m.get("http-equiv")]
    html_tree_facts(tree, facts)
    return facts


def epub_facts(path: Path) -> Facts:
    facts = Facts(kept={"links": [], "anchors": []})
    try:
        with zipfile.ZipFile(path) as archive:
            for name in archive.namelist():
                if name.lower().endswith(XML_MEMBERS):
                    tree = parse(archive.read(name))
                    html_tree_facts(tree, facts)
                    for el in tree.getroot().iter():
                        if local(el) in ("item", "content", "itemref") and (attr(el, "href") or attr(el, "src")):
                            facts.kept["links"].append((name, attr(el, "href") or attr(el, "src")))
            facts.kept["media"] = media(archive)
    except Exception as e:
        raise Unreadable(f"zipfile/lxml: {e}") from None
    return facts


def decode(data: bytes) -> tuple[str, str]:
    """(text, encoding) for UTF-8 or BOM-marked Unicode; Unreadable for anything else."""
    for bom, encoding in ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
                          (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16")):
        if data.startswith(bom):
            return data.decode(encoding), encoding
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        raise Unreadable("not UTF-8 or BOM-marked Unicode text") from None


def markdown_facts(path: Path) -> Facts:
    from markdown_it import MarkdownIt

    text, encoding = decode(path.read_bytes())
    facts = Facts(kept={"links": [], "images": [], "code": [], "html": [], "encoding": [encoding]})
    for token in MarkdownIt("commonmark").enable("table").parse(text):
        if token.type in ("fence", "code_block", "html_block"):
            facts.kept["code" if token.type != "html_block" else "html"].append(token.content)
        if token.type != "inline":
            continue
        block = Block("paragraph")
        for child in token.children or []:
            if child.type in ("text", "code_inline"):
                block.text += child.content
            if child.type == "code_inline":
                facts.kept["code"].append(child.content)
            elif child.type == "html_inline":
                facts.kept["html"].append(child.content)
            elif child.type == "link_open":
                facts.kept["links"].append(child.attrs.get("href"))
            elif child.type == "image":
                facts.kept["images"].append(child.attrs.get("src"))
            elif child.type in ("strong_open", "em_open"):
                block.marks.add("bold" if child.type == "strong_open" else "italic")
        facts.blocks.append(block)
    return facts


TIMING = re.compile(r"\d{1,2}:\d{2}(?::\d{2})?[,.]\d{1,3}\s*-->\s*\d{1,2}:\d{2}(?::\d{2})?[,.]\d{1,3}")
CUE_TAG = re.compile(r"<[^>]*>")


def subtitle_facts(path: Path) -> Facts:
    """Cues are the lines after a timing line up to a blank line or the next cue: its timing, after
    its number, or after an identifier that follows a blank line (WebVTT: a cue's text runs to the
    next timing line); every other line must come back as it was."""
    text, encoding = decode(path.read_bytes())
    lines = text.splitlines()
    facts = Facts(kept={"timings": [], "lines outside cues": [], "cue line counts": [], "inline timestamps": [],
                        "encoding": [encoding]})
    cue = None
    for i, line in enumerate(lines):
        starts_next = i + 1 < len(lines) and TIMING.search(lines[i + 1]) and (
            line.strip().isdigit() or i == 0 or not lines[i - 1].strip())
        if TIMING.search(line):
            cue = Block("cue")
            facts.blocks.append(cue)
            facts.kept["timings"].append(line)
            facts.kept["cue line counts"].append(0)
        elif cue is not None and line.strip() and not starts_next:
            cue.text += " " + CUE_TAG.sub("", line)
            facts.kept["cue line counts"][-1] += 1
            facts.kept["inline timestamps"] += re.findall(r"<\d[\d:.]*>", line)
            for tag, mark in (("b", "bold"), ("i", "italic")):
                if f"<{tag}>" in line:
                    cue.marks.add(mark)
        else:
            cue = None
            facts.kept["lines outside cues"].append(line)
    if not facts.blocks:
        raise Unreadable("no cue timings")
    return facts


def text_facts(path: Path) -> Facts:
    text, encoding = decode(path.read_bytes())
    facts = Facts(kept={"encoding": [encoding]},
                  kept_within={"lines without letters": [line for line in text.splitlines() if not has_letters(line)]})
    facts.blocks = [Block("paragraph", p) for p in re.split(r"\n\s*\n", text) if p.strip()]
    return facts


def pdf_facts(path: Path) -> Facts:
    import pypdf

    try:
        pages = pypdf.PdfReader(str(path)).pages
        return Facts(blocks=[Block("page", page.extract_text() or "") for page in pages])
    except Exception as e:
        raise Unreadable(f"pypdf: {e}") from None


READERS = {
    ".docx": docx_facts, ".docm": docx_facts, ".dotx": docx_facts,
    ".pptx": pptx_facts, ".pptm": pptx_facts, ".ppsx": pptx_facts, ".potx": pptx_facts,
    ".xlsx": xlsx_facts, ".xlsm": xlsx_facts, ".xltx": xlsx_facts,
    ".odt": odt_facts, ".epub": epub_facts, ".html": html_facts, ".htm": html_facts, ".xhtml": html_facts,
    ".md": markdown_facts, ".srt": subtitle_facts, ".vtt": subtitle_facts, ".txt": text_facts, ".text": text_facts,
    ".pdf": pdf_facts,
}


def read_facts(path: Path) -> Facts:
    try:
        return READERS[path.suffix.lower()](path)
    except Unreadable:
        raise
    except Exception as e:  # a part its library skipped is not well-formed XML, say
        raise Unreadable(f"{type(e).__name__}: {e}") from None


def shown(items: list, limit: int = 3) -> str:
    text = ", ".join(repr(i) for i in items[:limit])
    return text + (f" and {len(items) - limit} more" if len(items) > limit else "")


def compare(source: Facts, output: Facts) -> list[str]:
    """What changed from `source` to `output`, one line each."""
    problems = []
    for name, count in source.counts.items():
        if output.counts.get(name) != count:
            problems.append(f"{count} {name} became {output.counts.get(name, 0)}")
    for kind in dict.fromkeys(b.kind for b in source.blocks + output.blocks):
        before = [b for b in source.blocks if b.kind == kind]
        after = [b for b in output.blocks if b.kind == kind]
        if len(before) != len(after):
            problems.append(f"{len(before)} {kind}s became {len(after)}")
            continue
        emptied = [b.text.strip()[:40] for b, a in zip(before, after) if has_letters(b.text) and not has_letters(a.text)]
        if emptied:
            problems.append(f"{len(emptied)} {kind}s came back without text: {shown(emptied)}")
        unmarked = [(b.text.strip()[:40], sorted(b.marks - a.marks)) for b, a in zip(before, after) if b.marks - a.marks]
        if unmarked:
            problems.append(f"{len(unmarked)} {kind}s lost bold or italic: {shown(unmarked)}")
    for name, items in source.kept.items():
        after = output.kept.get(name, [])
        if items == after:
            continue
        lost = list((Counter(map(repr, items)) - Counter(map(repr, after))).elements())
        gained = list((Counter(map(repr, after)) - Counter(map(repr, items))).elements())
        if not lost and not gained:
            problems.append(f"{name}: the same, in another order")
        else:
            problems.append(f"{name}: {len(items)} became {len(after)}" + (f", lost {shown(lost)}" if lost else "")
                            + (f", gained {shown(gained)}" if gained else ""))
    for name, items in source.kept_within.items():
        after, at, lost = output.kept_within.get(name, []), 0, []
        for item in items:
            try:
                at = after.index(item, at) + 1
            except ValueError:
                lost.append(item)
        if lost:
            problems.append(f"{name}: {len(lost)} of {len(items)} lost or moved, the first {shown(lost[:3])}")
    return problems


def check_file(path: Path, out_path: Path, target: str, translate=stand_in) -> tuple[str, list[str]]:
    """(what happened, problems) for one document translated into `target` by
    `translate(path, out_path, target)` (`stand_in` or `EngineDocuments`)."""
    try:
        source = read_facts(path)
    except Unreadable as e:
        source, unreadable = None, str(e)
    try:
        translate(path, out_path, target)
    except DocumentError as e:
        if source is None:
            return f"refused, and rightly ({unreadable}): {e}", []
        if source.blocks and not any(has_letters(b.text) for b in source.blocks):
            return f"refused, and rightly (its library finds no text either): {e}", []
        return "refused", [f"refused, though its format's library reads it: {e}"]
    except Exception as e:
        return "crashed", [f"crashed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"]
    if source is None:
        return f"translated, though its source is unreadable ({unreadable})", []
    try:
        output = read_facts(out_path)
    except Unreadable as e:
        return "broken", [f"the output does not open: {e}"]
    return "translated", compare(source, output)


def check_folder(folder: Path, target: str, out=sys.stdout, translate=stand_in) -> int:
    """Check every supported document under `folder` into `target` (translated by `translate`, as
    `check_file`'s); prints per file and the total, returns the number of problems."""
    # Pictures are read by OCR, which the stand-in does not stand in for: tests/app/documents/test_ocr.py
    # and bench.ocr check them.
    files = sorted(p for p in folder.rglob("*") if p.is_file() and is_supported(p) and p.suffix.lower() not in PICTURES)
    total = 0
    with tempfile.TemporaryDirectory() as outputs:
        for path in files:
            relative = path.relative_to(folder)
            out_path = output_path(Path(outputs) / relative, target)
            out_path.parent.mkdir(parents=True, exist_ok=True)
            started = time.perf_counter()
            what, problems = check_file(path, out_path, target, translate)
            total += len(problems)
            print(f"{'PROBLEM' if problems else 'ok':8}{relative}: {what} ({time.perf_counter() - started:.1f} s)", file=out)
            for problem in problems:
                print(f"          {problem}", file=out)
            out.flush()
    print(f"{target}: {len(files)} files, {total} problems", file=out)
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.realdocs", description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", metavar="DIR", type=Path)
    parser.add_argument("--to", nargs="+", default=["fra_Latn", "zho_Hans"], metavar="LANG", help="target languages")
    parser.add_argument("--checkpoint", type=Path, metavar="DIR",
                        help="translate with the engine on this checkpoint (default: the stand-in translator)")
    parser.add_argument("--from", dest="source", default="eng_Latn", metavar="LANG",
                        help="source language given to the engine (default eng_Latn)")
    args = parser.parse_args(argv)
    translate = EngineDocuments(args.checkpoint, args.source) if args.checkpoint else stand_in
    problems = sum(check_folder(args.folder, target, translate=translate) for target in args.to)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
