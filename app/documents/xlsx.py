"""Excel (.xlsx): text cells of every sheet (shared and inline strings, rich text runs kept),
comments and threaded comments, text boxes and chart titles.

By hand (`xmlflow`) rather than through openpyxl, whose load-and-save round trip drops charts,
images and text boxes. Cell text lives in the shared strings part (one `si` per distinct string)
and in inline strings (`is`) of the sheets; numbers, dates, booleans and formulas are cell values
(`v`, `f`) and are never read. Strings with no letter (codes, "2024-01", "42%") stay as they are.
Sheet names are kept: formulas refer to them. A formula's cached text result is left for Excel
to recompute.

The parts come from the package relationships: sheets and shared strings from the workbook's,
comments and drawings from each sheet's, charts from the drawings.
"""

from __future__ import annotations

from pathlib import Path

from dragoman.app.documents.zipxml import ZipXmlDocument, open_office
from dragoman.app.documents.xmlflow import XmlFlow

EXTENSIONS = (".xlsx", ".xlsm", ".xltx")
TEXT_PARTS = frozenset({"sharedStrings", "worksheet", "comments", "threadedComment", "drawing", "chart"})
CHART_SHEETS = frozenset({"chartsheet"})  # no text of their own; their drawings hold the charts


class SheetFlow(XmlFlow):
    mixed = False
    blocks = frozenset({"si", "is", "text", "p"})  # shared string, inline string, comment, a:p
    plain_blocks = frozenset({"text"})  # a threaded comment's text
    leaves = frozenset({"r", "t"})
    breaks = frozenset({"br"})
    props = frozenset({"rPr", "pPr", "endParaRPr", "phoneticPr"})
    skips = frozenset({"sheetPr", "cols", "mergeCells", "conditionalFormatting", "dataValidations", "f", "v"})


def extract(path: Path) -> ZipXmlDocument:
    return open_office(path, "an Excel workbook", "workbook", SheetFlow(), TEXT_PARTS, CHART_SHEETS, main_is_text=False)
