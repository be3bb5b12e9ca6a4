"""Markdown (.md): paragraphs, headings, list items, block quotes and table cells.

markdown-it-py (CommonMark + tables) finds the blocks and their source lines; each block's inline
content becomes a segment and is written back into its source lines, so everything else (code
blocks, HTML blocks, front matter, link reference definitions, spacing) is byte for byte the
original. Emphasis, strong, strikethrough and links are formatting carried onto the translation
(a link keeps its target and title); inline code (as written, byte for byte), images, autolinks,
URLs, inline HTML and hard line breaks (two spaces or a backslash, then the next line's indent or
`>`) are atoms. A character the source wrote as an escape (`\\*`) or an entity (`&amp;`) is written
the same way in the translation. A paragraph wrapped over several lines comes back as one line
(its lines joined with a space, or none between Chinese or Japanese characters).

Emphasis markers are placed where CommonMark reads them as emphasis whatever the translation:
spaces and edge punctuation go outside them, `_` becomes `*` (which also works inside a word, as
in scripts without spaces), and two code spans never touch (they would read as one).
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from typing import cast

from markdown_it import MarkdownIt

from dragoman.app.documents.segments import Run, shared_depth
from dragoman.app.documents.sentences import UNSPACED_CHARACTER
from dragoman.app.documents.text import SlotDocument, addresses, read_text, split_lines

EXTENSIONS = (".md", ".markdown")
_SPECIAL = "*`"  # always escaped in translated text: they would start formatting
_ENTITY = re.compile(r"&(?:#\d{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")  # `&amp;` as text: escaped
# Escapes of these matter only where a block starts (a list item, a heading): written there only.
_LINE_START_ESCAPES = frozenset(".)-+#>")
_BLOCK_START = re.compile(r"^(\d{1,9}(?=[.)](?:\s|$))|(?=[-+]\s|#{1,6}(?:\s|$)|>))")


def _is_punctuation(ch: str) -> bool:
    return bool(ch) and unicodedata.category(ch)[0] in "PS"


def _code_source(raw: str, start: int, fence: str, content: str) -> tuple[str, int]:
    """The code span as written in `raw` at or after `start` (and where it ends), else as markdown-it read it."""
    pattern = re.compile(rf"(?<!`){re.escape(fence)}(?!`)(.+?)(?<!`){re.escape(fence)}(?!`)", re.DOTALL)
    position = start
    while (m := pattern.search(raw, position)) is not None:
        inner = m.group(1)
        if "\n" not in inner:
            stripped = inner[1:-1] if len(inner) > 2 and inner[0] == inner[-1] == " " and inner.strip() else inner
            if stripped == content:
                return m.group(0), m.end()
        position = m.start() + 1
    pad = " " if content.startswith("`") or content.endswith("`") else ""
    return f"{fence}{pad}{content}{pad}{fence}", start


def _text_runs(text: str, chain: tuple) -> list[Run]:
    """Text, with its URLs and e-mail addresses as atoms (never translated)."""
    runs, position = [], 0
    for start, end in addresses(text):
        runs += [Run(text[position:start], chain), Run("", chain, atom=text[start:end])]
        position = end
    return runs + [Run(text[position:], chain)]


def inline_runs(token, next_lines: list[str], newline: str) -> tuple[list[Run], dict[str, str]]:
    """The runs of an inline token, and how the source wrote characters it escaped or encoded.
    `next_lines`: the source lines after the token's first (a hard break keeps their indent or `>`)."""
    runs: list[Run] = []
    written: dict[str, str] = {}
    chain: list = []
    raw = token.content
    raw_lines = raw.split("\n")
    line = 0  # the content line being read
    cursor = 0  # how far code spans were found in raw
    children = token.children or []
    softbreaks: list[int] = []  # the runs that are line ends inside the paragraph
    i = 0
    while i < len(children):
        child = children[i]
        t = child.type
        if t == "text":
            runs += _text_runs(child.content, tuple(chain))
        elif t == "text_special":
            if child.info != "escape" or child.content not in _LINE_START_ESCAPES:
                written[child.content] = child.markup
            runs.append(Run(child.content, tuple(chain)))
        elif t == "softbreak":
            softbreaks.append(len(runs))
            runs.append(Run(" ", tuple(chain)))
            line += 1
        elif t == "hardbreak":
            ending = raw_lines[line]
            mark = "\\" if ending.endswith("\\") else ending[len(ending.rstrip(" ")) :]
            after = next_lines[line] if line < len(next_lines) else ""
            following = raw_lines[line + 1].lstrip() if line + 1 < len(raw_lines) else ""
            indent = after[: after.find(following)] if following and following in after else ""
            runs.append(Run("", tuple(chain), atom=mark + newline + indent))
            line += 1
        elif t in ("strong_open", "em_open", "s_open"):
            chain.append((t[:-5], child.markup))
        elif t == "link_open" and child.markup == "autolink":  # <https://...>: as written
            text = "".join(c.content for c in children[i + 1 : i + 2])
            runs.append(Run("", tuple(chain), atom=f"<{text}>"))
            i += 2  # its text and link_close
        elif t == "link_open":
            chain.append(("link", child.attrs.get("href", ""), child.attrs.get("title")))
        elif t.endswith("_close"):
            if chain:
                chain.pop()
        elif t == "code_inline":
            atom, cursor = _code_source(raw, cursor, child.markup, child.content)
            runs.append(Run("", tuple(chain), atom=atom))
        elif t == "image":
            title = child.attrs.get("title")
            runs.append(Run("", tuple(chain), atom=f"![{child.content}]({child.attrs.get('src', '')}{_title(title)})"))
        else:  # html_inline and anything else: as written
            runs.append(Run("", tuple(chain), atom=child.content))
        i += 1
    for k in softbreaks:  # lines of Chinese or Japanese join without a space
        before, after = runs[k - 1].text[-1:] if k else "", runs[k + 1].text[:1] if k + 1 < len(runs) else ""
        if UNSPACED_CHARACTER.match(before) and UNSPACED_CHARACTER.match(after):
            runs[k].text = ""
    return [run for run in runs if run.text or run.atom is not None], written


class _TargetsAsWritten(MarkdownIt):
    """Link and image targets, autolinks too, as written: not percent-encoded or decoded (`%7B`, `{{ x }}`)."""

    def normalizeLink(self, url: str) -> str:
        return url

    def normalizeLinkText(self, link: str) -> str:
        return link


def _title(title) -> str:
    return f' "{title}"' if title else ""


def _open(item) -> str:
    return "[" if item[0] == "link" else item[1]


def _close(item) -> str:
    return f"]({item[1]}{_title(item[2])})" if item[0] == "link" else item[1]


def _escape(text: str, written: dict[str, str]) -> str:
    out = []
    for k, ch in enumerate(text):
        if ch in written:
            out.append(written[ch])
        elif ch in _SPECIAL or (ch == "\\" and _is_punctuation(text[k + 1 : k + 2])) or (ch == "&" and _ENTITY.match(text, k)):
            out.append("\\" + ch)
        elif ch == "_" and not (text[k - 1 : k].isalnum() and text[k + 1 : k + 2].isalnum()):
            out.append("\\_")
        else:
            out.append(ch)
    return "".join(out)


def _kind(ch: str | None) -> str:
    """How CommonMark's flanking rules see a character next to a marker (None: the text's edge)."""
    if ch is None or ch.isspace():
        return "space"
    return "punctuation" if _is_punctuation(ch) else "word"


def _neighbour(items: list[list], index: int, step: int) -> str | None:
    """The character next to a marker: the first (step 1) or last (step -1) of the items from `index` on."""
    while 0 <= index < len(items):
        if items[index][1]:
            return items[index][1][0] if step == 1 else items[index][1][-1]
        index += step
    return None


def _content(items: list[list], index: int, step: int) -> bool:
    """Is there text, an atom or a link from `index` on (step 1) or back (step -1) up to an emphasis marker?"""
    while 0 <= index < len(items) and items[index][0] not in ("open", "close"):
        if items[index][1] and items[index][0] != "link-close":
            return True
        index += step
    return False


def _goes_out(ch: str, beyond: str) -> bool:
    """Whether `ch`, just inside an emphasis marker with a character of kind `beyond` on its other
    side, must move outside it for CommonMark to read the marker: a space always, punctuation
    where a word is beyond."""
    return _kind(ch) == "space" or (beyond == "word" and _kind(ch) == "punctuation")


def _balance(items: list[list]) -> None:
    """Move spaces and edge punctuation from inside emphasis markers to outside them where CommonMark
    would otherwise not read the markers as emphasis. `items`: [kind, text] with kind "text", "atom",
    "open" or "close" (emphasis only; links have no such rules)."""

    i = 0
    while i < len(items):
        kind = items[i][0]
        if kind == "open" and (i == 0 or items[i - 1][0] != "open"):
            j = i
            while j < len(items) and items[j][0] == "open":
                j += 1
            if j < len(items) and items[j][0] == "text":
                text, before = items[j][1], _kind(_neighbour(items, i - 1, -1))
                cut = 0
                while cut < len(text) and _goes_out(text[cut], before):
                    before = _kind(text[cut])  # what goes out is what the marker then follows
                    cut += 1
                if 0 < cut and (cut < len(text) or _content(items, j + 1, 1)):
                    items[j][1] = text[cut:]
                    items.insert(i, ["text", text[:cut]])
                    i += 1
        elif kind == "close" and (i + 1 == len(items) or items[i + 1][0] != "close"):
            j = i
            while j >= 0 and items[j][0] == "close":
                j -= 1
            if j >= 0 and items[j][0] == "text":
                text, after = items[j][1], _kind(_neighbour(items, i + 1, 1))
                cut = len(text)
                while cut > 0 and _goes_out(text[cut - 1], after):
                    after = _kind(text[cut - 1])
                    cut -= 1
                if cut < len(text) and (cut > 0 or _content(items, j - 1, -1)):
                    items[j][1] = text[:cut]
                    items.insert(i + 1, ["text", text[cut:]])
                    i += 1
        i += 1


def _underscores_to_stars(items: list[list]) -> None:
    """`_` emphasis touching a letter or digit outside it (as in a translation without spaces) is
    not emphasis in CommonMark: such a pair of markers becomes `*`, which is."""
    opened = []
    for i, (kind, text) in enumerate(items):
        if kind == "open":
            opened.append(i)
        elif kind == "close":
            start = opened.pop()
            if text.startswith("_"):
                before, after = _neighbour(items, start - 1, -1), _neighbour(items, i + 1, 1)
                if _kind(before) == "word" or _kind(after) == "word":
                    items[start][1] = items[i][1] = "*" * len(text)


def render(runs: list[Run], written: dict[str, str] | None = None, paragraph: bool = False) -> str:
    """Runs as Markdown; `written`: characters to write as the source did (`&` as `&amp;`); a
    paragraph's text never starts like a list item, heading or quote."""
    items: list[list] = []
    stack: list = []
    for run in runs:
        chain = list(cast(tuple, run.style) or ())  # this format's styles are chains of tags
        depth = shared_depth(chain, stack)
        for item in reversed(stack[depth:]):
            items.append(["link-close" if item[0] == "link" else "close", _close(item)])
        for item in chain[depth:]:
            items.append(["link-open" if item[0] == "link" else "open", _open(item)])
        stack = chain
        if run.atom is None:
            items.append(["text", _escape(run.text, written or {})])
            continue
        assert isinstance(run.atom, str)  # this format's atoms are Markdown as written
        if run.atom.startswith("`") and any(it[1] for it in items) and next(it[1] for it in reversed(items) if it[1])[-1] == "`":
            items.append(["text", " "])  # two code spans touching would read as one
        items.append(["atom", run.atom])
    for item in reversed(stack):
        items.append(["link-close" if item[0] == "link" else "close", _close(item)])
    _balance(items)
    _underscores_to_stars(items)
    text = "".join(text for _, text in items)
    return _BLOCK_START.sub(lambda m: m.group(1) + "\\", text, count=1) if paragraph else text


class MarkdownDocument(SlotDocument):
    def __init__(self, codec: str, bom: bytes):
        super().__init__(codec, bom)
        self.written: dict[int, dict[str, str]] = {}
        self.paragraphs: set[int] = set()  # the segments that are paragraphs (not headings or table cells)

    def render(self, index: int, runs: list[Run]) -> str:
        return render(runs, self.written.get(index), index in self.paragraphs)


def extract(path: Path) -> MarkdownDocument:
    text, codec, bom = read_text(path)
    lines, newline, ends = split_lines(text)
    doc = MarkdownDocument(codec, bom)
    start = 0
    if lines and lines[0].strip() == "---":  # YAML front matter: kept as it is
        end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
        if end is not None:
            start = end + 1
    md = _TargetsAsWritten("commonmark").enable("table").enable("strikethrough").disable("text_join")
    tokens = md.parse("\n".join(lines[start:]))
    # (first line, last line + 1, inline token, is it a paragraph) of every block with inline text, in order
    blocks = [(t.map[0] + start, t.map[1] + start, t, k and tokens[k - 1].type == "paragraph_open")
              for k, t in enumerate(tokens) if t.type == "inline" and t.map and t.content.strip()]
    line = 0
    column = 0
    for first, last, token, paragraph in blocks:
        if first > line:
            doc.add_text(lines[line][column:] + newline if line < len(lines) else "")
            doc.add_text("".join(x + newline for x in lines[line + 1 : first]))
            line, column = first, 0
        first_line = token.content.split("\n")[0]
        found = lines[line].find(first_line, column)
        if found < 0:  # not found verbatim: leave this block as written
            continue
        doc.add_text(lines[line][column:found])
        runs, written = inline_runs(token, lines[line + 1 :], newline)
        if written:
            doc.written[len(doc.segments)] = written
        if paragraph:
            doc.paragraphs.add(len(doc.segments))
        doc.add_segment(runs)
        last_content = token.content.split("\n")[-1]
        end_line = line + token.content.count("\n")
        end_col = lines[end_line].find(last_content) + len(last_content) if end_line != line else found + len(first_line)
        line, column = end_line, end_col
    if line < len(lines):
        doc.add_text(lines[line][column:] + (newline if line + 1 < len(lines) or ends else ""))
        doc.add_text("".join(x + newline for x in lines[line + 1 :]))
    if not ends and doc.pieces and isinstance(doc.pieces[-1], str) and doc.pieces[-1].endswith(newline) and line + 1 < len(lines):
        doc.pieces[-1] = doc.pieces[-1][: -len(newline)]
    return doc
