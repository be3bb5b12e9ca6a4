"""Whether a first launch's kernel build (engine/kernel_build.py) covers what documents meet:
`python -m bench.kernel_coverage --checkpoint DIR --device cuda [--pages 30]`.

On a fresh Triton cache, opens the engine as the app does (`build_kernels_apart`), waits for the
build and times it, then opens it again (no second build) and translates, through the app's
document path, a .docx book of bench.docx_book (formatting, numbers, links: constrained
sentences), the same sentences as .txt, and a typed line with a glossary term, counting after each
the kernels compiled in this process since the build (each compiled kernel is a .cubin in the
cache). The goal is none: every variant those paths meet was built by the stand-in. Prints one
JSON object. On the CPU no kernel is compiled: the counts are 0 and the build is skipped.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from bench import add_out_argument, emit


def compiled(cache: Path) -> set[str]:
    """The kernels in a Triton cache folder: a .cubin (NVIDIA) or .hsaco (AMD) each."""
    return {str(path.relative_to(cache)) for pattern in ("*.cubin", "*.hsaco") for path in cache.rglob(pattern)}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.kernel_coverage", description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, required=True, help="NLLB checkpoint folder")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--pages", type=int, default=30, help="of the .docx book")
    add_out_argument(parser)
    args = parser.parse_args()
    cache = Path(tempfile.mkdtemp(prefix="dragoman-triton-"))
    os.environ["TRITON_CACHE_DIR"] = str(cache)  # before Triton is imported: a first launch's empty cache

    from bench.docx_book import make_books
    from dragoman.app.session.glossary import read_glossary
    from dragoman.app.session.jobs import DocumentJob
    from dragoman.app.session.session import TranslationJob, TranslationSession
    from dragoman.app.session.terms import Terms
    from dragoman.engine import Translator

    start = time.perf_counter()
    translator = Translator(args.checkpoint, device=args.device, build_kernels_apart=True)
    building = translator.kernels_building()
    translator.wait_for_kernels()
    out: dict = {"device": translator.describe(), "built_apart": building,
                 "build_seconds": time.perf_counter() - start, "kernels_built": len(compiled(cache))}
    translator.teardown()
    translator = Translator(args.checkpoint, device=args.device, build_kernels_apart=True)
    out["built_again"] = translator.kernels_building()
    built = compiled(cache)
    options = {"num_beams": 4}
    with tempfile.TemporaryDirectory(prefix="dragoman-kernel-build-") as folder:
        work = Path(folder)
        book, text, _ = make_books(work, args.pages)
        terms = work / "terms.csv"
        terms.write_text("source,target\nriver,fleuve\nold mill,vieux moulin\n", encoding="utf-8")
        session = TranslationSession(translator, terms=Terms((read_glossary(terms),)))
        for path in (book, text):
            session.translate_document(DocumentJob(path, work / f"out{path.suffix}", "eng_Latn", "fra_Latn", options,
                                                   overwrite=True))
            out[f"compiled_after_{path.suffix[1:]}"] = len(compiled(cache) - built)
        session.translate(TranslationJob(["The river runs past the old mill."], "eng_Latn", "fra_Latn", options))
        out["compiled_after_typed_glossary"] = len(compiled(cache) - built)
    out["compiled_since_build"] = sorted(Path(name).stem for name in compiled(cache) - built)
    translator.teardown()
    emit(out, "kernel_coverage", None, args.out)


if __name__ == "__main__":
    main()
