"""Editing a translation in the window's target pane (post-editing).

Once a translation is shown, the target pane is editable: typing into a sentence's translation
completes that sentence, after a pause, from its start up to the cursor (the rest of it greyed while
it streams); leaving the edited sentence, or Ctrl+Return there, accepts it into the translation
memory. Editing the source again discards the edits (`discard`). A click only places the cursor;
Alt+Down (or "Other translations" in the context menu) asks the worker for the sentence's
alternatives and lists them, with their scores, in a small menu there that the keyboard can walk;
picking one puts it in the sentence's place and into the translation memory, as an accepted edit.
Completions and alternatives keep the sentence's glossary and protected terms (the session's).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Iterator

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QLabel, QMenu, QStatusBar, QWidget

from dragoman.app.session.session import TranslationJob
from dragoman.app.window.translation_view import TranslationView
from dragoman.app.window.worker import EngineWorker

if TYPE_CHECKING:
    from dragoman.engine import Translation  # the engine's front door imports it (and torch) on first use

COMPLETION_PAUSE_MS = 400  # complete the edited sentence this long after the last keystroke


class PostEditing(QObject):
    """The person's edits of the translation shown in `target`: where each line's sentences are,
    kept in step with the edits; the edited sentence's completion; its alternatives' menu; accepted
    edits sent to the worker's translation memory. `translating()`: whether a translation of the
    source runs (no alternatives are asked meanwhile)."""

    chosen_line = Signal(int)  # a line of one sentence whose alternative a person picked: no longer in doubt

    def __init__(self, worker: EngineWorker, target: TranslationView, status: QStatusBar, activity: QLabel,
                 translating: Callable[[], bool], window: QWidget):
        super().__init__(window)
        self.worker, self.target, self.status, self.activity = worker, target, status, activity
        self.translating, self.window = translating, window
        # The job and sentences the target pane shows (`show`), each line's sentences as [sentence
        # index, start, end] kept in step with the person's edits, the sentence being edited (line,
        # index), and the completion job running for it.
        self.shown_job: TranslationJob | None = None
        self.shown_sentences: list[str] = []
        self.spans: dict[int, list[list[int]]] = {}
        self.editing: tuple[int, int] | None = None
        self.completion_job = 0
        self.completion_start: tuple[int, int, int] | None = None  # line, sentence start, typed length
        # Alternatives asked for: (request id, line, sentence index, position in the pane, its text then), and their menu.
        self.alternatives_asked: tuple[int, int, int, int, str] | None = None
        self.alternatives_menu: QMenu | None = None
        self.showing = False  # the window itself is changing the target pane (`not_an_edit`)
        self.completion_timer = QTimer(self, singleShot=True, interval=COMPLETION_PAUSE_MS)
        self.completion_timer.timeout.connect(self.complete_now)
        worker.completing.connect(self._on_completing)
        worker.alternatives_found.connect(self._on_alternatives_found)
        target.alternatives_wanted.connect(self.ask_alternatives)
        target.document().contentsChange.connect(self._on_target_edited)
        target.cursorPositionChanged.connect(self._on_target_cursor_moved)

    def show(self, job: TranslationJob, layout: tuple) -> None:
        """A translation of `job` (its source language as detected) arrived: where each sentence's
        translation is (the worker's `laid_out`), so that a person may edit it."""
        text, results = layout
        # What it was translated from, as a completion or the memory will need it again.
        self.shown_job = job
        self.shown_sentences = list(text.sentences)
        lines = text.lines(results)
        self.spans = {n: [list(span) for span in text.spans(n, results)] for n in range(len(lines))}
        self.editing = None
        self.target.setReadOnly(False)
        self.target.offer_alternatives = True

    def completed(self, job_id: int, layout: tuple) -> bool:
        """Whether `job_id` is the completion's: its sentence then takes the completion's final text."""
        if job_id != self.completion_job:
            return False
        _, results = layout
        assert self.completion_start is not None  # set with completion_job
        line, _, typed = self.completion_start
        if self.editing is not None:
            self._replace_sentence(line, self.editing[1], results[self.editing[1]], typed, pending=False)
        return True

    def finished(self, job_id: int) -> bool:
        """Whether `job_id` was the completion's (its text came with `completed`)."""
        if job_id != self.completion_job:
            return False
        self.completion_job = 0
        self.target.set_pending(0, 0, 0)
        return True

    def failed(self, job_id: int, message: str) -> None:
        if self.alternatives_asked is not None and job_id == self.alternatives_asked[0]:
            self.alternatives_asked = None
            self.activity.clear()
            self.status.showMessage(f"No alternatives: {message}")
        if job_id == self.completion_job:
            self._stop_completion()
            self.status.showMessage(f"Completion failed: {message}")

    def cancelled(self, job_id: int) -> None:
        if job_id == self.completion_job:
            self._stop_completion()

    @contextmanager
    def not_an_edit(self) -> Iterator[None]:
        """The window itself changes the target pane meanwhile: no edit of a person's."""
        self.showing = True
        try:
            yield
        finally:
            self.showing = False

    def discard(self) -> None:
        """The source changed: the translation shown, and any edit of it, are about to be replaced."""
        self.completion_timer.stop()
        self._stop_completion()
        self.editing = None
        self.spans = {}
        self.shown_job = None
        self.target.setReadOnly(True)
        self.target.offer_alternatives = False

    def _stop_completion(self) -> None:
        if self.completion_job:
            self.worker.cancel(self.completion_job)
            self.completion_job = 0
        self.target.set_pending(0, 0, 0)

    def _span_at(self, line: int, column: int) -> list[int] | None:
        return next((span for span in self.spans.get(line, []) if span[1] <= column <= span[2]), None)

    def _on_target_edited(self, position: int, removed: int, added: int) -> None:
        if self.showing or self.shown_job is None:
            return
        block = self.target.document().findBlock(position)
        line, column = block.blockNumber(), position - block.position()
        span = self._span_at(line, column)
        if span is None or block.blockNumber() != self.target.document().findBlock(position + added).blockNumber() \
                or self.target.document().blockCount() != len(self.spans):
            self.spans = {}  # lines joined or split: where sentences are is no longer known
            self.editing = None
            return
        if self.editing is not None and self.editing != (line, span[0]):
            self.accept_edit()
        self._stop_completion()  # its text would overwrite what is being typed
        delta = added - removed
        for other in self.spans[line]:
            if other[1] > column:
                other[1] += delta
            if other[2] >= column:
                other[2] += delta
        self.editing = (line, span[0])
        self.completion_timer.start()
        self.worker.expect_typing()  # its completion is typed text too

    def _on_target_cursor_moved(self) -> None:
        if self.showing or self.editing is None:
            return
        cursor = self.target.textCursor()
        line, column = cursor.blockNumber(), cursor.positionInBlock()
        span = self._span_at(line, column)
        if span is None or (line, span[0]) != self.editing:
            self.accept_edit()

    def complete_now(self) -> None:
        """Complete the sentence being edited from its start up to the cursor (after a pause in typing)."""
        self.completion_timer.stop()
        if self.editing is None or self.shown_job is None:
            return
        line, j = self.editing
        span = next(s for s in self.spans[line] if s[0] == j)
        cursor = self.target.textCursor()
        column = cursor.positionInBlock() if cursor.blockNumber() == line else span[2]
        start = self.target.document().findBlockByNumber(line).text()[span[1]:column]
        if not start.strip():
            return
        job = replace(self.shown_job, completion=(j, start))
        self.completion_start = (line, span[1], len(start))
        self.completion_job = self.worker.submit(job)

    def _on_completing(self, job_id: int, text: str) -> None:
        if job_id == self.completion_job and self.editing is not None:
            assert self.completion_start is not None  # set with completion_job
            line, _, typed = self.completion_start
            self._replace_sentence(line, self.editing[1], text, typed, pending=True)

    def _replace_sentence(self, line: int, j: int, text: str, typed: int, pending: bool) -> None:
        """Sentence j of `line` becomes `text` (its first `typed` characters are what the person typed),
        the cursor after the typed part, the rest greyed while `pending`."""
        span = next(s for s in self.spans[line] if s[0] == j)
        block = self.target.document().findBlockByNumber(line)
        cursor = QTextCursor(block)
        cursor.setPosition(block.position() + span[1])
        cursor.setPosition(block.position() + span[2], QTextCursor.MoveMode.KeepAnchor)
        with self.not_an_edit():
            cursor.insertText(text)
        delta = len(text) - (span[2] - span[1])
        for other in self.spans[line]:
            if other[1] > span[1]:
                other[1] += delta
                other[2] += delta
        span[2] = span[1] + len(text)
        cursor.setPosition(block.position() + span[1] + typed)
        self.target.setTextCursor(cursor)
        self.target.set_pending(line, span[1] + typed, span[2] if pending else span[1])

    def accept_edit(self) -> None:
        """The edited sentence's translation, as it stands, goes into the translation memory."""
        if self.editing is None or self.shown_job is None:
            return
        line, j = self.editing
        self.editing = None
        self.completion_timer.stop()
        translation = self._sentence_text(line, j).strip()
        if translation:
            self.worker.accept(self.shown_job, self.shown_sentences[j], translation)

    def _sentence_text(self, line: int, j: int) -> str:
        span = next(s for s in self.spans[line] if s[0] == j)
        return self.target.document().findBlockByNumber(line).text()[span[1]:span[2]]

    def ask_alternatives(self, position: int | None = None) -> None:
        """Alt+Down or the context menu: ask for the alternatives of the sentence at `position` in
        the target pane (None: the cursor's); the menu comes with them, at that sentence."""
        if self.shown_job is None or self.translating() or self.completion_job:
            return
        cursor = QTextCursor(self.target.document())
        cursor.setPosition(self.target.textCursor().position() if position is None else position)
        line = cursor.blockNumber()
        span = self._span_at(line, cursor.positionInBlock())
        if span is None or not self._sentence_text(line, span[0]).strip():
            self.status.showMessage("No sentence there to find other translations of", 3000)
            return
        if self.editing == (line, span[0]):
            self.status.showMessage("This sentence is being edited: accept it first (Ctrl+Return)", 3000)
            return
        request = self.worker.find_alternatives(self.shown_job, self.shown_sentences[span[0]])
        self.alternatives_asked = (request, line, span[0], cursor.position(), self._sentence_text(line, span[0]))
        self.activity.setText("Finding other translations…")

    def _on_alternatives_found(self, request: int, found: list[Translation]) -> None:
        """The menu of a sentence's alternatives, unless its translation changed meanwhile."""
        if self.alternatives_asked is None or self.alternatives_asked[0] != request:
            return
        _, line, j, position, text = self.alternatives_asked
        self.alternatives_asked = None
        if not self.translating():
            self.activity.clear()
        if self.shown_job is None or line not in self.spans or self.editing is not None \
                or not any(s[0] == j for s in self.spans[line]) or self._sentence_text(line, j) != text:
            return
        others: dict[str, Translation] = {}  # different tokens may decode to one text: each text once, at its best
        for translation in found:
            if translation.text.strip() and translation.text != text.strip():
                others.setdefault(translation.text, translation)
        if not others:
            self.status.showMessage("No other translation of this sentence", 3000)
            return
        menu = QMenu(self.target)
        menu.setToolTipsVisible(True)
        # No wider than the window: long texts are cut in the middle, whole in their tooltip.
        text_width = max(160, self.window.width() * 3 // 4)
        for translation in others.values():
            shown = menu.fontMetrics().elidedText(translation.text, Qt.ElideMiddle, text_width)
            action = menu.addAction(f"{shown}\t{translation.score:.2f}")
            action.setToolTip(f"{translation.text}\n\nScore {translation.score:.2f}: the mean log-probability of its "
                              "words (closer to 0: surer)")
            action.triggered.connect(lambda _=False, chosen=translation.text: self._choose_alternative(line, j, chosen))
        menu.setMaximumWidth(self.window.width())
        if self.alternatives_menu is not None:
            self.alternatives_menu.deleteLater()
        self.alternatives_menu = menu
        cursor = QTextCursor(self.target.document())
        cursor.setPosition(position)
        menu.popup(self.target.viewport().mapToGlobal(self.target.cursorRect(cursor).bottomLeft()))
        menu.setActiveAction(menu.actions()[0])  # the keyboard goes on from here: Up/Down, Return, Esc

    def _choose_alternative(self, line: int, j: int, text: str) -> None:
        """A picked alternative replaces sentence j of `line` and is remembered as an accepted edit."""
        if self.shown_job is None or line not in self.spans or not any(s[0] == j for s in self.spans[line]):
            return
        self._replace_sentence(line, j, text, 0, pending=False)
        if len(self.spans[line]) == 1:
            self.chosen_line.emit(line)
        self.worker.accept(self.shown_job, self.shown_sentences[j], text)
