"""Markdown (.md): paragraphs, headings, list items, block quotes and table cells.

markdown-it-py (CommonMark + tables) finds the blocks and their source lines; each block's inline
content becomes a segment and is written back into its source lines, so everything else (code
blocks, HTML blocks, front matter, link reference definitions, spacing) is byte for byte the
original. Emphasis, strong, strikethrough and links are formatting carried onto the translation
(a link keeps its target and title); inline code, images, inline HTML and hard breaks are atoms.
A paragraph wrapped over several lines comes back as one line.
"""

from __future__ import annotations

import re
from pathlib import Path

from markdown_it import MarkdownIt

from app.documents.segments import Run, shared_depth
from app.documents.text import SlotDocument, read_text, split_lines

EXTENSIONS = (".md", ".markdown")
_ESCAPE = re.compile(r"([*_`\[\]\\])")


def _inline_runs(token) -> list[Run]:
    runs, chain = [], []
    for child in token.children or []:
        t = child.type
        if t == "text":
            runs.append(Run(child.content, tuple(chain)))
        elif t == "softbreak":
            runs.append(Run(" ", tuple(chain)))
        elif t in ("strong_open", "em_open", "s_open"):
            chain.append((t[:-5], child.markup))
        elif t == "link_open":
            chain.append(("link", child.attrs.get("href", ""), child.attrs.get("title")))
        elif t.endswith("_close"):
            if chain:
                chain.pop()
        elif t == "code_inline":
            fence = child.markup
            pad = " " if child.content.startswith("`") or child.content.endswith("`") else ""
            runs.append(Run("", tuple(chain), atom=f"{fence}{pad}{child.content}{pad}{fence}"))
        elif t == "image":
            alt = "".join(c.content for c in child.children or [])
            title = child.attrs.get("title")
            runs.append(Run("", tuple(chain), atom=f"![{alt}]({child.attrs.get('src', '')}{_title(title)})"))
        elif t == "hardbreak":
            runs.append(Run("", tuple(chain), atom="<br>"))
        else:  # html_inline and anything else: as written
            runs.append(Run("", tuple(chain), atom=child.content))
    return runs


def _title(title) -> str:
    return f' "{title}"' if title else ""


def _open(item) -> str:
    return "[" if item[0] == "link" else item[1]


def _close(item) -> str:
    return f"]({item[1]}{_title(item[2])})" if item[0] == "link" else item[1]


def render(runs: list[Run]) -> str:
    out, stack = [], []
    for run in runs:
        chain = list(run.style or ())
        depth = shared_depth(chain, stack)
        text = run.atom if run.atom is not None else _ESCAPE.sub(r"\\\1", run.text)
        for item in reversed(stack[depth:]):
            out.append(_close(item))
        opening = [_open(item) for item in chain[depth:]]
        if opening and run.atom is None:  # "** word**" is not emphasis: spaces go outside the markers
            lead = text[: len(text) - len(text.lstrip())]
            out.append(lead)
            text = text[len(lead) :]
        out.extend(opening)
        stack = chain
        if stack and run.atom is None and text != text.rstrip() and run is not runs[-1]:
            trail = text[len(text.rstrip()) :]
            out.append(text.rstrip())
            for item in reversed(stack):
                out.append(_close(item))
            stack = []
            out.append(trail)
        else:
            out.append(text)
    out.extend(_close(item) for item in reversed(stack))
    return "".join(out)


class MarkdownDocument(SlotDocument):
    def render(self, index: int, runs: list[Run]) -> str:
        return render(runs)


def extract(path: Path) -> MarkdownDocument:
    text, codec, bom = read_text(path)
    lines, newline, ends = split_lines(text)
    doc = MarkdownDocument(codec, bom)
    start = 0
    if lines and lines[0].strip() == "---":  # YAML front matter: kept as it is
        end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
        if end is not None:
            start = end + 1
    md = MarkdownIt("commonmark").enable("table").enable("strikethrough")
    tokens = md.parse("\n".join(lines[start:]))
    # (first line, last line + 1, inline token) of every block with inline text, in order
    blocks = [(t.map[0] + start, t.map[1] + start, t) for t in tokens if t.type == "inline" and t.map and t.content.strip()]
    line = 0
    column = 0
    for first, last, token in blocks:
        if first > line:
            doc.add_text(lines[line][column:] + newline if line < len(lines) else "")
            doc.add_text("".join(x + newline for x in lines[line + 1 : first]))
            line, column = first, 0
        first_line = token.content.split("\n")[0]
        found = lines[line].find(first_line, column)
        if found < 0:  # not found verbatim (escapes, entities): leave this block as written
            continue
        doc.add_text(lines[line][column:found])
        doc.add_segment(_inline_runs(token))
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
