"""PDF blocks on a form, made with reportlab and read back with pdfminer.six: row numbers set apart
from their labels are blocks of their own, kept as they are; labels that do not run on from one
to the next are not joined into one sentence."""

from pdfminer.high_level import extract_pages
from pdfminer.layout import LTChar
from reportlab.lib.pagesizes import A4
from reportlab.pdfgen import canvas

from dragoman.app.documents import pdf_blocks, translate_document

from document_fakes import Recording, upper_keeping_tags

W, H = A4
ROWS = [("1", "wages, salaries and tips"), ("2", "taxable interest"), ("8a", "ordinary dividends"),
        ("17", "other income from the list")]
DENSE_ROWS = [("19", "unemployment compensation", 76), ("20a", "social security benefits", 100)]  # (number, label, its x)


def make_form(path):
    """Numbered rows (the number in bold, a wide gap, the label; a rule under each row, a field on
    the right), denser rows, one with its label far from its number (pdfminer gives that number a
    line of its own), a footnote with its number, name and address labels one under the other, and
    labels side by side."""
    c = canvas.Canvas(str(path), pagesize=A4)
    for row, (number, label) in enumerate(ROWS):
        y = H - 100 - 20 * row
        c.setFont("Helvetica-Bold", 9)
        c.drawString(60, y, number)
        c.setFont("Helvetica", 9)
        c.drawString(78, y, label)  # about an em after the number: pdfminer puts both in one line
        c.line(56, y - 5, 400, y - 5)
        c.rect(300, y - 3, 90, 12)
    for row, (number, label, x) in enumerate(DENSE_ROWS):  # close enough for pdfminer to put them in one box
        y = H - 200 - 12 * row
        c.setFont("Helvetica-Bold", 8)
        c.drawString(60, y, number)
        c.setFont("Helvetica", 8)
        c.drawString(x, y, label)
    c.setFont("Helvetica", 9)
    for row, label in enumerate(["first name", "last name", "home address"]):
        c.drawString(60, H - 250 - 30 * row, label)
        c.line(130, H - 252 - 30 * row, 400, H - 252 - 30 * row)
    for y, labels in ((H - 360, ("city", "postal code")), (H - 390, ("country", "phone"))):  # side by side
        for x, label in zip((60, 250), labels):
            c.drawString(x, y, label)
    c.setFont("Helvetica", 7)
    c.drawString(60, 60, "3)")
    c.drawString(72, 60, "Enter the amount shown on the statement.")
    c.showPage()
    c.save()


def test_row_numbers_are_kept_apart_from_their_labels(tmp_path):
    source, out = tmp_path / "form.pdf", tmp_path / "form.fra_Latn.pdf"
    make_form(source)
    translate = Recording(upper_keeping_tags)

    translate_document(source, out, translate)
    assert sorted(translate.sent) == sorted([row[1] for row in ROWS + DENSE_ROWS] + ["first name", "last name", "home address",
                                                                   "city", "postal code", "country", "phone",
                                                                   "Enter the amount shown on the statement."])

    def chars(path):
        return [c for page in extract_pages(str(path)) for box in page if hasattr(box, "__iter__")
                for line in box if hasattr(line, "__iter__") for c in line if isinstance(c, LTChar)]

    numbers = lambda path: [(c.get_text(), round(c.x0, 2), round(c.y0, 2)) for c in chars(path)
                            if c.fontname == "Helvetica-Bold" or (c.get_text() in "3)" and c.size < 8 and c.fontname == "Helvetica")]
    assert numbers(out) == numbers(source)  # drawn by the original operators, where they were
    for row, (_, label) in enumerate(ROWS):  # each label's translation starts where the label did
        line = sorted((c for c in chars(out) if "Noto" in c.fontname and abs(c.y0 - chars(source)[0].y0 + 20 * row) < 3),
                      key=lambda c: c.x0)
        assert "".join(c.get_text() for c in line).replace(" ", "") == "T:" + label.upper().replace(" ", "")
        assert abs(line[0].x0 - 78) < 1


def test_justified_text_gives_single_spaces(tmp_path):
    """reportlab justifies with word spacing on drawn spaces; pdfminer adds its own space where the
    gap is wide: the model gets one space between words."""
    from reportlab.lib.enums import TA_JUSTIFY
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.platypus import Frame, Paragraph

    source = tmp_path / "justified.pdf"
    text = ("Justified lines stretch the spaces between their words so that both edges are straight. "
            "The last line of the paragraph is set as it comes.")
    c = canvas.Canvas(str(source), pagesize=A4)
    style = ParagraphStyle("body", fontName="Times-Roman", fontSize=10, leading=12.5, alignment=TA_JUSTIFY)
    Frame(72, H - 300, 160, 200).addFromList([Paragraph(text, style)], c)  # narrow: wide spaces
    c.showPage()
    c.save()
    translate = Recording(upper_keeping_tags)
    translate_document(source, tmp_path / "justified.x.pdf", translate)
    assert translate.sent == ["Justified lines stretch the spaces between their words so that both edges are straight.",
                    "The last line of the paragraph is set as it comes."]


CHECKED_ROWS = ["Single resident of Canada or Mexico, or a single national", "Other single nonresident alien",
                "Married resident of Canada or Mexico, or a married national", "Other married nonresident alien"]
PLEADING = ["The parties to this action agree that the court may hear the", "motion on the papers that were filed alone, without a",
            "hearing of the parties."]


def test_rows_numbered_apart_from_their_labels_are_not_joined_and_a_margin_of_line_numbers_is_no_rows(tmp_path):
    """A form's rows (the number, a check box, the label; no rule between rows: pdfminer gives the
    numbers a box of their own and the labels one together) are one block each, though a label may
    run nearly the row's width. A pleading's paragraph beside its margin of line numbers, a ruled
    line between, is one sentence."""
    source, out = tmp_path / "rows.pdf", tmp_path / "rows.fra_Latn.pdf"
    c = canvas.Canvas(str(source), pagesize=A4)
    c.setFont("Helvetica", 9)
    for row, label in enumerate(CHECKED_ROWS):
        y = H - 100 - 12 * row
        c.drawString(56, y, str(row + 1))
        c.rect(70, y - 1, 8, 8)
        c.drawString(92, y, label)
    c.setFont("Helvetica", 12)
    for row, line in enumerate(PLEADING):
        y = H - 300 - 14 * row
        c.drawRightString(48, y, str(row + 1))
        c.drawString(72, y, line)
    c.line(60, H - 340, 60, H - 280)
    c.showPage()
    c.save()
    translate = Recording(upper_keeping_tags)
    translate_document(source, out, translate)
    assert sorted(translate.sent) == sorted(CHECKED_ROWS + [" ".join(PLEADING)])
    # the pleading's lines, which a chain would join again as one sentence, are one block
    blocks = [b for b in pdf_blocks.read_pages(source.read_bytes())[0].blocks if b.translate]
    assert [b.text for b in blocks] == CHECKED_ROWS + [" ".join(PLEADING)]


CODES = [("03-7FA81.05", "Clutch valve fault: open load"), ("00-07F8A0.5", "No signal from the crankshaft")]


def test_a_table_s_cells_that_sit_close_are_cut_at_its_column_lines(tmp_path):
    """A table of codes and their descriptions, the cells close enough for pdfminer to read each row
    as one line: its column line cuts the row into cells, each translated alone and set in its cell."""
    source, out = tmp_path / "codes.pdf", tmp_path / "codes.fra_Latn.pdf"
    c = canvas.Canvas(str(source), pagesize=A4)
    c.setFont("Helvetica", 9)
    for row, (code, description) in enumerate(CODES):
        y = H - 100 - 14 * row
        c.drawString(60, y, code)  # to 112
        c.drawString(118, y, description)
        c.line(58, y - 4, 300, y - 4)
    c.line(115, H - 100 - 14 * len(CODES) + 10, 115, H - 90)
    c.showPage()
    c.save()
    translate = Recording(upper_keeping_tags)
    translate_document(source, out, translate)
    assert sorted(translate.sent) == sorted(text for row in CODES for text in row)
    cells = [(b.text, b.bbox[0] > 115) for b in pdf_blocks.read_pages(out.read_bytes())[0].blocks]  # right of the column line
    assert cells == [("T:" + text.upper(), right) for row in CODES for text, right in zip(row, (False, True))]


SHORT_LINES = ["Readability counts.", "Flat is better than nested.", "Now is better than never.",
               "Errors should never pass silently."]
NOTES = ["2021 estimate", "2020 estimate", "2020 census"]


def test_lines_broken_where_the_next_word_would_fit_and_footnotes_are_blocks_of_their_own(tmp_path):
    """Short lines of nearly one length, each a sentence (the next line's first word would have fitted
    after it), are a block each, and so is each footnote (its mark a small raised number), where a
    wrapped paragraph's lines are one block."""
    source = tmp_path / "lines.pdf"
    c = canvas.Canvas(str(source), pagesize=A4)
    c.setFont("Helvetica", 10)
    for row, line in enumerate(SHORT_LINES):
        c.drawString(60, H - 100 - 12 * row, line)
    for row, line in enumerate(PLEADING):
        c.drawString(60, H - 200 - 12 * row, line)
    for row, note in enumerate(NOTES):
        y = 80 - 10 * row
        c.setFont("Helvetica", 5)
        c.drawString(60, y + 3, str(row + 1))
        c.setFont("Helvetica", 8)
        c.drawString(64, y, note)
    c.showPage()
    c.save()
    blocks = [b.text for b in pdf_blocks.read_pages(source.read_bytes())[0].blocks]
    assert blocks == SHORT_LINES + [" ".join(PLEADING)] + [f"{n} {note}" for n, note in enumerate(NOTES, 1)]


def test_each_line_may_run_as_far_as_the_rightmost_line_of_its_size_in_its_box():
    """`_right_edges_by_size` (linear after a sort, for a hostile PDF's box of thousands of lines)
    gives what the rule says line by line, sizes at SIZE_CHANGE's boundary among them."""
    import random

    from dragoman.app.documents.pdf_blocks import SIZE_CHANGE, Line, _right_edges_by_size, _same_size

    rng = random.Random(0)
    for _ in range(500):
        base = rng.choice([8.0, 10.0, 11.5])
        sizes = [rng.choice([base, base * SIZE_CHANGE, base / SIZE_CHANGE, base * SIZE_CHANGE**2, rng.uniform(5, 30)])
                 for _ in range(rng.randint(1, 30))]
        lines = [Line([], 0, 0, rng.choice([rng.uniform(0, 600), 100.0]), 0, size, 0) for size in sizes]
        assert _right_edges_by_size(lines) == [max(o.x1 for o in lines if _same_size(line, o)) for line in lines]
