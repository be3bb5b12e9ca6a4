"""app/session/document_batch.py: a document's texts reach the engine in parts, each prepared while
the ones before decode, on the real engine."""

import threading

import pytest

from dragoman.app.documents import Cancelled
from dragoman.app.session import document_batch
from dragoman.app.session.document_batch import DOCUMENT_PART_GROWTH, FIRST_DOCUMENT_PART, document_parts
from dragoman.app.session.jobs import DocumentJob
from dragoman.app.session.session import TranslationSession


def test_document_parts_start_small_and_grow():
    assert document_parts(0) == [] and document_parts(5) == [range(0, 5)]
    first, second = FIRST_DOCUMENT_PART, FIRST_DOCUMENT_PART * DOCUMENT_PART_GROWTH
    assert document_parts(first + second + 1) == [range(0, first), range(first, first + second),
                                                  range(first + second, first + second + 1)]


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
    source = long_document(tmp_path)
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
    assert events == [("masked", 256), ("sent", 256), ("masked", 44), ("sent", 44)]
    monkeypatch.setattr(document_batch, "FIRST_DOCUMENT_PART", 10_000)
    events.clear()
    whole = pipeline.translate_document(DocumentJob(source, tmp_path / "whole.txt", "eng_Latn", "fra_Latn", options))
    assert events == [("masked", 300), ("sent", 300)]
    assert written.read_text(encoding="utf-8") == whole.read_text(encoding="utf-8")


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

    def failing(terms, texts, *args, **kwargs):
        if len(texts) < 256:
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
