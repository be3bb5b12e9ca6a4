"""Word (.docx): body, tables, headers and footers, footnotes, endnotes, comments, text boxes,
SmartArt and chart titles.

The XML is handled by hand (`xmlflow`) rather than through python-docx, which reads only the body,
tables and headers: footnotes, comments, text boxes and charts are out of its reach, and it has no
way to rebuild a paragraph's runs. The parts come from the package relationships (the main part
whatever `_rels/.rels` names, the others related from it); everything else in the archive is
copied byte for byte.

In a paragraph, a run holding a break or a tab ends a segment; a hyperlink, insertion or content
control keeps its runs together; field codes, note references, drawings, bookmarks, formulas
(`m:oMath`) and deleted text are atoms. Proofing marks (`w:proofErr`,
`w:lastRenderedPageBreak`) are dropped: Word recomputes them. The text inside a complex field's
result (e.g. a cross-reference's shown text) is translated like any text.
"""

from __future__ import annotations

from pathlib import Path

from dragoman.app.documents.zipxml import ZipXmlDocument, open_office
from dragoman.app.documents.xmlflow import XmlFlow

EXTENSIONS = (".docx", ".docm", ".dotx")
TEXT_PARTS = frozenset(
    {"header", "footer", "footnotes", "endnotes", "comments", "chart", "diagramData", "diagramDrawing"}
)


class WordFlow(XmlFlow):
    mixed = False
    blocks = frozenset({"p"})  # w:p, and a:p in charts and SmartArt
    leaves = frozenset({"r"})
    inlines = frozenset({"hyperlink", "ins", "smartTag", "sdt", "sdtContent", "customXml", "moveTo", "dir", "bdo"})
    breaks = frozenset({"br"})  # a:br
    props = frozenset({"pPr", "rPr", "endParaRPr", "sdtPr", "sdtEndPr"})
    skips = frozenset({"del", "moveFrom"})
    break_children = frozenset({"br", "cr", "tab"})
    dropped = frozenset({"proofErr", "lastRenderedPageBreak"})


def extract(path: Path) -> ZipXmlDocument:
    return open_office(path, "a Word document", "document", WordFlow(), TEXT_PARTS)
