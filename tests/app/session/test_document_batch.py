"""app/session/document_batch.py: a document's texts reach the engine in parts, each prepared while
the ones before decode, on the real engine."""

import threading
import time

import pytest
from polling import wait_for

from dragoman.app.documents import Cancelled
from dragoman.app.session import document_batch
from dragoman.app.session.document_batch import (DOCUMENT_PART_GROWTH, FIRST_DOCUMENT_PART, LARGEST_DOCUMENT_PART,
                                                  part_sizes)
from dragoman.app.session.jobs import DocumentJob
from dragoman.app.session.session import TranslationSession


def test_document_parts_start_small_and_grow_up_to_the_largest():
    sizes = part_sizes()
    assert [next(sizes) for _ in range(3)] == [FIRST_DOCUMENT_PART, FIRST_DOCUMENT_PART * DOCUMENT_PART_GROWTH,
                                               FIRST_DOCUMENT_PART * DOCUMENT_PART_GROWTH**2]
    later = [next(sizes) for _ in range(20)]
    assert later == sorted(later) and later[-3:] == [LARGEST_DOCUMENT_PART] * 3


def long_document(tmp_path, count=300):
    """`count` distinct sentences, a paragraph each, a tenth of them with a protected number."""
    source = tmp_path / "long.txt"
    source.write_text("\n\n".join(f"The dog {i} sees {i + 1} kg of river." if i % 10 == 0 else f"The dog {i} sees the river."
                                  for i in range(count)) + "\n", encoding="utf-8")
    return source


def test_a_document_reaches_the_engine_in_parts_each_prepared_while_the_ones_before_decode(
        translator, tmp_path, monkeypatch):
    """The first part is sent before the rest is looked up and masked (the second masking waits
    for it, and would wait in vain were the parts sent after all were prepared), and the document
    comes out as it does in one part."""
    options = {"num_beams": 1, "max_length": 12}
    count = FIRST_DOCUMENT_PART + FIRST_DOCUMENT_PART * DOCUMENT_PART_GROWTH // 2  # two parts
    source = long_document(tmp_path, count)
    events = []
    first_sent = threading.Event()
    pipeline = TranslationSession(translator)
    masked, translate = pipeline.masked, translator.translate

    def masking(terms, texts, *args, **kwargs):
        if events:
            assert first_sent.wait(timeout=30), "the first part was not sent before the next was prepared"
        events.append(("masked", len(texts)))
        return masked(terms, texts, *args, **kwargs)

    def sending(texts, *args, **kwargs):
        events.append(("sent", len(texts)))
        first_sent.set()
        return translate(texts, *args, **kwargs)

    monkeypatch.setattr(pipeline, "masked", masking)
    monkeypatch.setattr(translator, "translate", sending)
    written = pipeline.translate_document(DocumentJob(source, tmp_path / "parts.txt", "eng_Latn", "fra_Latn", options))
    first, rest = FIRST_DOCUMENT_PART, count - FIRST_DOCUMENT_PART
    assert events == [("masked", first), ("sent", first), ("masked", rest), ("sent", rest)]
    monkeypatch.setattr(document_batch, "FIRST_DOCUMENT_PART", 10_000)
    events.clear()
    whole = pipeline.translate_document(DocumentJob(source, tmp_path / "whole.txt", "eng_Latn", "fra_Latn", options))
    assert events == [("masked", count), ("sent", count)]
    assert written.read_text(encoding="utf-8") == whole.read_text(encoding="utf-8")


def test_the_first_part_decodes_while_the_rest_of_the_document_is_planned(translator, tmp_path, monkeypatch):
    """The texts stream from the document's plan: the first part is sent before the paragraphs
    after it are planned (their planning waits for it, and would wait in vain were the document
    planned whole first); the document comes out as it does when planned whole."""
    import re

    from dragoman.app.documents import segments

    options = {"num_beams": 1, "max_length": 12}
    source = long_document(tmp_path)
    first_sent = threading.Event()
    plan, translate = segments._plan, translator.translate
    planned_late = []

    def planning(segment, script):
        number = re.search(r"dog (\d+)", segment.text)
        if number and int(number.group(1)) >= FIRST_DOCUMENT_PART + 20:
            planned_late.append(first_sent.is_set() or (not planned_late and first_sent.wait(timeout=30)))
        return plan(segment, script)

    def sending(texts, *args, **kwargs):
        first_sent.set()
        return translate(texts, *args, **kwargs)

    monkeypatch.setattr(segments, "_plan", planning)
    monkeypatch.setattr(translator, "translate", sending)
    pipeline = TranslationSession(translator)
    written = pipeline.translate_document(DocumentJob(source, tmp_path / "streamed.txt", "eng_Latn", "fra_Latn", options))
    assert planned_late and all(planned_late), "the first part was not sent before the rest was planned"
    monkeypatch.setattr(document_batch, "FIRST_DOCUMENT_PART", 10_000)
    whole = pipeline.translate_document(DocumentJob(source, tmp_path / "whole.txt", "eng_Latn", "fra_Latn", options))
    assert written.read_text(encoding="utf-8") == whole.read_text(encoding="utf-8")


def test_each_translation_is_told_once_from_when_the_last_part_decodes(translator, tmp_path, monkeypatch):
    """The document's segments are built from the translations told (segments.PlacingAlongside):
    each text's once, none before the last part starts decoding (this process is preparing the
    parts until then), and every one of them, the last part's last included."""
    from dragoman.app.documents.segments import PlacingAlongside

    count = FIRST_DOCUMENT_PART + 30  # two parts
    source = long_document(tmp_path, count)
    last_started = threading.Event()
    told: list[tuple[str, bool]] = []
    found, translate = PlacingAlongside.found, translator.translate

    def telling(alongside, text, translation):
        told.append((text, last_started.is_set()))
        found(alongside, text, translation)

    def translating(texts, *args, **kwargs):
        if threading.current_thread() is threading.main_thread():  # the last part decodes on the job's thread
            last_started.set()
        return translate(texts, *args, **kwargs)

    monkeypatch.setattr(PlacingAlongside, "found", telling)
    monkeypatch.setattr(translator, "translate", translating)
    TranslationSession(translator).translate_document(
        DocumentJob(source, tmp_path / "told.txt", "eng_Latn", "fra_Latn", {"num_beams": 1, "max_length": 12}))
    texts = [text for text, _ in told]
    assert len(texts) == len(set(texts)) == count
    assert all(started for _, started in told)


def test_a_word_documents_paragraphs_are_placed_while_its_last_part_decodes(translator, tmp_path, monkeypatch):
    """Once the document is read and its last part decodes, each paragraph whose translations are
    all found goes into the document's tree (`Document.place`), in order, so that little is left
    after the last translation; not before, while this process prepares the parts the engine
    waits for. The document comes out as when every paragraph is placed at the end."""
    import zipfile

    from bench import docx_book
    from dragoman.app.documents import segments
    from dragoman.app.documents.zipxml import ZipXmlDocument

    options = {"num_beams": 1, "max_length": 12}
    source = tmp_path / "book.docx"
    docx_book.make_book(source, 6)
    first_done, last_started = threading.Event(), threading.Event()
    placed: list[tuple[int, bool]] = []  # (segment, whether the last part had started decoding)
    place, translate = ZipXmlDocument.place, translator.translate

    def placing(document, index, runs):
        placed.append((index, last_started.is_set()))
        return place(document, index, runs)

    def translating(texts, *args, **kwargs):
        last = threading.current_thread() is threading.main_thread()  # the last part decodes on the job's thread
        if last:
            last_started.set()
        found = translate(texts, *args, **kwargs)
        if last:  # placed while it decodes: give the placing its time before this part ends
            assert wait_for(lambda: len(placed) > 0, seconds=30), "nothing was placed while the last part decoded"
        else:
            first_done.set()
        return found

    pipeline = TranslationSession(translator)
    masked = pipeline.masked
    prepared: list[int] = []

    def masking(terms, texts, *args, **kwargs):
        if prepared:  # a later part, prepared once the first is translated: time to place it, were it allowed
            assert first_done.wait(timeout=30)
            time.sleep(0.2)
        prepared.append(len(texts))
        return masked(terms, texts, *args, **kwargs)

    monkeypatch.setattr(ZipXmlDocument, "place", placing)
    monkeypatch.setattr(translator, "translate", translating)
    monkeypatch.setattr(pipeline, "masked", masking)
    early = pipeline.translate_document(DocumentJob(source, tmp_path / "early.docx", "eng_Latn", "fra_Latn", options))
    count = len(placed)
    assert len(prepared) > 1 and [index for index, _ in placed] == list(range(count))
    assert all(started for _, started in placed), "placed while this process prepared a part"
    monkeypatch.setattr(translator, "translate", translate)
    monkeypatch.setattr(pipeline, "masked", masked)
    monkeypatch.setattr(segments, "PLACING_SECONDS", 3600)  # none placed until the end
    placed.clear()
    late = pipeline.translate_document(DocumentJob(source, tmp_path / "late.docx", "eng_Latn", "fra_Latn", options))
    assert len(placed) == count  # all at the end
    with zipfile.ZipFile(early) as a, zipfile.ZipFile(late) as b:
        assert a.read("word/document.xml") == b.read("word/document.xml")


def test_a_part_that_fails_stops_the_others_and_its_error_is_raised(translator, tmp_path, monkeypatch):
    """An error in preparing the second part stops the first part's decoding (nothing is left
    running in the engine) and reaches the caller; a stop ends every part."""
    source = long_document(tmp_path)
    pipeline = TranslationSession(translator)
    masked, translate = pipeline.masked, translator.translate
    stopped = []

    def recording(texts, *args, **kwargs):
        found = translate(texts, *args, **kwargs)
        stopped.append(None in found)
        return found

    prepared = []

    def failing(terms, texts, *args, **kwargs):
        prepared.append(len(texts))
        if len(prepared) > 1:  # the second part
            raise OSError("the disk is gone")
        return masked(terms, texts, *args, **kwargs)

    monkeypatch.setattr(translator, "translate", recording)
    monkeypatch.setattr(pipeline, "masked", failing)
    long_enough = {"num_beams": 4, "max_length": 40, "min_length": 40}  # the first part is still decoding
    with pytest.raises(OSError, match="the disk is gone"):
        pipeline.translate_document(DocumentJob(source, tmp_path / "failed.txt", "eng_Latn", "fra_Latn", long_enough))
    assert stopped == [True] and not (tmp_path / "failed.txt").exists()
    monkeypatch.setattr(pipeline, "masked", masked)
    looks = []
    with pytest.raises(Cancelled):
        pipeline.translate_document(DocumentJob(source, tmp_path / "stopped.txt", "eng_Latn", "fra_Latn", long_enough),
                                   should_stop=lambda: looks.append(None) or len(looks) > 3)
    assert stopped[1:] and all(stopped[1:]) and not (tmp_path / "stopped.txt").exists()


def test_a_pdf_read_in_ranges_is_translated_as_if_read_whole(translator, tmp_path, monkeypatch):
    """A PDF's pages stream into the engine range by range (app.documents.pdf_blocks), read by other
    processes: the engine gets the texts, and the output the translations, of a PDF read at once."""
    from pypdf import PdfReader
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    from dragoman.app.documents import pdf_blocks

    source = tmp_path / "book.pdf"
    c = canvas.Canvas(str(source), pagesize=A4)
    for page in range(6):
        c.setFont("Helvetica", 11)
        if page:
            c.drawString(72, 760, f"and it ends on page {page + 1}.")
        c.drawString(72, 720, f"Page {page + 1} has {page + 2} dogs.")
        c.drawString(72, 640, f"A sentence of page {page + 1} starts here")
        c.showPage()
    c.save()
    sent: list[str] = []
    translate = translator.translate
    monkeypatch.setattr(translator, "translate", lambda texts, *a, **k: sent.extend(texts) or translate(texts, *a, **k))

    def translated(name: str) -> tuple[list[str], list[str]]:
        sent.clear()
        job = DocumentJob(source, tmp_path / name, "eng_Latn", "fra_Latn", options={"num_beams": 2, "max_length": 16})
        TranslationSession(translator).translate_document(job)
        return list(sent), [page.extract_text() for page in PdfReader(tmp_path / name).pages]

    whole = translated("whole.pdf")  # 6 pages: read at once, in this process
    monkeypatch.setattr(pdf_blocks, "PAGES_PER_READER", 1)
    monkeypatch.setattr(pdf_blocks, "RANGE_PAGES", 1)
    monkeypatch.setattr(pdf_blocks, "usable_cores", lambda: 2)
    ranges = translated("ranges.pdf")
    assert "A sentence of page 3 starts here and it ends on page 4." in whole[0]
    assert ranges == whole and len(whole[1]) == 6
