"""Documents dropped on the window: the list of document jobs, each with its progress, ETA and buttons.

Files and folders dropped on the window are looked through on a task thread (folders recursively,
supported types only), counted and confirmed, then posted to the engine worker one job each; the
worker runs them one after another, after any typed text. An existing output is replaced only when
the person says so. The jobs not finished yet are saved (JSON in the data folder) whenever the list
changes and at quit, and queued again at the next start: the translation cache makes the sentences
they had finished free, so they resume where they stopped.

Translations are saved beside each document or in one folder the person chose (here or in
Settings); a done job's folder opens from "Show in folder". A job that ran longer than
LONG_JOB_SECONDS says it ended in a desktop notification (`long_job_ended`), for the person who left.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Callable

from PySide6.QtCore import QEvent, QObject, QSize, Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMenu,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from dragoman.app.documents import DocumentError, is_supported, remove_stale_temporaries
from dragoman.app.session.jobs import DocumentJob, distinct_jobs, find_documents
from dragoman.app.wording import counted
from dragoman.app.settings import AppPaths
from dragoman.app.window.tasks import Task
from dragoman.engine import get_language

PENDING_FILE = "document_jobs.json"
QUEUED, RUNNING, DONE, FAILED, CANCELLED = "queued", "running", "done", "failed", "cancelled"
# Reports this close to the first are the sentences a retry or a resume finds in the cache (they come
# at once, not at decoding speed): the time estimate starts after them.
CACHE_BURST_SECONDS = 0.5
FIRST_HEIGHT = 180  # the list's height, in pixels, until the person drags the splitter
LONG_JOB_SECONDS = 10.0  # a job that ran longer ends with a desktop notification


def collect_documents(dropped: list[Path]) -> tuple[list[Path], list[Path]]:
    """The supported files among `dropped`, folders searched recursively (`find_documents`), each once, in order;
    and what else was dropped (files of other types, paths that are not there)."""
    found: dict[Path, None] = {}
    skipped = []
    for path in dropped:
        if path.is_dir():
            found.update(dict.fromkeys(find_documents(path)))
        elif path.is_file() and is_supported(path):
            found[path] = None
        else:
            skipped.append(path)
    return list(found), skipped


def name_some(paths: list[Path], most: int = 3) -> str:
    """'a.png, b.zip and 2 more'."""
    names = [p.name for p in paths[:most]]
    if len(paths) > most:
        return ", ".join(names) + f" and {len(paths) - most} more"
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def load_pending(path: Path) -> list[DocumentJob]:
    """The jobs saved by `save_pending`; none for a missing or unreadable file, bad entries skipped."""
    from dragoman.engine import read_json_object

    if not path.exists():
        return []
    try:
        raw = read_json_object(path, ValueError, "")
    except ValueError as e:  # not JSON, a FIFO, a device, too large, nested too deeply
        logging.getLogger(__name__).warning("%s; the unfinished jobs it lists are not restored", e)
        return []
    jobs = []
    for entry in raw.get("jobs", []) if isinstance(raw, dict) else []:
        try:
            jobs.append(DocumentJob(
                Path(entry["source_path"]), Path(entry["output_path"]), str(entry["source"]), str(entry["target"]),
                dict(entry.get("options") or {}), str(entry.get("adapter") or ""), bool(entry.get("overwrite")),
                dict(entry.get("document_options") or {}),
            ))
        except (KeyError, TypeError, ValueError):
            continue
    return jobs


def save_pending(path: Path, jobs: list[DocumentJob]) -> None:
    """Write atomically: a crash mid-write leaves the previous list."""
    path.parent.mkdir(parents=True, exist_ok=True)
    entries = [{**asdict(job), "source_path": str(job.source_path), "output_path": str(job.output_path)} for job in jobs]
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"jobs": entries}, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def local_files(event) -> list[Path]:
    """The local files and folders a drag carries (none: not ours to take)."""
    mime = event.mimeData()
    if not mime.hasUrls():
        return []
    return [Path(url.toLocalFile()) for url in mime.urls() if url.isLocalFile()]


class FileDrops(QObject):
    """An event filter: drags of local files onto the watched widgets go to `dropped(paths)`, not to
    the widgets themselves (a text box would paste the file's address)."""

    def __init__(self, dropped: Callable[[list[Path]], None], parent=None):
        super().__init__(parent)
        self.dropped = dropped

    def eventFilter(self, watched, event) -> bool:
        kind = event.type()
        if kind in (QEvent.DragEnter, QEvent.DragMove, QEvent.Drop) and local_files(event):
            event.setDropAction(Qt.CopyAction)
            event.accept()
            if kind == QEvent.Drop:
                self.dropped(local_files(event))
            return True
        return super().eventFilter(watched, event)


def describe_eta(seconds: float) -> str:
    if seconds < 60:
        return f"about {max(1, round(seconds))} s left"
    if seconds < 3600:
        return f"about {round(seconds / 60)} min left"
    return f"about {seconds / 3600:.1f} h left"


class JobRow(QFrame):
    """One document: its name, a progress bar (sentences done / total), state or ETA, and buttons."""

    def __init__(self, job: DocumentJob, parent=None):
        super().__init__(parent, objectName="documentJob")
        self.job = job
        self.state = QUEUED
        self.output: Path | None = None
        self.proportional = 0  # its sentences whose formatting was placed proportionally (JobReport)
        self.notes: list[str] = []  # what the document's reading assumed (JobReport)
        self._timing: tuple[float, int] | None = None  # (when, done) at the first progress report
        self.started: float | None = None  # when it began to run (its first progress report)

        self.name = QLabel(job.source_path.name, toolTip=str(job.source_path))
        self.progress = QProgressBar(textVisible=True, format="%v / %m", maximumWidth=220)
        self.progress.setRange(0, 0)
        self.status = QLabel(objectName="hint", textInteractionFlags=Qt.TextSelectableByMouse)
        self.cancel_button = QPushButton("Cancel", toolTip="Stop this document (it can be retried)")
        self.retry_button = QPushButton("Retry", toolTip="Translate this document again")
        self.open_button = QPushButton("Open", toolTip=f"Open {job.output_path.name}")
        self.folder_button = QPushButton("Show in folder", toolTip=f"Open {job.output_path.parent}")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 2, 8, 2)
        layout.addWidget(self.name, 2)
        layout.addWidget(self.progress, 1)
        layout.addWidget(self.status, 2)
        for button in (self.cancel_button, self.retry_button, self.open_button, self.folder_button):
            layout.addWidget(button)
        self.set_state(QUEUED)

    def set_state(self, state: str, message: str = "") -> None:
        self.state = state
        self.cancel_button.setVisible(state in (QUEUED, RUNNING))
        self.retry_button.setVisible(state in (FAILED, CANCELLED))
        self.open_button.setVisible(state == DONE)
        self.folder_button.setVisible(state == DONE)
        if state == QUEUED:
            self._timing = None
            self.started = None
            self.progress.setRange(0, 0)
            self.status.setText("Waiting")
        elif state == DONE:
            self.progress.setRange(0, max(1, self.progress.maximum()))
            self.progress.setValue(self.progress.maximum())
            saved = f"Saved as {self.output.name}" if self.output else "Done"
            if self.proportional:
                saved += f"; formatting placed by proportion in {counted(self.proportional, 'sentence')}"
            self.status.setText("; ".join([saved] + self.notes))
        else:  # failed or cancelled: the bar stops where the job did
            self.progress.setRange(0, max(1, self.progress.maximum()))
            self.status.setText(f"Failed: {message}" if state == FAILED else "Cancelled")

    def show_progress(self, done: int, total: int) -> None:
        self.state = RUNNING
        if self.started is None:
            self.started = time.monotonic()
        self.progress.setRange(0, total)
        self.progress.setValue(done)
        now = time.monotonic()
        if self._timing is None or now - self._timing[0] < CACHE_BURST_SECONDS:
            self._timing = (now, done)  # sentences found in the cache come at once: time from the last of them
        started, first = self._timing
        if done > first and done < total:
            self.status.setText(describe_eta((total - done) * (now - started) / (done - first)))
        elif done < total:
            self.status.setText("Translating…")


class DocumentsPanel(QFrame):
    """The collapsible list of document jobs under the panes (in a splitter: it can be made taller);
hidden while there are none; a job added is scrolled into view."""

    message = Signal(str)  # a short note for the status bar
    long_job_ended = Signal(str, str)  # a notification's title and text: a job that ran long is done or failed
    output_folder_chosen = Signal(str)  # where translations are saved from now on ("" = beside each document)

    def __init__(self, worker, paths: AppPaths, job_for: Callable[[Path], DocumentJob], parent=None):
        super().__init__(parent, objectName="documents")
        self.worker = worker
        self.pending_file = paths.data_dir / PENDING_FILE
        self.job_for = job_for  # a path -> its job with the window's current languages and options
        # Both replaceable (tests answer and record instead of showing dialogs or launching viewers).
        self.ask: Callable[[str, str], bool] = self._ask_with_a_dialog
        self.open_url: Callable[[QUrl], bool] = QDesktopServices.openUrl
        self.choose_folder: Callable[[], str] = lambda: QFileDialog.getExistingDirectory(
            self.window(), "Save translated documents in", str(Path.home()))
        self.rows: list[JobRow] = []
        self.by_id: dict[int, JobRow] = {}  # the worker's job id -> its row (a retry gets a new id)
        self.scans: list[Task] = []
        self.closing = False

        self.toggle = QToolButton(checkable=True, checked=True, toolButtonStyle=Qt.ToolButtonTextBesideIcon)
        self.toggle.setArrowType(Qt.DownArrow)
        self.toggle.setAutoRaise(True)
        self.clear_button = QPushButton("Clear finished")
        self.folder_choice = QToolButton(popupMode=QToolButton.InstantPopup, autoRaise=True,
                                         toolTip="Where translated documents are saved")
        folder_menu = QMenu(self.folder_choice)
        folder_menu.addAction("Beside each document", lambda: self.choose_output_folder(""))
        folder_menu.addAction("In a folder…", self._ask_for_output_folder)
        self.folder_choice.setMenu(folder_menu)
        self.set_output_folder("")
        self.list = QWidget()
        self.list_layout = QVBoxLayout(self.list)
        self.list_layout.setContentsMargins(0, 0, 0, 0)
        self.list_layout.setSpacing(2)
        self.list_layout.addStretch(1)
        self.scroll = QScrollArea(widgetResizable=True, frameShape=QFrame.NoFrame)
        self.scroll.setWidget(self.list)
        header = QHBoxLayout()
        header.addWidget(self.toggle)
        header.addStretch(1)
        header.addWidget(self.folder_choice)
        header.addWidget(self.clear_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(header)
        layout.addWidget(self.scroll)
        self.toggle.toggled.connect(self._on_toggled)
        self.follow_new_jobs = False
        bar = self.scroll.verticalScrollBar()
        bar.rangeChanged.connect(lambda _, end: self.follow_new_jobs and bar.setValue(end))
        bar.actionTriggered.connect(self._on_scrolled_by_hand)
        self.clear_button.clicked.connect(self.clear_finished)
        worker.document_progress.connect(self._on_progress)
        worker.document_report.connect(self._on_report)
        worker.document_done.connect(self._on_done)
        worker.document_failed.connect(self._on_failed)
        worker.cancelled.connect(self._on_cancelled)
        self._update_header()

    def sizeHint(self) -> QSize:
        """A few rows high at first: the splitter above it makes it taller."""
        hint = super().sizeHint()
        return QSize(hint.width(), min(hint.height(), FIRST_HEIGHT))

    # -- adding jobs ---------------------------------------------------------------------------------

    def add_paths(self, dropped: list[Path]) -> None:
        """Look through what was dropped on a task thread; then count, confirm, and queue."""
        scan = Task(lambda report, stop: collect_documents(dropped), self)
        scan.succeeded.connect(lambda found: self._confirm_and_queue(*found))
        scan.failed.connect(lambda message: self.message.emit(f"Could not read what was dropped: {message}"))
        scan.finished.connect(lambda: self._scan_ended(scan))
        self.scans.append(scan)
        scan.start()

    def _scan_ended(self, scan: Task) -> None:
        self.scans.remove(scan)
        scan.deleteLater()

    def _confirm_and_queue(self, files: list[Path], skipped: list[Path]) -> None:
        if self.closing:
            return
        active = {row.job.source_path for row in self.rows if row.state in (QUEUED, RUNNING)}
        files = [f for f in files if f not in active]
        missing = [path for path in skipped if not path.exists()]
        other = [path for path in skipped if path not in missing]
        notes = [f"Skipped {name_some(other)}: not a document Dragoman reads."] if other else []
        notes += [f"Not found: {name_some(missing)}."] if missing else []
        not_read = " ".join(notes)
        if not files:
            self.message.emit("Nothing to translate there: no supported documents that are not queued already"
                              + (f". {not_read}" if not_read else ""))
            return
        try:
            jobs = distinct_jobs([self.job_for(f) for f in files], taken=[r.job.output_path for r in self.rows
                                                                           if r.state in (QUEUED, RUNNING)])
        except DocumentError as e:
            self.message.emit(f"Nothing queued: {e}")
            return
        count = counted(len(jobs), "document")
        pair = f"{get_language(jobs[0].source).name} to {get_language(jobs[0].target).name}"
        first = jobs[0]
        where = "beside its document" if first.output_path.parent == first.source_path.parent \
            else f"in {first.output_path.parent}"
        if not self.ask("Translate documents", f"{count} to translate from {pair}. Start?\n\nEach translation is saved "
                        f"{where}, e.g. {first.output_path.name}." + (f"\n\n{not_read}" if not_read else "")):
            return
        if not_read:
            self.message.emit(not_read)
        existing = [job for job in jobs if job.output_path.exists()]
        if existing:
            names = "\n".join(job.output_path.name for job in existing[:5]) + ("\n…" if len(existing) > 5 else "")
            if self.ask("Replace translations?", f"{len(existing)} of these translations exist already:\n\n{names}"
                        "\n\nReplace them? (No: skip those documents)"):
                jobs = [replace(job, overwrite=True) if job in existing else job for job in jobs]
            else:
                jobs = [job for job in jobs if job not in existing]
        for job in jobs:
            self._queue(self._add_row(job))
        self.save()

    def restore(self) -> None:
        """Queue again the jobs the app's last run had not finished."""
        for job in load_pending(self.pending_file):
            if not job.source_path.is_file():
                continue
            row = self._add_row(job)
            if job.output_path.exists() and not job.overwrite:  # written just before a crash or quit
                remove_stale_temporaries(job.output_path)  # a crash between the rename and the cleanup
                row.output = job.output_path
                row.set_state(DONE)
            else:
                self._queue(row)
        self.save()

    def _add_row(self, job: DocumentJob) -> JobRow:
        row = JobRow(job)
        row.cancel_button.clicked.connect(lambda: self.cancel(row))
        row.retry_button.clicked.connect(lambda: self.retry(row))
        row.open_button.clicked.connect(lambda: self.open_output(row))
        row.folder_button.clicked.connect(lambda: self.show_in_folder(row))
        self.rows.append(row)
        self.list_layout.insertWidget(self.list_layout.count() - 1, row)
        self.follow_new_jobs = True  # once laid out, the list scrolls down to it
        return row

    def _queue(self, row: JobRow) -> None:
        row.set_state(QUEUED)
        self.by_id[self.worker.submit(row.job)] = row
        self._update_header()

    # -- the buttons ---------------------------------------------------------------------------------

    def cancel(self, row: JobRow) -> None:
        for job_id, r in self.by_id.items():
            if r is row:
                self.worker.cancel(job_id)

    def retry(self, row: JobRow) -> None:
        if row.job.output_path.exists() and not row.job.overwrite:
            if not self.ask("Replace translation?", f"{row.job.output_path.name} exists already. Replace it?"):
                return
            row.job = replace(row.job, overwrite=True)
        self._queue(row)
        self.save()

    def open_output(self, row: JobRow) -> None:
        if row.output is not None and not self.open_url(QUrl.fromLocalFile(str(row.output))):
            self.message.emit(f"No application is set to open {row.output.suffix or 'such'} files: "
                              f"the translation is {row.output}")

    def show_in_folder(self, row: JobRow) -> None:
        if row.output is not None and not self.open_url(QUrl.fromLocalFile(str(row.output.parent))):
            self.message.emit(f"Nothing on this desktop opens folders: the translation is {row.output}")

    def set_output_folder(self, folder: str) -> None:
        """Show where translations are saved (the window's setting)."""
        self.folder_choice.setText(f"Save in: {Path(folder).name or folder}" if folder else "Save beside each document")
        self.folder_choice.setToolTip(f"Translated documents are saved in {folder}" if folder
                                      else "Translated documents are saved beside each document")

    def choose_output_folder(self, folder: str) -> None:
        """From the header's menu: translations saved in `folder` from now on ("" = beside each document)."""
        self.set_output_folder(folder)
        self.output_folder_chosen.emit(folder)

    def _ask_for_output_folder(self) -> None:
        folder = self.choose_folder()
        if folder:  # else the chooser was cancelled
            self.choose_output_folder(folder)

    def clear_finished(self) -> None:
        for row in [r for r in self.rows if r.state not in (QUEUED, RUNNING)]:
            self.rows.remove(row)
            for job_id in [i for i, r in self.by_id.items() if r is row]:
                del self.by_id[job_id]
            row.deleteLater()
        self._update_header()

    def _on_scrolled_by_hand(self) -> None:
        self.follow_new_jobs = False

    def _on_toggled(self, shown: bool) -> None:
        self.scroll.setVisible(shown)
        self.toggle.setArrowType(Qt.DownArrow if shown else Qt.RightArrow)

    # -- what the worker says ------------------------------------------------------------------------

    def _row_for(self, job_id: int) -> JobRow | None:
        return None if self.closing else self.by_id.get(job_id)

    def _on_progress(self, job_id: int, done: int, total: int) -> None:
        if row := self._row_for(job_id):
            row.show_progress(done, total)
            self._update_header()

    def _on_report(self, job_id: int, report) -> None:
        if row := self._row_for(job_id):
            row.proportional = report.proportional
            row.notes = list(report.notes)

    def _on_done(self, job_id: int, output: str) -> None:
        if row := self._row_for(job_id):
            row.output = Path(output)
            self._finish(job_id, DONE)
            self.message.emit(f"Translated {row.job.source_path.name}")

    def _on_failed(self, job_id: int, message: str) -> None:
        if self._row_for(job_id):
            self._finish(job_id, FAILED, message)

    def _on_cancelled(self, job_id: int) -> None:
        if self._row_for(job_id):
            self._finish(job_id, CANCELLED)

    def _finish(self, job_id: int, state: str, message: str = "") -> None:
        row = self.by_id.pop(job_id)
        row.set_state(state, message)
        if state != CANCELLED and row.started is not None and time.monotonic() - row.started > LONG_JOB_SECONDS:
            self.long_job_ended.emit(f"{row.job.source_path.name} translated" if state == DONE
                                     else f"{row.job.source_path.name} failed", row.status.text())
        self.save()
        self._update_header()

    def _update_header(self) -> None:
        self.setVisible(bool(self.rows))
        waiting = sum(row.state in (QUEUED, RUNNING) for row in self.rows)
        counts = [(sum(row.state == state for row in self.rows), word)
                  for state, word in ((DONE, "done"), (FAILED, "failed"), (CANCELLED, "cancelled"))]
        self.toggle.setText(f"Documents: {waiting} to do" + "".join(f", {n} {word}" for n, word in counts if n))
        self.clear_button.setEnabled(waiting < len(self.rows))

    # -- saving --------------------------------------------------------------------------------------

    def unfinished(self) -> list[DocumentJob]:
        return [row.job for row in self.rows if row.state in (QUEUED, RUNNING)]

    def save(self) -> None:
        save_pending(self.pending_file, self.unfinished())

    def shut_down(self) -> None:
        """At quit, before the worker stops: keep the unfinished jobs for the next start, and ignore
        the 'cancelled' the worker is about to send for them."""
        self.save()
        self.closing = True
        for scan in list(self.scans):
            scan.wait()

    def _ask_with_a_dialog(self, title: str, text: str) -> bool:
        return QMessageBox.question(self.window(), title, text) == QMessageBox.Yes
