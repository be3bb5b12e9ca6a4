"""Document translation, independent of the engine: one module per format, one driver for all.

Each format module has `EXTENSIONS` and `extract(path) -> Document`: the translatable segments with
their inline formatting (see segments.py), and `document.write(translations, out_path)`.
`translate_document` drives them with any `translate_batch(list[str]) -> list[str | None]`: the
real engine behind the translation cache in the app, a deterministic fake in tests.

The input is never modified. The output is written to a temporary file beside its destination
(`.NAME.dragoman-PID-RANDOM.part`, created with the user's umask), flushed to disk and renamed
into place only when complete; an existing output is not replaced unless `overwrite`. A failure
removes the temporary file; one that a killed run left behind is removed when the next
translation into the same output starts.
"""

from __future__ import annotations

import contextlib
import os
import re
import functools
import secrets
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, BinaryIO, Callable, Iterator

from dragoman.app.documents.safety import DocumentError
from dragoman.app.documents.segments import Cancelled, translate_segments

__all__ = ["DocumentError", "Cancelled", "FORMATS", "format_for", "formats", "is_supported", "output_path",
           "remove_stale_temporaries", "temporary_pattern", "translate_document"]

if TYPE_CHECKING:
    FORMATS: dict[str, ModuleType]  # `formats()`, for code that reads it as a name


@functools.cache
def formats() -> dict[str, ModuleType]:
    """Each extension's format module. Imported on first use: the format libraries take ~0.1 s
    of a start that translates no document (typed text, stdin, the window before a drop)."""
    from dragoman.app.documents import docx, epub, html, markdown, odt, pdf, picture, pptx, subtitles, text, xlsx

    return {ext: module for module in (text, markdown, html, subtitles, docx, pptx, xlsx, odt, epub, pdf, picture)
            for ext in module.EXTENSIONS}


def __getattr__(name: str):
    if name == "FORMATS":
        return formats()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def format_for(path: Path) -> ModuleType:
    module = formats().get(path.suffix.lower())
    if module is None:
        raise DocumentError(f"unsupported file type {path.suffix or '(no extension)'!r}")
    return module


def is_supported(path: Path) -> bool:
    return path.suffix.lower() in formats()


def output_path(path: Path, target: str, output_dir: Path | None = None, options: dict | None = None) -> Path:
    """STEM.<target>.EXT beside the input (or in output_dir); a format may pick its own suffix from
    the document options (PDF: .txt with pdf_as="text", .bilingual.pdf with bilingual)."""
    module = format_for(path)
    suffix = module.output_suffix(options or {}) if hasattr(module, "output_suffix") else path.suffix
    return (output_dir or path.parent) / f"{path.stem}.{target}{suffix}"


def translate_document(
    path: str | Path,
    out_path: str | Path,
    translate_batch: Callable[[list[str]], list[str | None]],
    source_script: str = "Latn",
    target_script: str = "Latn",
    progress: Callable[[int, int], None] | None = None,
    overwrite: bool = False,
    options: dict | None = None,
    proportional: Callable[[str], None] | None = None,
    note: Callable[[str], None] | None = None,
    reading: Callable[[int, int], None] | None = None,
) -> Path:
    """Translate the document at `path` into `out_path`; DocumentError names the problem, Cancelled a stop.
    `translate_batch` and `proportional`: see `translate_segments`. `options`: document options;
    each format takes those it names in its OPTIONS (PDF: pdf_as, bilingual; pictures and scanned
    PDFs: source, the FLORES-200 code of the language OCR reads, or "auto"). `note(line)`
    receives, once the output is written, each thing the user should know of it (the encoding it
    was read in or written in).
    `reading(done, total)` follows the pages OCR reads (pictures, scanned PDFs): a picture's before
    any sentence is translated, a PDF's as its pages are read, its total growing; it may raise
    Cancelled to stop there."""
    path, out_path = Path(path), Path(out_path)
    if out_path.resolve() == path.resolve():
        raise DocumentError("the output would replace the input")
    remove_stale_temporaries(out_path)
    if out_path.exists() and not overwrite:
        raise DocumentError(f"{out_path.name} already exists (use --overwrite to replace it)")
    module = format_for(path)
    wanted = getattr(module, "OPTIONS", ())
    arguments = {k: v for k, v in (options or {}).items() if k in wanted}
    if reading is not None and "reading" in wanted:
        arguments["reading"] = reading
    document = module.extract(path, **arguments)
    try:
        translations = translate_segments(
            document.segment_stream(), translate_batch, source_script, target_script, progress, proportional,
            document.place,
        )
        out_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = create_temporary(out_path)
        try:
            document.write(translations, tmp)
            flush_to_disk(tmp)
            if overwrite:
                os.replace(tmp, out_path)
            else:
                try:
                    os.link(tmp, out_path)  # fails if the output appeared meanwhile: never clobbered
                    tmp.unlink()
                except FileExistsError:
                    raise
                except OSError:  # no hard links on this file system (FAT, some shares)
                    if out_path.exists():
                        raise FileExistsError(out_path) from None
                    os.replace(tmp, out_path)
        except FileExistsError:
            tmp.unlink(missing_ok=True)
            raise DocumentError(f"{out_path.name} already exists (use --overwrite to replace it)") from None
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    finally:
        document.close()
    if note is not None:
        for line in document.notes:
            note(line)
    return out_path


def temporary_pattern(out_path: Path) -> re.Pattern:
    """The names of this program's temporary files for `out_path`: `.NAME.dragoman-PID-RANDOM.part`."""
    return re.compile(re.escape(f".{out_path.name}.dragoman-") + r"(\d+)-[0-9a-f]{8}\.part")


def create_temporary(out_path: Path) -> Path:
    """A new empty file beside `out_path`, created with the user's umask (as the output will be)."""
    while True:
        tmp = out_path.with_name(f".{out_path.name}.dragoman-{os.getpid()}-{secrets.token_hex(4)}.part")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return tmp
        except FileExistsError:
            continue


def write_atomically(path: Path, data: bytes) -> None:
    """`data` as the file `path`, complete or not at all (a temporary beside it, renamed)."""
    with writing_atomically(path) as f:
        f.write(data)


@contextlib.contextmanager
def writing_atomically(path: Path) -> Iterator[BinaryIO]:
    """A file to write `path` through, a temporary beside it renamed once the block ends without an
    error (else removed): `path` is complete or not there. What a killed run left for `path` is
    removed first (`remove_stale_temporaries`)."""
    remove_stale_temporaries(path)
    tmp = create_temporary(path)
    try:
        with open(tmp, "wb") as f:
            yield f
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def remove_stale_temporaries(out_path: Path) -> None:
    """Remove what a killed run left for `out_path`: temporary files of ours whose process is gone.
    Files of other names, and those of a running process (another translation of the same file), stay."""
    pattern = temporary_pattern(out_path)
    try:
        names = os.listdir(out_path.parent)
    except OSError:  # no folder yet: nothing left there
        return
    for name in names:
        match = pattern.fullmatch(name)
        if match and not process_exists(int(match.group(1))):
            (out_path.parent / name).unlink(missing_ok=True)


def process_exists(pid: int) -> bool:
    if os.name == "nt":  # signal 0 is Ctrl-C there: never remove a file that may be in use
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: leave its file alone
        return True
    return True


def flush_to_disk(path: Path) -> None:
    """What was written reaches the disk before the rename makes it the output (a power cut then
    leaves the old output or the new one, never an empty file)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
