"""Documents dropped on the window: count and confirm, a job per file with progress, cancel, retry,
open output, the overwrite question, typed text going first, and jobs resumed after a restart."""

import json
import subprocess
import sys

import docx
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication

import dragoman.engine.translator
from dragoman.app.session.jobs import DocumentJob
from dragoman.app.settings import Settings
from dragoman.app.window.jobs_panel import CANCELLED, DONE, FAILED, PENDING_FILE, RUNNING, save_pending
from recorder import WAIT_MS

# More sentences than the engine decodes at once on the CPU (engine/memory.py plan_cpu): a job that runs a while
SENTENCES = [f"The small dog {i} sees the green river tomorrow." for i in range(400)]


def drop(window, *paths):
    """Drag local files onto the source text box and drop them, as a file manager does."""
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    target = window.source.viewport()
    enter = QDragEnterEvent(target.rect().center(), Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier)
    QApplication.sendEvent(target, enter)
    assert enter.isAccepted()
    QApplication.sendEvent(target, QDropEvent(QPointF(target.rect().center()), Qt.CopyAction, mime, Qt.LeftButton,
                                              Qt.NoModifier))


def rows_settled(qtbot, window, count):
    qtbot.waitUntil(lambda: len(window.documents.rows) == count
                    and all(r.state in (DONE, FAILED, CANCELLED) for r in window.documents.rows), timeout=WAIT_MS)
    return {r.job.source_path.name: r for r in window.documents.rows}


def running(window, done=0):
    rows = window.documents.rows
    return bool(rows) and rows[0].state == RUNNING and rows[0].progress.value() >= done


def make_docx(path, texts):
    d = docx.Document()
    for t in texts:
        d.add_paragraph(t)
    d.save(path)


def pending(paths):
    return json.loads((paths.data_dir / PENDING_FILE).read_text(encoding="utf-8"))["jobs"]


def test_a_dropped_folder_becomes_jobs_that_write_outputs_and_open_them(qtbot, open_window, settings, tmp_path, paths):
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("Hello world.\n\nThe cat reads a book.\n", encoding="utf-8")
    (folder / "sub" / "b.md").write_text("# Title\n\nSome **bold** words.\n", encoding="utf-8")
    make_docx(folder / "c.docx", ["The first paragraph.", "The second one. It has two sentences."])
    (folder / "notes.xyz").write_text("unsupported")
    (folder / "a.deu_Latn.txt").write_text("an earlier translation, into German")
    window = open_window(settings, True)
    drop(window, folder)
    rows = rows_settled(qtbot, window, 3)
    assert window.documents.ask.questions[0].startswith("3 documents to translate")
    assert sorted(rows) == ["a.txt", "b.md", "c.docx"]
    assert all(r.state == DONE for r in rows.values())
    assert (folder / "sub" / "b.fra_Latn.md").is_file()
    assert len(docx.Document(folder / "c.fra_Latn.docx").paragraphs) == 2
    docx_row = rows["c.docx"]
    progress = [e for e in window.events.events if e[0] == "document_progress"]
    assert progress and all(0 <= done <= total for _, _, done, total in progress)
    assert docx_row.progress.value() == docx_row.progress.maximum() > 0
    assert docx_row.open_button.isVisible() and not docx_row.cancel_button.isVisible()
    docx_row.open_button.click()
    assert window.opened == [QUrl.fromLocalFile(str(folder / "c.fra_Latn.docx"))]
    assert pending(paths) == []
    window.documents.clear_button.click()
    assert window.documents.rows == [] and window.documents.isHidden()


def test_a_file_dropped_twice_is_one_job_and_documents_of_one_stem_each_get_their_own_output(qtbot, open_window, settings, tmp_path):
    from documents.document_fakes import pdf_bytes

    (tmp_path / "a.txt").write_text("Hello world.\n\nThe cat reads a book.\n", encoding="utf-8")
    (tmp_path / "a.pdf").write_bytes(pdf_bytes([["The only line of the report."]]))
    (tmp_path / "b.pdf").write_bytes(pdf_bytes([["Another report."]]))
    window = open_window(settings, True, True, True)
    drop(window, tmp_path / "a.txt", tmp_path / "a.txt")
    rows_settled(qtbot, window, 1)  # the file dropped twice is one job
    drop(window, tmp_path)  # a.txt's output is there already: asked, and replaced
    rows_settled(qtbot, window, 1 + 3)
    assert all(r.state == DONE for r in window.documents.rows)
    assert sorted(p.name for p in tmp_path.iterdir() if "fra_Latn" in p.name) == [
        "a.fra_Latn.pdf", "a.fra_Latn.txt", "b.fra_Latn.pdf"]
    assert len((tmp_path / "a.fra_Latn.txt").read_text(encoding="utf-8").split("\n\n")) == 2  # a.txt's, not a.pdf's


def test_a_corrupt_file_fails_with_its_reason_the_others_carry_on_and_retry_works(qtbot, open_window, settings,
                                                                                  tmp_path):
    (tmp_path / "broken.docx").write_bytes(b"not a zip")
    (tmp_path / "good.txt").write_text("Hello world.\n", encoding="utf-8")
    window = open_window(settings, True)
    drop(window, tmp_path / "broken.docx", tmp_path / "good.txt")
    rows = rows_settled(qtbot, window, 2)
    assert rows["good.txt"].state == DONE
    broken = rows["broken.docx"]
    assert broken.state == FAILED and "Word document" in broken.status.text()
    assert broken.retry_button.isVisible() and not broken.open_button.isVisible()
    make_docx(tmp_path / "broken.docx", ["Now it is a document."])
    broken.retry_button.click()
    qtbot.waitUntil(lambda: broken.state == DONE, timeout=WAIT_MS)
    assert (tmp_path / "broken.fra_Latn.docx").is_file()


def test_cancel_stops_a_running_job_and_forgets_it(qtbot, open_window, settings, tmp_path, paths):
    settings.max_length = 60
    (tmp_path / "long.txt").write_text("\n\n".join(SENTENCES), encoding="utf-8")
    window = open_window(settings, True)
    drop(window, tmp_path / "long.txt")
    qtbot.waitUntil(lambda: running(window), timeout=WAIT_MS)
    row = window.documents.rows[0]
    assert len(pending(paths)) == 1
    row.cancel_button.click()
    qtbot.waitUntil(lambda: row.state == CANCELLED, timeout=WAIT_MS)
    assert row.retry_button.isVisible() and not (tmp_path / "long.fra_Latn.txt").exists()
    assert pending(paths) == []


def test_typed_text_translates_while_a_document_runs(qtbot, open_window, settings, tmp_path):
    settings.num_beams, settings.max_length = 4, 60
    (tmp_path / "long.txt").write_text("\n\n".join(SENTENCES), encoding="utf-8")
    window = open_window(settings, True)
    drop(window, tmp_path / "long.txt")
    qtbot.waitUntil(lambda: running(window), timeout=WAIT_MS)
    row = window.documents.rows[0]
    window.source.setPlainText("Hello world, the cat reads a book.")
    window.translate_now()
    qtbot.waitUntil(lambda: window.events.find("translated") is not None, timeout=WAIT_MS)
    assert row.state == RUNNING, "the typed text did not wait for the document"
    assert window.target.toPlainText()
    row.cancel_button.click()
    qtbot.waitUntil(lambda: row.state == CANCELLED, timeout=WAIT_MS)


def test_an_existing_output_is_replaced_only_when_asked(qtbot, open_window, settings, tmp_path):
    (tmp_path / "a.txt").write_text("Hello world.\n", encoding="utf-8")
    (tmp_path / "a.fra_Latn.txt").write_text("mine", encoding="utf-8")
    window = open_window(settings, True, False)
    drop(window, tmp_path / "a.txt")
    qtbot.waitUntil(lambda: len(window.documents.ask.questions) == 2, timeout=WAIT_MS)
    assert "a.fra_Latn.txt" in window.documents.ask.questions[1]
    assert window.documents.rows == [] and (tmp_path / "a.fra_Latn.txt").read_text(encoding="utf-8") == "mine"
    window.documents.ask = type(window.documents.ask)(True, True)
    drop(window, tmp_path / "a.txt")
    rows_settled(qtbot, window, 1)
    assert (tmp_path / "a.fra_Latn.txt").read_text(encoding="utf-8") != "mine"


def test_a_job_stopped_by_quitting_resumes_at_the_next_start(qtbot, open_window, settings, tmp_path, paths,
                                                              monkeypatch):
    settings.max_length = 60
    (tmp_path / "long.txt").write_text("\n\n".join(SENTENCES), encoding="utf-8")
    window = open_window(settings, True)
    drop(window, tmp_path / "long.txt")
    qtbot.waitUntil(lambda: running(window, 4),
                    timeout=WAIT_MS)
    window.close()
    assert [job["source_path"] for job in pending(paths)] == [str(tmp_path / "long.txt")]
    assert not (tmp_path / "long.fra_Latn.txt").exists()

    translated = []
    original = dragoman.engine.translator.Translator.translate
    monkeypatch.setattr(dragoman.engine.translator.Translator, "translate",
                        lambda self, texts, *a, **k: translated.extend(texts) or original(self, texts, *a, **k))
    window = open_window(Settings.load(paths.settings_file))
    rows = rows_settled(qtbot, window, 1)
    assert rows["long.txt"].state == DONE and (tmp_path / "long.fra_Latn.txt").is_file()
    assert len(set(translated)) <= len(SENTENCES) - 4, "the sentences finished before quitting are not translated again"
    assert pending(paths) == []


def test_a_job_whose_output_a_crash_left_in_place_is_done_and_its_temporary_file_removed(qtbot, open_window, settings,
                                                                                        tmp_path, paths):
    source, output = tmp_path / "a.txt", tmp_path / "a.fra_Latn.txt"
    source.write_text("Hello world.\n", encoding="utf-8")
    output.write_text("Bonjour.\n", encoding="utf-8")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    # the crash came after the output was linked into place, before its temporary name was removed
    (tmp_path / f".a.fra_Latn.txt.dragoman-{gone.pid}-0a1b2c3d.part").write_text("Bonjour.\n", encoding="utf-8")
    save_pending(paths.data_dir / PENDING_FILE, [DocumentJob(source, output, "eng_Latn", "fra_Latn")])
    window = open_window(settings)
    rows = rows_settled(qtbot, window, 1)
    assert rows["a.txt"].state == DONE
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.fra_Latn.txt", "a.txt", "home"]


def test_a_done_job_says_how_many_sentences_had_their_formatting_placed_by_proportion(
        qtbot, open_window, settings, tmp_path, monkeypatch):
    import re

    def translate(self, texts, *args, terms=None, **kwargs):  # tags kept only where the text says "keep"
        return [t.upper() if "keep" in t else re.sub(r"</?x\d+/?>", "", t).upper() for t in texts]

    monkeypatch.setattr(dragoman.engine.translator.Translator, "translate", translate)
    (tmp_path / "lost.md").write_text("Some **bold** words.\n\nMore *slanted* words.\n\nPlain.\n", encoding="utf-8")
    (tmp_path / "kept.md").write_text("We keep **bold** words.\n", encoding="utf-8")
    window = open_window(settings, True)
    drop(window, tmp_path / "lost.md", tmp_path / "kept.md")
    rows = rows_settled(qtbot, window, 2)
    assert rows["lost.md"].status.text() == "Saved as lost.fra_Latn.md; formatting placed by proportion in 2 sentences"
    assert rows["kept.md"].status.text() == "Saved as kept.fra_Latn.md"
    assert (tmp_path / "kept.fra_Latn.md").read_text(encoding="utf-8").strip() == "WE KEEP **BOLD** WORDS."


def test_unsupported_files_are_named_and_failed_and_cancelled_jobs_are_counted_as_such(qtbot, open_window, settings,
                                                                                       tmp_path):
    settings.max_length = 60
    make_docx(tmp_path / "a.docx", ["The first paragraph."])
    (tmp_path / "b.svg").write_text("<svg xmlns=\"http://www.w3.org/2000/svg\"/>", encoding="utf-8")  # a drawing: not read
    (tmp_path / "c.txt").write_text("Hello world.\n", encoding="utf-8")
    (tmp_path / "broken.docx").write_bytes(b"not a zip")
    (tmp_path / "long.txt").write_text("\n\n".join(SENTENCES), encoding="utf-8")
    window = open_window(settings, True, True)
    notes = []
    window.documents.message.connect(notes.append)
    drop(window, tmp_path / "a.docx", tmp_path / "b.svg", tmp_path / "c.txt")
    rows_settled(qtbot, window, 2)
    question = window.documents.ask.questions[0]
    assert question.startswith("2 documents to translate from English to French") and "b.svg" in question
    assert notes[0] == "Skipped b.svg: not a document Dragoman reads."
    drop(window, tmp_path / "broken.docx", tmp_path / "long.txt")
    qtbot.waitUntil(lambda: len(window.documents.rows) == 4 and window.documents.rows[3].state == RUNNING,
                    timeout=WAIT_MS)
    window.documents.rows[3].cancel_button.click()
    rows = rows_settled(qtbot, window, 4)
    assert rows["broken.docx"].state == FAILED and rows["long.txt"].state == CANCELLED
    for row in (rows["broken.docx"], rows["long.txt"]):
        assert row.progress.maximum() > 0  # a stopped bar: a range of (0, 0) is Qt's endless busy animation
    assert window.documents.toggle.text() == "Documents: 0 to do, 2 done, 1 failed, 1 cancelled"


def test_the_list_grows_with_the_splitter_scrolls_to_new_jobs_and_open_says_when_nothing_opens(
        qtbot, open_window, settings, tmp_path):
    names = [f"doc{i:02}.txt" for i in range(12)]
    for name in names:
        (tmp_path / name).write_text("Hello world.\n", encoding="utf-8")
    window = open_window(settings, True)
    window.documents.open_url = lambda url: False  # no viewer set for .txt files
    drop(window, *(tmp_path / name for name in names))
    rows = rows_settled(qtbot, window, 12)
    bar = window.documents.scroll.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0 and bar.value() == bar.maximum(), timeout=WAIT_MS)  # the newest in view
    total = sum(window.splitter.sizes())
    window.splitter.setSizes([total // 3, total - total // 3])
    assert window.documents.height() >= total // 2  # the person made the list taller
    rows["doc00.txt"].open_button.click()
    message = window.statusBar().currentMessage()
    assert message.startswith("No application is set to open .txt files") and "doc00.fra_Latn.txt" in message


def test_the_time_left_after_a_retry_leaves_out_the_sentences_the_cache_gave_at_once(qtbot, monkeypatch, tmp_path):
    from dragoman.app.window import jobs_panel

    clock = [100.0]
    monkeypatch.setattr(jobs_panel.time, "monotonic", lambda: clock[0])
    row = jobs_panel.JobRow(DocumentJob(tmp_path / "a.txt", tmp_path / "a.fra_Latn.txt", "eng_Latn", "fra_Latn"))
    qtbot.addWidget(row)
    row.set_state(FAILED, "out of memory")
    row.set_state(jobs_panel.QUEUED)  # retried
    row.show_progress(0, 100)
    clock[0] += 0.01
    row.show_progress(60, 100)  # what the first run had translated, from the cache
    clock[0] += 10
    row.show_progress(70, 100)  # 10 sentences decoded in 10 s: 30 left
    assert row.status.text() == "about 30 s left"


def test_a_done_job_says_the_encoding_its_document_was_read_in(qtbot, open_window, settings, tmp_path):
    text = "Le café où l'été dernier nous avons mangé des crêpes.\n\nC'était très agréable, dit-il à l'élève.\n"
    (tmp_path / "old.txt").write_bytes(text.encode("cp1252"))
    window = open_window(settings, True)
    drop(window, tmp_path / "old.txt")
    rows = rows_settled(qtbot, window, 1)
    status = rows["old.txt"].status.text()
    assert rows["old.txt"].state == DONE
    assert status.startswith("Saved as old.fra_Latn.txt; read as windows-1252 (the file is not UTF-8)"), status
