"""PDF (.pdf): the text only, translated into a plain text file (STEM.<to>.txt).

pypdf extracts each page's text; lines are joined into paragraphs (a hyphen at a line end joins
the word), pages are separated by a blank line and a form feed. pypdf's text marks no paragraph
breaks (it never gives a blank line), so a paragraph ends where the gap down to the next line is
clearly wider than the page's usual line spacing. Layout, images and fonts are not
carried over: rebuilding a PDF's layout is future work. Encrypted PDFs open only when they have
no user password.
"""

from __future__ import annotations

import re
from pathlib import Path

from app.documents.safety import DocumentError, check_file
from app.documents.segments import Run
from app.documents.text import SlotDocument

EXTENSIONS = (".pdf",)
OUTPUT_SUFFIX = ".txt"


def extract(path: Path) -> SlotDocument:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    check_file(path)
    with open(path, "rb") as f:
        if not f.read(1024).lstrip().startswith(b"%PDF"):
            raise DocumentError("not a PDF (it does not start with %PDF)")
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
