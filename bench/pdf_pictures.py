"""`python -m bench.pdf_pictures docs/pdf-before-after.png`: a brochure page before and after PDF translation.

The page is made here with reportlab (two columns, a heading, a picture, a table, a link, a
footer) and goes through the app's document path (app.documents.translate_document) into German
and Arabic. The translations are fixed sentences written for this picture, not a model's output:
the picture shows the layout work (text removed and set again in its boxes, right to left in
Arabic), not translation quality. Pages are rendered with pypdfium2 and put side by side.
"""

from __future__ import annotations

import io
import sys
import tempfile
from pathlib import Path

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


def stand_in(column: int):
    def translate(texts: list[str]) -> list[str]:
        return [SENTENCES[t][column] for t in texts]

    return translate


def main(out: str) -> None:
    import pypdfium2
    from PIL import Image

    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "brochure.pdf"
        make_page(source)
        pages = [source]
        for column, target in enumerate(("deu_Latn", "arb_Arab")):
            pages.append(translate_document(source, Path(folder) / f"brochure.{target}.pdf", stand_in(column),
                                            target_script=target[4:]))
        images = [pypdfium2.PdfDocument(str(p))[0].render(scale=1.6).to_pil() for p in pages]
    gap = 16
    picture = Image.new("RGB", (sum(i.width for i in images) + gap * (len(images) + 1), images[0].height + 2 * gap), "#d0d0d0")
    x = gap
    for image in images:
        picture.paste(image, (x, gap))
        x += image.width + gap
    picture.save(out, optimize=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/pdf-before-after.png")
