"""Excel: string cells are translated; formulas, array and shared ones included, come back identical."""

import re
import zipfile

import openpyxl
from lxml import etree
from openpyxl.worksheet.formula import ArrayFormula

from dragoman.app.documents import translate_document

from document_fakes import Recording, upper_keeping_tags

FORMULA = re.compile(rb"<f\b[^>]*/>|<f\b[^>]*>.*?</f>", re.DOTALL)
SHARED = (
    b'<c r="D1"><f t="shared" ref="D1:D3" si="0">B1&amp;" items"</f><v>1 items</v></c>'
    b'<c r="D2" t="str"><f t="shared" si="0"/><v>2 items</v></c>'
)


def cached_values(sheet_xml: bytes) -> list:
    cells = etree.fromstring(sheet_xml).iter("{*}c")
    return [(c.get("r"), c.get("t"), c.findtext("{*}v")) for c in cells if c.find("{*}v") is not None]


def make_workbook(path):
    book = openpyxl.Workbook()
    sheet = book.active
    sheet["A1"] = "Hello world"
    sheet["B1"], sheet["B2"], sheet["C1"], sheet["C2"] = 1, 2, 3, 4
    sheet["A2"] = '=IF(B1>0,"Positive text","Negative text")'
    sheet["A3"] = ArrayFormula("A3:A4", "=SUM(B1:B2*C1:C2)")
    sheet["A5"] = "=TEXT(B1,\"0.0\")&\" apples\""
    book.save(path)
    with zipfile.ZipFile(path) as z:
        members = {name: z.read(name) for name in z.namelist()}
    sheet_xml = members["xl/worksheets/sheet1.xml"]
    members["xl/worksheets/sheet1.xml"] = sheet_xml.replace(b'</c></row>', b'</c>' + SHARED + b'</row>', 1)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)


def test_formulas_are_identical_and_only_string_cells_are_translated(tmp_path):
    translate = Recording(upper_keeping_tags)

    make_workbook(tmp_path / "in.xlsx")
    translate_document(tmp_path / "in.xlsx", tmp_path / "out.xlsx", translate)
    with zipfile.ZipFile(tmp_path / "in.xlsx") as a, zipfile.ZipFile(tmp_path / "out.xlsx") as b:
        before, after = a.read("xl/worksheets/sheet1.xml"), b.read("xl/worksheets/sheet1.xml")
    assert len(FORMULA.findall(before)) == 5
    assert FORMULA.findall(after) == FORMULA.findall(before)
    assert cached_values(after) == cached_values(before)
    assert translate.sent == ["Hello world"]
    sheet = openpyxl.load_workbook(tmp_path / "out.xlsx").active
    assert sheet["A1"].value == "T:HELLO WORLD"
    assert isinstance(sheet["A3"].value, ArrayFormula) and sheet["A3"].value.ref == "A3:A4"
    assert sheet["A3"].value.text == "=SUM(B1:B2*C1:C2)"
