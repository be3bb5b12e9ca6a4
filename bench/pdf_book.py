"""`python -m bench.pdf_book --pages N OUT.pdf`: an N-page PDF of running text to time PDF translation.

Each page has a running header, a heading, two columns of paragraphs (~40 sentences of 10-25
words) and a page number, written with reportlab (a test dependency). The sentences are drawn
from a fixed vocabulary by a seeded generator, so every run makes the same file:
`dragoman translate --model DIR --from eng_Latn --to fra_Latn --max-length 48 OUT.pdf` then times
reading the layout, translating and setting the translation.
"""

from __future__ import annotations

import argparse
import random
import textwrap

WORDS = ("the river town market bridge museum morning evening light street house garden people "
         "walk old new small green long quiet visitors history century square church window road "
         "follow reach open close show find keep leave return build remember cross north south").split()


def sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(10, 25))]
    return " ".join(words).capitalize() + "."


def make_book(path: str, pages: int, seed: int = 0) -> int:
    """Write the book; the number of sentences in it."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    rng = random.Random(seed)
    width, height = A4
    column = (width - 72 * 2 - 18) / 2
    c = canvas.Canvas(path, pagesize=A4)
    count = 0
    for page in range(1, pages + 1):
        c.setFont("Helvetica", 8)
        c.drawString(72, height - 40, "A walk through the old town")
        c.drawRightString(width - 72, 30, str(page))
        c.setFont("Helvetica-Bold", 14)
        c.drawString(72, height - 80, f"Chapter {page}: " + sentence(rng)[:40].rstrip(" ."))
        for x in (72, 72 + column + 18):
            y = height - 110
            while y > 80:
                paragraph = " ".join(sentence(rng) for _ in range(rng.randint(2, 4)))
                lines = textwrap.wrap(paragraph, width=int(column / 4.6))
                if y - 12 * len(lines) < 60:
                    break
                count += paragraph.count(".")
                text = c.beginText(x, y)
                text.setFont("Helvetica", 9)
                text.setLeading(12)
                for line in lines:
                    text.textLine(line)
                c.drawText(text)
                y -= 12 * len(lines) + 8
        c.showPage()
    c.save()
    return count


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.pdf_book", description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=10)
    parser.add_argument("out")
    args = parser.parse_args()
    print(f"{args.out}: {args.pages} pages, {make_book(args.out, args.pages)} sentences")


if __name__ == "__main__":
    main()
