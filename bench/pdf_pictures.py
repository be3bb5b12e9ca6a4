"""`python -m bench.pdf_pictures [--form F1040.pdf] [--scan eurotext.tif] [FOLDER]`: pages before and after PDF translation, side by side.

Each picture is rendered with pypdfium2 from documents that go through the app's document path
(app.documents.translate_document):
- FOLDER/pdf-before-after.png: a brochure page made here with reportlab (two columns, a heading
  on a coloured band, a picture, a table, a link, a footer), into German and Arabic;
- FOLDER/pdf-paper.png: a two-column paper page made here (title, abstract, headings, justified
  columns, a figure with its caption, a table, a footnote, a running header), into German;
- FOLDER/scan-before-after.png: the brochure printed and scanned (rendered at 300 dpi, turned
  0.8 degrees, noised, put in a PDF as a scanner does), read by OCR and translated into German;
- FOLDER/pdf-form.png, with --form: page 1 of a real form, the 2010 IRS Form 1040 (a work of
  the US federal government, in the public domain; pdf.js keeps a filled-in copy as
  test/pdfs/prefilled_f1040.pdf), into a pseudo-translation;
- FOLDER/scan-real-before-after.png, with --scan: a real scan, Tesseract's test page of printed
  text in seven languages (tesseract-ocr/test, testing/eurotext.tif, Apache-2.0: a 300 dpi
  bilevel scan, a little crooked), read by OCR and translated into German; it comes back as a
  picture. Another scan (a PDF of scanned pages, or a picture) gets the pseudo-translation.
The German and Arabic are fixed sentences written for these pictures, not a model's output; the
form, which has too many texts to write by hand, gets the pseudo-translation that software
localisation uses to test layouts (`pseudo`): each letter accented, each longer word a third
longer. The pictures show the layout work (text removed and set again in
its boxes, right to left in Arabic), not translation quality.
"""

from __future__ import annotations

import io
import tempfile
from pathlib import Path
from typing import Callable

from dragoman.app.documents import translate_document

SENTENCES = {
    "Visit the old town": ("Besuchen Sie die Altstadt", "زوروا المدينة القديمة"),
    "A guide for the first day": ("Ein Führer für den ersten Tag", "دليل لليوم الأول"),
    "The old town lies on a hill above the river.": ("Die Altstadt liegt auf einem Hügel über dem Fluss.",
                                                     "تقع المدينة القديمة على تلة فوق النهر."),
    "Its narrow streets lead to the market square, where the town hall has stood for five hundred years.": (
        "Ihre engen Gassen führen zum Marktplatz, wo das Rathaus seit fünfhundert Jahren steht.",
        "تؤدي شوارعها الضيقة إلى ساحة السوق حيث تقف دار البلدية منذ خمسمئة عام."),
    "Start early in the morning, when the light is soft and the cafés open their doors.": (
        "Beginnen Sie früh am Morgen, wenn das Licht weich ist und die Cafés ihre Türen öffnen.",
        "ابدأوا في الصباح الباكر، حين يكون الضوء ناعماً وتفتح المقاهي أبوابها."),
    "The museum by the bridge shows the history of the town in ten rooms.": (
        "Das Museum an der Brücke zeigt die Geschichte der Stadt in zehn Räumen.",
        "يعرض المتحف قرب الجسر تاريخ المدينة في عشر قاعات."),
    "In the evening, walk along the river to the old mill and watch the boats come home.": (
        "Gehen Sie am Abend am Fluss entlang zur alten Mühle und sehen Sie den Booten bei der Heimkehr zu.",
        "في المساء، امشوا على طول النهر إلى الطاحونة القديمة وشاهدوا القوارب تعود."),
    "Opening hours": ("Öffnungszeiten", "ساعات العمل"),
    "Museum": ("Museum", "المتحف"),
    "Town hall": ("Rathaus", "دار البلدية"),
    "Every day": ("Täglich", "كل يوم"),
    "Weekdays": ("Werktags", "أيام الأسبوع"),
    "More on the town's website.": ("Mehr auf der Website der Stadt.", "المزيد على موقع المدينة."),
}

# eurotext.tif's sentences (English, German, French, Italian, Spanish, Portuguese), into German.
EUROTEXT = {
    "The (quick) [brown] {fox} jumps!": ("Der (schnelle) [braune] {Fuchs} springt!",),
    "Over the $43,456.78 <lazy> #90 dog & duck/goose, as 12.5% of E-mail from aspammer@website.com is spam.": (
        "Über den $43,456.78 <faulen> #90 Hund & die Ente/Gans, da 12.5% der E-Mails von aspammer@website.com Spam sind.",),
    "Der „schnelle” braune Fuchs springt über den faulen Hund.": ("Der „schnelle“ braune Fuchs springt über den faulen Hund.",),
    "Le renard brun «rapide» saute par-dessus le chien paresseux.": ("Der braune «schnelle» Fuchs springt über den faulen Hund.",),
    "La volpe marrone rapida salta sopra il cane pigro.": ("Der schnelle braune Fuchs springt über den faulen Hund.",),
    "El zorro marrón rápido salta sobre el perro perezoso.": ("Der schnelle braune Fuchs springt über den faulen Hund.",),
    "A raposa marrom rápida salta sobre o cão preguiçoso.": ("Der schnelle braune Fuchs springt über den faulen Hund.",),
}


def make_page(path: Path) -> None:
    from PIL import Image, ImageDraw
    from reportlab.lib.pagesizes import A5
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    width, height = A5
    c = canvas.Canvas(str(path), pagesize=A5)
    c.setFillColorRGB(0.12, 0.3, 0.5)
    c.rect(0, height - 70, width, 70, stroke=0, fill=1)
    c.setFillColorRGB(1, 1, 1)
    c.setFont("Helvetica-Bold", 22)
    c.drawString(30, height - 42, "Visit the old town")
    c.setFont("Helvetica", 10)
    c.drawString(30, height - 60, "A guide for the first day")
    picture = Image.new("RGB", (300, 120), (150, 190, 220))
    draw = ImageDraw.Draw(picture)
    draw.polygon([(0, 120), (90, 40), (160, 90), (230, 30), (300, 120)], fill=(70, 110, 80))
    draw.ellipse((240, 10, 270, 40), fill=(250, 220, 120))
    data = io.BytesIO()
    picture.save(data, "PNG")
    data.seek(0)
    c.drawImage(ImageReader(data), 30, height - 200, width - 60, 115)
    c.setFillColorRGB(0, 0, 0)
    left = ["The old town lies on a hill above the", "river. Its narrow streets lead to the",
            "market square, where the town hall has", "stood for five hundred years."]
    right = ["Start early in the morning, when the", "light is soft and the cafés open their",
             "doors. The museum by the bridge shows", "the history of the town in ten rooms."]
    for x, lines in ((30, left), (width / 2 + 8, right)):
        text = c.beginText(x, height - 222)
        text.setFont("Helvetica", 9)
        text.setLeading(12)
        for line in lines:
            text.textLine(line)
        c.drawText(text)
    text = c.beginText(30, height - 290)
    text.setFont("Helvetica-Oblique", 9)
    text.setLeading(12)
    for line in ["In the evening, walk along the river to the old mill and watch the", "boats come home."]:
        text.textLine(line)
    c.drawText(text)
    c.setFont("Helvetica-Bold", 11)
    c.drawString(30, height - 340, "Opening hours")
    rows = [("Museum", "Every day", "10:00 - 18:00"), ("Town hall", "Weekdays", "09:00 - 16:00")]
    for r, row in enumerate(rows):
        y = height - 365 - 20 * r
        for col, cell in enumerate(row):
            c.setFont("Helvetica", 9)
            c.drawString(36 + 110 * col, y + 6, cell)
        c.line(30, y, width - 30, y)
    c.setFont("Helvetica", 9)
    c.setFillColorRGB(0.12, 0.3, 0.5)
    c.drawString(30, 60, "More on the town's website.")
    c.linkURL("https://example.org/", (30, 56, 160, 70))
    c.setFillColorRGB(0.4, 0.4, 0.4)
    c.setFont("Helvetica", 8)
    c.drawString(width - 40, 30, "12")
    c.showPage()
    c.save()


PAPER = {
    "Proceedings of the Workshop on Document Layout, 2026": "Tagungsband des Workshops zu Dokumentlayout, 2026",
    "Reading order in born-digital documents": "Lesereihenfolge in digital erzeugten Dokumenten",
    "A. Writer, B. Author": "A. Writer, B. Author",
    "Department of Informatics, Example University": "Institut für Informatik, Beispieluniversität",
    "Abstract": "Zusammenfassung",
    "We study how a program can find the order in which people read the parts of a page.":
        "Wir untersuchen, wie ein Programm die Reihenfolge finden kann, in der Menschen die Teile einer Seite lesen.",
    "Columns, tables and footnotes make this harder than it looks.":
        "Spalten, Tabellen und Fußnoten machen das schwieriger, als es aussieht.",
    "Our method uses the positions and sizes of the characters alone.":
        "Unsere Methode verwendet allein die Positionen und Größen der Zeichen.",
    "1 Introduction": "1 Einleitung",
    "A page of a scientific paper is read column by column, from the top down.":
        "Eine Seite eines wissenschaftlichen Artikels wird Spalte für Spalte von oben nach unten gelesen.",
    "Headings, figures and their captions interrupt the flow of the text.":
        "Überschriften, Abbildungen und ihre Bildunterschriften unterbrechen den Fluss des Textes.",
    "A translation must keep this order, or its sentences lose their meaning.1":  # 1: a footnote's mark
        "Eine Übersetzung muss diese Reihenfolge bewahren, sonst verlieren ihre Sätze ihren Sinn.1",
    "Figure 1 shows how often each kind of block appears in our test set.":
        "Abbildung 1 zeigt, wie oft jede Art von Block in unserer Testmenge vorkommt.",
    "Figure 1: Blocks per page in the test set.": "Abbildung 1: Blöcke pro Seite in der Testmenge.",
    "2 Method": "2 Methode",
    "Characters are first grouped into lines, and lines into blocks.":
        "Zeichen werden zuerst zu Zeilen gruppiert und Zeilen zu Blöcken.",
    "A block ends where the font size changes or where a line starts indented.":
        "Ein Block endet dort, wo sich die Schriftgröße ändert oder eine Zeile eingerückt beginnt.",
    "Blocks are then ordered by column and by their height on the page.":
        "Die Blöcke werden dann nach Spalte und nach ihrer Höhe auf der Seite geordnet.",
    "Table 1: Accuracy of the reading order.": "Tabelle 1: Genauigkeit der Lesereihenfolge.",
    "Document type": "Dokumenttyp", "Pages": "Seiten", "Correct": "Richtig",
    "Papers": "Artikel", "Forms": "Formulare", "Brochures": "Broschüren",
    "The results in Table 1 show that forms are the hardest case.":
        "Die Ergebnisse in Tabelle 1 zeigen, dass Formulare der schwierigste Fall sind.",
    "Their labels stand in rows and columns rather than in sentences.":
        "Ihre Beschriftungen stehen in Zeilen und Spalten statt in Sätzen.",
    "1 The test set and the program are available from the authors.":
        "1 Die Testmenge und das Programm sind bei den Autoren erhältlich.",
}


def make_paper(path: Path) -> None:
    from PIL import Image, ImageDraw
    from reportlab.lib.enums import TA_CENTER, TA_JUSTIFY
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.pdfgen import canvas
    from reportlab.platypus import Frame, Image as Picture, Paragraph, Spacer, Table, TableStyle

    width, height = A4
    body = ParagraphStyle("body", fontName="Times-Roman", fontSize=10, leading=12.5, alignment=TA_JUSTIFY)
    heading = ParagraphStyle("heading", fontName="Times-Bold", fontSize=12, leading=15, spaceBefore=6, spaceAfter=3)
    caption = ParagraphStyle("caption", fontName="Times-Italic", fontSize=9, leading=11, alignment=TA_CENTER)
    c = canvas.Canvas(str(path), pagesize=A4)
    c.setFont("Times-Italic", 8)
    c.drawString(56, height - 36, "Proceedings of the Workshop on Document Layout, 2026")
    c.setFont("Times-Bold", 18)
    c.drawCentredString(width / 2, height - 80, "Reading order in born-digital documents")
    c.setFont("Times-Roman", 11)
    c.drawCentredString(width / 2, height - 100, "A. Writer, B. Author")
    c.setFont("Times-Italic", 10)
    c.drawCentredString(width / 2, height - 114, "Department of Informatics, Example University")
    abstract = [Paragraph("Abstract", ParagraphStyle("a", parent=heading, alignment=TA_CENTER, fontSize=10)),
                Paragraph("We study how a program can find the order in which people read the parts of a page. "
                          "Columns, tables and footnotes make this harder than it looks. "
                          "Our method uses the positions and sizes of the characters alone.",
                          ParagraphStyle("i", parent=body, fontName="Times-Italic"))]
    Frame(110, height - 215, width - 220, 90, showBoundary=0).addFromList(abstract, c)
    chart = Image.new("RGB", (460, 240), "white")
    draw = ImageDraw.Draw(chart)
    for i, (value, colour) in enumerate(((180, "#3b6ea5"), (120, "#d9822b"), (70, "#5a9e5a"), (40, "#a33b3b"))):
        draw.rectangle((40 + 105 * i, 220 - value, 110 + 105 * i, 220), fill=colour)
    draw.line((30, 220, 450, 220), fill="black", width=2)
    draw.line((30, 20, 30, 220), fill="black", width=2)
    data = io.BytesIO()
    chart.save(data, "PNG")
    data.seek(0)
    table = Table([["Document type", "Pages", "Correct"], ["Papers", "120", "97%"], ["Forms", "80", "91%"],
                   ["Brochures", "45", "94%"]], colWidths=[90, 50, 55])
    table.setStyle(TableStyle([("FONT", (0, 0), (-1, 0), "Times-Bold", 9), ("FONT", (0, 1), (-1, -1), "Times-Roman", 9),
                               ("LINEABOVE", (0, 0), (-1, 0), 1, "black"), ("LINEBELOW", (0, 0), (-1, 0), 0.5, "black"),
                               ("LINEBELOW", (0, -1), (-1, -1), 1, "black"), ("ALIGN", (1, 0), (-1, -1), "RIGHT")]))
    left = [Paragraph("1 Introduction", heading),
            Paragraph("A page of a scientific paper is read column by column, from the top down. Headings, figures "
                      "and their captions interrupt the flow of the text. A translation must keep this order, or its "
                      "sentences lose their meaning.<super>1</super>", body),
            Spacer(1, 6),
            Paragraph("Figure 1 shows how often each kind of block appears in our test set.", body),
            Spacer(1, 8), Picture(data, 220, 115), Spacer(1, 4),
            Paragraph("Figure 1: Blocks per page in the test set.", caption)]
    right = [Paragraph("2 Method", heading),
             Paragraph("Characters are first grouped into lines, and lines into blocks. A block ends where the font "
                       "size changes or where a line starts indented. Blocks are then ordered by column and by their "
                       "height on the page.", body),
             Spacer(1, 10), Paragraph("Table 1: Accuracy of the reading order.", caption), Spacer(1, 4), table,
             Spacer(1, 10),
             Paragraph("The results in Table 1 show that forms are the hardest case. Their labels stand in rows and "
                       "columns rather than in sentences.", body)]
    column = (width - 112 - 20) / 2
    Frame(56, 300, column, height - 530, showBoundary=0).addFromList(left, c)
    Frame(56 + column + 20, 300, column, height - 530, showBoundary=0).addFromList(right, c)
    c.line(56, 112, 160, 112)
    c.setFont("Times-Roman", 6)
    c.drawString(56, 102, "1")
    c.setFont("Times-Roman", 8)
    c.drawString(61, 99, "The test set and the program are available from the authors.")
    c.setFont("Times-Roman", 9)
    c.drawCentredString(width / 2, 50, "3")
    c.showPage()
    c.save()


VOWELS = dict(zip("aeiouAEIOU", "áéîõüÅÉÎÕÜ"))
ACCENTED = {**dict(zip("cnsyzCNSYZ", "çñšýžÇÑŠÝŽ")), **VOWELS}


def pseudo(text: str) -> str:
    """Software localisation's pseudo-translation: every letter accented, and every word of four
    letters or more a third longer (its vowels doubled until it is), placeholder tags kept."""
    import re

    def word(match) -> str:
        w = match.group()
        if len(w) >= 4:
            extra = -(-len(w) // 3)
            w = "".join(ch * 2 if ch in VOWELS and (extra := extra - 1) >= 0 else ch for ch in w)
        return "".join(ACCENTED.get(ch, ch) for ch in w)

    return "".join(part if re.fullmatch(r"<\s*/?\s*x\d+\s*/?>", part) else re.sub(r"[A-Za-z]+", word, part)
                   for part in re.split(r"(<\s*/?\s*x\d+\s*/?>)", text))


def from_table(table: dict, column: int | None = None):
    def translate(texts: list[str]) -> list[str]:
        return [table[t] if column is None else table[t][column] for t in texts]

    return translate


def make_scan(pdf: Path, path: Path) -> None:
    """`pdf`'s first page as a scanner gives it back: a picture at 300 dpi, turned 0.8 degrees and
    noised, filling a PDF page of the same size."""
    import numpy as np
    import pypdfium2
    from PIL import Image
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    page = pypdfium2.PdfDocument(str(pdf))[0]
    width, height = page.get_size()
    image = page.render(scale=300 / 72).to_pil().convert("RGB")
    image = image.rotate(0.8, resample=Image.BICUBIC, fillcolor=(250, 250, 248))
    noise = np.random.default_rng(0).normal(0, 10, (image.height, image.width, 1))
    image = Image.fromarray(np.clip(np.asarray(image, dtype=np.float64) + noise, 0, 255).astype(np.uint8))
    c = canvas.Canvas(str(path), pagesize=(width, height))
    c.drawImage(ImageReader(image), 0, 0, width=width, height=height)
    c.showPage()
    c.save()


def nearest(table: dict, column: int, otherwise: Callable[[str], str] = lambda text: text):
    """The translation of the table's sentence nearest each text (OCR misreads a letter here and
    there); a text near none gets `otherwise(text)` (itself unless told)."""
    import difflib

    def translate(texts: list[str]) -> list[str]:
        found = [difflib.get_close_matches(t, list(table), n=1, cutoff=0.75) for t in texts]
        return [table[m[0]][column] if m else otherwise(t) for t, m in zip(texts, found)]

    return translate


def first_page(path: Path, scale: float):
    """A PDF's first page rendered at `scale` pixels a point, or a picture at the size it would print
    (at its resolution, else 150 dpi) scaled as much."""
    import pypdfium2
    from PIL import Image

    if path.suffix.lower() == ".pdf":
        return pypdfium2.PdfDocument(str(path))[0].render(scale=scale).to_pil()
    picture = Image.open(path).convert("RGB")
    dpi = float((picture.info.get("dpi") or (150, 150))[0]) or 150
    factor = scale * 72 / dpi
    return picture.resize((round(picture.width * factor), round(picture.height * factor)), Image.Resampling.LANCZOS)


def side_by_side(pages: list[Path], out: Path, scale: float) -> None:
    """The first page of each PDF or picture rendered, in a row on grey, saved as a PNG of 256 colours."""
    from PIL import Image

    images = [first_page(p, scale) for p in pages]
    gap = 16
    picture = Image.new("RGB", (sum(i.width for i in images) + gap * (len(images) + 1), images[0].height + 2 * gap),
                        "#d0d0d0")
    x = gap
    for image in images:
        picture.paste(image, (x, gap))
        x += image.width + gap
    picture.quantize(256, dither=Image.Dither.NONE).save(out, optimize=True)


def main(folder: Path, form: Path | None, real_scan: Path | None = None) -> None:
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        brochure = work / "brochure.pdf"
        make_page(brochure)
        pages = [brochure]
        for column, target in enumerate(("deu_Latn", "arb_Arab")):
            pages.append(translate_document(brochure, work / f"brochure.{target}.pdf", from_table(SENTENCES, column),
                                            target_script=target[4:]))
        side_by_side(pages, folder / "pdf-before-after.png", 1.6)
        scan = work / "scan.pdf"
        make_scan(brochure, scan)
        german = translate_document(scan, work / "scan.deu_Latn.pdf", nearest(SENTENCES, 0), options={"source": "eng_Latn"})
        side_by_side([scan, german], folder / "scan-before-after.png", 1.2)
        paper = work / "paper.pdf"
        make_paper(paper)
        german = translate_document(paper, work / "paper.deu_Latn.pdf", from_table(PAPER))
        side_by_side([paper, german], folder / "pdf-paper.png", 1.3)
        if form is not None:
            pseudo_form = translate_document(form, work / "form.pseudo.pdf", lambda texts: [pseudo(t) for t in texts])
            side_by_side([form, pseudo_form], folder / "pdf-form.png", 1.3)
        if real_scan is not None:
            out = work / f"real-scan.deu_Latn{'.pdf' if real_scan.suffix.lower() == '.pdf' else '.png'}"
            german = translate_document(real_scan, out, nearest(EUROTEXT, 0, pseudo), options={"source": "eng_Latn"})
            side_by_side([real_scan, german], folder / "scan-real-before-after.png", 2.0)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench.pdf_pictures", description=__doc__.splitlines()[0])
    parser.add_argument("--form", type=Path, help="the IRS Form 1040 of pdf.js (test/pdfs/prefilled_f1040.pdf)")
    parser.add_argument("--scan", type=Path, help="Tesseract's test scan (tesseract-ocr/test, testing/eurotext.tif)")
    parser.add_argument("folder", type=Path, nargs="?", default=Path("docs"))
    args = parser.parse_args()
    main(args.folder, args.form, args.scan)
