"""PowerPoint (.pptx): every slide's text boxes, shapes, tables and grouped shapes, speaker notes,
comments, SmartArt and chart titles.

By hand (`xmlflow`) rather than through python-pptx, which has no way to rebuild a paragraph's
runs and does not reach SmartArt or comments; the parts come from the package relationships
(slides from the presentation's, notes, comments and charts from each slide's).
Slide masters and layouts are left alone: their text is placeholder prompts ("Click to edit
Master title style") that no slide shows. In a DrawingML paragraph (`a:p`), `a:br` ends a
segment, hyperlinks live in the run properties (so they are part of a run's formatting), and
fields (`a:fld`: slide number, date) are atoms.
"""

from __future__ import annotations

from pathlib import Path

from dragoman.app.documents.zipxml import ZipXmlDocument, open_office
from dragoman.app.documents.xmlflow import XmlFlow

EXTENSIONS = (".pptx", ".pptm", ".ppsx", ".potx")
TEXT_PARTS = frozenset({"slide", "notesSlide", "comments", "chart", "diagramData", "diagramDrawing"})


class SlideFlow(XmlFlow):
    mixed = False
    blocks = frozenset({"p", "text"})  # a:p; p:text of a legacy comment
    plain_blocks = frozenset({"text"})
    leaves = frozenset({"r"})
    breaks = frozenset({"br"})
    props = frozenset({"pPr", "endParaRPr"})


def extract(path: Path) -> ZipXmlDocument:
    return open_office(path, "a PowerPoint presentation", "presentation", SlideFlow(), TEXT_PARTS, main_is_text=False)
