"""PDF translation timed on a long book: `python -m bench.pdf_book --pages 300 --checkpoint DIR --device cuda`.

Writes an N-page PDF of running text with reportlab (a test dependency): each page has a running
header, a heading, two columns of paragraphs (~40 sentences of 10-25 words) and a page number; the
sentences are drawn from a fixed vocabulary by a seeded generator, so every run makes the same
file. Then, in one process and on one engine, after a warm-up on a two-page book (kernels
compiled, graphs captured), times:
- the book into PDF through the app's document path (`TranslationSession.translate_document`:
  reading the layout, sentence splitting, the engine, typesetting, writing; no translation cache);
- the same path with the model replaced by the identity: what reading and writing the PDF cost
  (the layout), done on the CPU whatever the device;
- `Generator.run` over the texts the path sends, tokenized beforehand: the engine alone.
Prints one JSON object: pages/s and sentences/s of the whole path, the layout's seconds, and the
decoding part's share of the engine's rate: the engine alone against the path's run from its first
texts submitted to the engine to its last translation (both seen at `Translator.submit`, which a
document's own process on a GPU reaches too), so that neither the reading before nor the writing
after counts (typesetting a random model's every script costs far more than typesetting the
identity's English). The pages are read as they are translated (pdf.PdfDocument.segment_stream):
the reading before the first texts is reported apart, and reading after them that keeps the
engine waiting counts against the decoding part.
--checkpoint is a Hugging Face NLLB folder; where it has no config.json, bench.checkpoint's
random-weight model of --size is written there. Translations are forced to --new-tokens tokens
(DESIGN.md's document workload; 0: the model stops by itself). `--make-only OUT.pdf` only writes
the book; `--layout-only` only times the layout (no checkpoint needed).
"""

from __future__ import annotations

import argparse
import random
import tempfile
import textwrap
import time
from pathlib import Path
from unittest.mock import patch

from bench import add_out_argument

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
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--checkpoint", type=Path, help="NLLB checkpoint folder (a random one is written if it has none)")
    parser.add_argument("--size", default="600M", help="shape of the random checkpoint (600M, 1.3B, 3.3B)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--beams", type=int, default=4)
    parser.add_argument("--new-tokens", type=int, default=40, help="tokens each translation is forced to (0: not forced)")
    parser.add_argument("--to", dest="target", default="fra_Latn")
    parser.add_argument("--repeats", type=int, default=1,
                        help="runs of the path, its layout and the engine, in turn (the fastest of each counts)")
    parser.add_argument("--make-only", metavar="OUT.pdf", help="write the book there and stop")
    parser.add_argument("--layout-only", action="store_true", help="time reading and writing the book only")
    add_out_argument(parser)
    args = parser.parse_args()
    if args.make_only:
        print(f"{args.make_only}: {args.pages} pages, {make_book(args.make_only, args.pages)} sentences")
        return
    if args.layout_only:
        time_layout(args)
        return
    if args.checkpoint is None:
        parser.error("--checkpoint DIR is needed to translate (or --make-only OUT.pdf, or --layout-only)")
    time_book(args)


def layout(book: Path, out: Path, target: str) -> tuple[float, list[str]]:
    """Seconds the document path takes with the identity for a model (reading and writing the PDF),
    and the distinct texts it sends to be translated."""
    from dragoman.app.documents import translate_document

    sent: list[str] = []

    def identity(texts: list[str]) -> list[str | None]:
        sent.extend(texts)
        return list(texts)

    start = time.perf_counter()
    translate_document(book, out, identity, target_script=target[4:], overwrite=True)
    return time.perf_counter() - start, sent


def time_layout(args) -> None:
    from bench import emit

    with tempfile.TemporaryDirectory(prefix="dragoman-pdf-book-") as folder:
        book = Path(folder) / "book.pdf"
        sentences = make_book(str(book), args.pages)
        seconds, sent = layout(book, Path(folder) / "book.identity.pdf", args.target)
    emit({"pages": args.pages, "sentences": sentences, "texts_sent": len(sent), "layout_only_seconds": seconds,
          "layout_pages_per_s": args.pages / seconds}, f"pdf_layout_{args.pages}", None, args.out)


def time_book(args) -> None:
    from bench import emit, seconds_of
    from bench.checkpoint import write_checkpoint
    from dragoman.app.session.jobs import DocumentJob
    from dragoman.app.session.session import TranslationSession
    from dragoman.engine import Translator
    from dragoman.engine.generator import Request

    if not (args.checkpoint / "config.json").exists():
        write_checkpoint(args.checkpoint, args.size)
    translator = Translator(args.checkpoint, device=args.device)
    options = {"num_beams": args.beams}
    if args.new_tokens:
        options.update(min_new_tokens=args.new_tokens, max_new_tokens=args.new_tokens)


    with tempfile.TemporaryDirectory(prefix="dragoman-pdf-book-") as folder:
        work = Path(folder)

        def translate(book: Path) -> float:
            job = DocumentJob(book, work / f"{book.stem}.{args.target}.pdf", "eng_Latn", args.target, options,
                              overwrite=True)
            return seconds_of(lambda: TranslationSession(translator).translate_document(job), translator.device)

        # The decoding part timed within the path's own run: typesetting what a random model
        # writes (every script, thousands of glyphs to subset) costs far more than typesetting
        # the identity's English, so the identity's layout is no measure of it.
        first_sent: list[float] = []  # when the path's first texts went to the engine
        last_heard = [0.0]  # when its last translation came
        engine_submit = translator.submit

        def noting(request):
            if not first_sent:
                first_sent.append(time.perf_counter())
            handle = engine_submit(request)
            handle.subscribe(None, lambda i, translation: last_heard.__setitem__(0, time.perf_counter()))
            return handle

        sending = patch.object(translator, "submit", noting)

        warm_up = work / "warm-up.pdf"
        make_book(str(warm_up), 2, seed=1)
        translate(warm_up)
        book = work / "book.pdf"
        sentences = make_book(str(book), args.pages)
        prefix = translator.tokenizer.decoder_prefix(args.target)
        engine_options = translator.default_options(**options)
        runs: dict[str, list[float]] = {"path": [], "before_first_texts": [], "decoding": [], "layout": [], "engine": []}
        for _ in range(args.repeats):  # a kernel variant the path meets first compiles during its first run
            first_sent.clear()
            with sending:
                start = time.perf_counter()
                runs["path"].append(translate(book))
            runs["before_first_texts"].append(first_sent[0] - start)
            runs["decoding"].append(last_heard[0] - first_sent[0])
            layout_seconds, sent = layout(book, work / "book.identity.pdf", args.target)
            runs["layout"].append(layout_seconds)
            sources = [translator.tokenizer.encode_source(text, "eng_Latn") for text in sent]
            runs["engine"].append(seconds_of(
                lambda: translator.generator.run([Request(s, prefix, engine_options) for s in sources]), translator.device))
        seconds, before_first_texts, decoding_seconds, layout_seconds, engine_seconds = (
            min(runs[name]) for name in ("path", "before_first_texts", "decoding", "layout", "engine"))
        out = {"pages": args.pages, "sentences": sentences, "texts_sent": len(sent), "device": translator.describe(),
               "beams": args.beams, "new_tokens": args.new_tokens or "natural", "seconds": seconds,
               "pages_per_s": args.pages / seconds, "sentences_per_s": sentences / seconds,
               "layout_only_seconds": layout_seconds, "engine_alone_seconds": engine_seconds,
               "seconds_before_first_texts": before_first_texts, "decoding_seconds": decoding_seconds,
               "decoding_share_of_engine": engine_seconds / max(decoding_seconds, 1e-9),
               "output_MB": (work / f"book.{args.target}.pdf").stat().st_size / 1e6, "runs_s": runs}
    emit(out, f"pdf_book_{args.pages}", translator.device, args.out)
    translator.teardown()


if __name__ == "__main__":
    main()
