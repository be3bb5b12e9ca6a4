"""PDF (.pdf): the text only, translated into a plain text file (STEM.<to>.txt).

pypdf extracts each page's text; lines are joined into paragraphs (a hyphen at a line end joins
the word), pages are separated by a blank line and a form feed. Layout, images and fonts are not
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
        pages = [page.extract_text() or "" for page in reader.pages]
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


def write(document: SlotDocument, translations, out_path: Path) -> None:
    document.write(translations, out_path)
