"""How long a document job keeps the engine waiting: `python -m bench.document_start [--pages 300]`.

Makes the .docx book of bench.docx_book and the PDF book of bench.pdf_book, and translates each
through the app's document path (`TranslationSession.translate_document`: reading, sentence plans,
the translation memory and cache, masking, the engine, writing) with a stand-in for the engine that
answers at once. Prints one JSON object: for each book, the seconds from the job's start until the
first texts reached the engine (its idle time before decoding begins), the whole job's seconds (the
path without decoding), and the texts of each call to the engine (the parts a document is sent in).
The median of --runs runs each. No model and no GPU: the host's side of a document, apart.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import types
from pathlib import Path

from bench import add_out_argument, emit


class AnsweringAtOnce:
    """A stand-in for the engine that gives each text back as its translation, and notes when the
    first texts came and how many came in each call."""

    config = types.SimpleNamespace(max_position_embeddings=1024)
    device = types.SimpleNamespace(type="cpu")
    model_identity = "stand-in"

    def __init__(self) -> None:
        self.first: float | None = None
        self.calls: list[int] = []

    def default_options(self, **overrides):
        from dragoman.engine import DecodingOptions

        return DecodingOptions(num_beams=4, **{k: v for k, v in overrides.items() if v is not None})

    def adapter_identity(self, adapter: str | None) -> str:
        return adapter or ""

    def spells(self, text: str) -> bool:
        return True

    def translate(self, texts: list[str], *args, **kwargs) -> list[str | None]:
        if self.first is None:
            self.first = time.perf_counter()
        self.calls.append(len(texts))
        return list(texts)


def time_job(book: Path, out: Path) -> tuple[float, float, list[int]]:
    """(seconds until the first texts reached the engine, the whole job's seconds, texts per call)."""
    from dragoman.app.session.jobs import DocumentJob
    from dragoman.app.session.session import TranslationSession

    engine = AnsweringAtOnce()
    start = time.perf_counter()
    TranslationSession(engine).translate_document(  # the stand-in in the Translator's place
        DocumentJob(book, out, "eng_Latn", "fra_Latn", {}, overwrite=True))
    whole = time.perf_counter() - start
    assert engine.first is not None, f"{book.name}: nothing was sent to the engine"
    return engine.first - start, whole, engine.calls


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.document_start", description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3, help="runs of each book (median)")
    parser.add_argument("--formats", default="docx,pdf", help="the books to time: docx, pdf or both")
    add_out_argument(parser)
    args = parser.parse_args()

    from bench import docx_book, pdf_book

    out: dict = {"pages": args.pages, "runs": args.runs}
    with tempfile.TemporaryDirectory(prefix="dragoman-document-start-") as folder:
        work = Path(folder)
        for name in args.formats.split(","):
            book = work / f"book.{name}"
            if name == "docx":
                docx_book.make_book(book, args.pages)
            else:
                pdf_book.make_book(str(book), args.pages)
            runs = [time_job(book, work / f"book.fra_Latn.{name}") for _ in range(args.runs)]
            out[f"{name}_first_texts_s"] = statistics.median(r[0] for r in runs)
            out[f"{name}_whole_s"] = statistics.median(r[1] for r in runs)
            out[f"{name}_texts_per_call"] = runs[0][2]
    emit(out, f"document_start_{args.pages}", None, args.out)


if __name__ == "__main__":
    main()
