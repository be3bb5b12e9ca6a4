"""The main window: two panes, language pickers, and the first-run page when no model is set up.

The window never computes: every translation, model load, import and download runs on another
thread and comes back as signals. The typed text is split into lines, each translated sentence by
sentence (app.session.typed_text; blank lines stay blank), and the target pane shows each line's
current best beam hypothesis until the final text replaces it.

Once a translation is shown, the target pane is editable: completions, alternatives and accepted
edits are app.window.post_editing's.

From anywhere on the desktop (the desktop's global shortcut, `dragoman popup`, the tray, Ctrl+C
twice) text is translated in a small popup through this window's worker (app.window.desktop). With
a tray icon closing the window only hides it; Ctrl+Q or the tray's Quit ends the app.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from PySide6.QtCore import QByteArray, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QColor, QFont, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QDialog,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QProgressBar,
    QSplitter,
    QStackedWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from dragoman.app import models
from dragoman.app.documents import output_path
from dragoman.app.wording import counted
from dragoman.app.session import detect
from dragoman.app.session.jobs import DocumentJob, open_memory
from dragoman.app.session.session import TranslationJob
from dragoman.app.session.terms import saved_terms
from dragoman.app.history import TranslationHistory
from dragoman.app.settings import AUTO_DETECT, DEFAULT_TEXT_SIZE, MAX_TEXT_SIZE, MIN_TEXT_SIZE, AppPaths, Settings
from dragoman.app.window import theme
from dragoman.app.window.adapter_picker import AdapterPicker
from dragoman.app.window.desktop import Desktop
from dragoman.app.window.glossary_dialog import GlossaryDialog
from dragoman.app.window.history_dialog import HistoryDialog
from dragoman.app.window.jobs_panel import DocumentsPanel, FileDrops
from dragoman.app.window.language_picker import LanguagePicker
from dragoman.app.window.local_server import LocalServer
from dragoman.app.window.memory_dialog import MemoryDialog
from dragoman.app.window.models_dialog import ModelsDialog
from dragoman.app.window.picture_paste import PastedPictureReader, SourceEdit
from dragoman.app.window.post_editing import PostEditing
from dragoman.app.window.settings_dialog import SettingsDialog
from dragoman.app.window.screen_fit import resize_within_screen
from dragoman.app.window.text_pane import Pane
from dragoman.app.window.translation_view import TranslationView
from dragoman.app.window.welcome_page import WelcomePage
from dragoman.app.window.worker import EngineWorker
from dragoman.engine import DatabaseError, get_language

TYPING_PAUSE_MS = 400  # translate this long after the last keystroke
WARMING_UP = "Preparing the GPU: the first sentences take longer"
BUILDING_KERNELS = ("Compiling the GPU's kernels (first launch on this GPU): translations run on a slower path "
                    "until they are ready")
PANE_MIN_WIDTH = 260  # each text pane, in pixels: both stay usable at the window's minimum width


class MainWindow(QMainWindow):
    shut_down = Signal()  # the window closed for good (not to the tray): the app may quit

    def __init__(self, paths: AppPaths, settings: Settings, parent=None):
        super().__init__(parent)
        self.paths = paths
        self.settings = settings
        self.setWindowTitle("Dragoman")
        self.setWindowIcon(theme.app_icon())
        resize_within_screen(self, 1040, 620)
        self.colors = theme.COLORS[theme.resolve(settings.theme)]
        if settings.source_language == AUTO_DETECT and not detect.available():
            settings.source_language = next(iter(settings.recent_languages), "eng_Latn")

        self.worker = EngineWorker(paths=paths)
        self.history = TranslationHistory(paths.history_file)
        self.worker.set_terms(saved_terms(paths, settings))
        self.job_id = 0  # the job whose results the target pane shows
        self.doubts: dict[int, str] = {}  # its lines that may be wrong, and why (app.session.confidence)
        self.job_started = 0.0
        self.segments: list[str] = []
        self.detected = ""  # FLORES code found in the current text, when the source is "Detect language"
        self.model_ready = False
        # The model settings (_model_settings) being loaded, and those of the last model that loaded.
        self.loading: tuple | None = None
        self.working: tuple | None = None
        self.jobs: dict[int, TranslationJob] = {}
        self.quitting = False  # closing for good, not to the tray
        self.closed_for_good = False

        self._build()
        self._connect()
        self.apply_theme()
        self._restore_as_last_quit()
        self.desktop = Desktop(self)
        self.documents.long_job_ended.connect(self.desktop.notify)
        self.local_server = LocalServer(self.paths, self)
        self.statusBar().addPermanentWidget(self.local_server.label)
        self.worker.start()
        self._start_model()
        self.documents.restore()  # the document jobs the app's last run had not finished

    # -- building ------------------------------------------------------------------------------------

    def _build(self) -> None:
        s = self.settings
        text_font = QFont(self.font())
        text_font.setPointSize(s.text_size)

        self.source = SourceEdit(objectName="source")
        self.source.setPlaceholderText("Type or paste text (or a picture of text) to translate")
        self.source.setFont(text_font)
        self.source.setTabChangesFocus(True)
        self.target = TranslationView(objectName="target", readOnly=True)  # editable once a translation is shown
        self.target.setPlaceholderText("Translation")
        self.target.setFont(text_font)
        self.target.setTabChangesFocus(True)
        self.target.setProperty("streaming", False)

        self.detected_label = QLabel(objectName="detected")
        self.count_label = QLabel("0 characters", objectName="count")
        self.clear_button = self._icon_button("clear", "Clear the text (Ctrl+Shift+Backspace)")
        self.activity_label = QLabel(objectName="activity")
        self.stop_button = self._icon_button("stop", "Stop translating (Esc)")
        self.stop_button.hide()
        self.copy_button = self._icon_button("copy", "Copy the translation (Ctrl+Shift+C)")

        self.source_picker = LanguagePicker(s.source_language, allow_detect=detect.available())
        self.target_picker = LanguagePicker(s.target_language)
        for picker in (self.source_picker, self.target_picker):
            picker.recent = list(s.recent_languages)
        self.swap_button = self._icon_button("swap", "Swap languages (Ctrl+Shift+S)")
        self.adapter_picker = AdapterPicker()
        self.adapter_picker.rescan(s.adapters_path(self.paths), s.adapter)
        self.settings_button = self._icon_button("settings", "Settings (Ctrl+,)")
        self.history_button = QToolButton(text="History", objectName="historyButton",
                                          toolTip="Translations kept, searchable (Ctrl+H)")
        self.glossary_button = QToolButton(text="Glossary", objectName="glossaryButton",
                                           toolTip="Glossaries and terms not to translate (Ctrl+Shift+G)")
        self.bilingual_box = QCheckBox("Bilingual PDF", toolTip="PDF documents: each original page followed by its translation")

        # The tools above both columns, so that the two panes are equal.
        tools = QHBoxLayout()
        tools.setContentsMargins(16, 8, 16, 0)
        tools.addStretch(1)
        tools.addWidget(self.bilingual_box)
        tools.addWidget(QLabel("Adapter", objectName="hint"))
        tools.addWidget(self.adapter_picker)
        tools.addWidget(self.glossary_button)
        tools.addWidget(self.history_button)
        tools.addWidget(self.settings_button)

        grid = QGridLayout()
        grid.setContentsMargins(16, 8, 16, 8)
        grid.setHorizontalSpacing(8)
        grid.setVerticalSpacing(8)
        grid.addWidget(self.source_picker, 0, 0, Qt.AlignLeft | Qt.AlignAbsolute)  # the picker is right-to-left
        grid.addWidget(self.swap_button, 0, 1, Qt.AlignCenter)
        grid.addWidget(self.target_picker, 0, 2, Qt.AlignLeft | Qt.AlignAbsolute)
        panes = [Pane(self.source, [self.detected_label, None, self.count_label, self.clear_button]),
                 Pane(self.target, [self.activity_label, self.stop_button, None, self.copy_button])]
        for column, pane in zip((0, 2), panes):
            pane.setMinimumWidth(PANE_MIN_WIDTH)
            grid.addWidget(pane, 1, column)
            grid.setColumnStretch(column, 1)
        grid.setRowStretch(1, 1)
        text_panes = QWidget()
        text_panes.setLayout(grid)
        self.documents = DocumentsPanel(self.worker, self.paths, self.make_document_job)
        # The documents list under the panes, as tall as the person drags it.
        self.splitter = QSplitter(Qt.Vertical, childrenCollapsible=False)
        self.splitter.addWidget(text_panes)
        self.splitter.addWidget(self.documents)
        self.splitter.setStretchFactor(0, 1)
        self.translator_page = QWidget()
        page = QVBoxLayout(self.translator_page)
        page.setContentsMargins(0, 0, 0, 8)
        page.setSpacing(0)
        page.addLayout(tools)
        page.addWidget(self.splitter, 1)

        self.welcome = WelcomePage(self.paths.models_dir)
        self.pages = QStackedWidget()
        self.pages.addWidget(self.translator_page)
        self.pages.addWidget(self.welcome)
        self.setCentralWidget(self.pages)

        self.model_label = QLabel(objectName="modelInfo")
        self.kernels_label = QLabel(objectName="kernelsInfo")  # shown once the GPU kernels have failed
        self.kernels_label.hide()
        self.load_progress = QProgressBar(textVisible=False, maximumWidth=120)
        self.load_progress.setRange(0, 0)
        self.load_progress.hide()
        self.statusBar().addPermanentWidget(self.load_progress)
        self.statusBar().addPermanentWidget(self.kernels_label)
        self.statusBar().addPermanentWidget(self.model_label)
        self.statusBar().setSizeGripEnabled(False)

        self.typing_timer = QTimer(self, singleShot=True, interval=TYPING_PAUSE_MS)

        def action(text: str, keys, slot) -> QAction:
            a = QAction(text, self)
            a.setShortcuts([QKeySequence(k) for k in keys])
            a.setShortcutContext(Qt.WindowShortcut)
            a.triggered.connect(slot)
            self.addAction(a)
            return a

        action("Translate now, or accept the edited translation", ["Ctrl+Return", "Ctrl+Enter"], self.translate_or_accept)
        action("Swap languages", ["Ctrl+Shift+S"], self.swap_languages)
        action("Stop", ["Escape"], self.cancel_translation)
        action("Copy translation", ["Ctrl+Shift+C"], self.copy_translation)
        action("Clear", ["Ctrl+Shift+Backspace"], self.clear_text)
        action("Source language", ["Ctrl+Shift+F"], self.source_picker.open_popup)
        action("Target language", ["Ctrl+Shift+T"], self.target_picker.open_popup)
        action("Settings", ["Ctrl+,"], self.open_settings)
        action("Glossary", ["Ctrl+Shift+G"], self.open_glossary)
        action("History", ["Ctrl+H"], self.open_history)
        action("Larger text", ["Ctrl++", "Ctrl+="], lambda: self.set_text_size(self.settings.text_size + 1))
        action("Smaller text", ["Ctrl+-"], lambda: self.set_text_size(self.settings.text_size - 1))
        action("Usual text size", ["Ctrl+0"], lambda: self.set_text_size(DEFAULT_TEXT_SIZE))
        action("Remembered edits", ["Ctrl+Shift+E"], self.open_memory)
        action("Quit", ["Ctrl+Q"], self.quit_app)
        self.source_picker.setToolTip(self.source_picker.toolTip() + " (Ctrl+Shift+F)")
        self.target_picker.setToolTip(self.target_picker.toolTip() + " (Ctrl+Shift+T)")

    def _icon_button(self, icon_name: str, tooltip: str) -> QToolButton:
        button = QToolButton(objectName="icon", toolTip=tooltip)
        button.setProperty("icon_name", icon_name)
        button.setIconSize(QSize(18, 18))
        button.setFocusPolicy(Qt.TabFocus)
        return button

    def _connect(self) -> None:
        w = self.worker
        w.loaded.connect(self._on_loaded)
        w.load_failed.connect(self._on_load_failed)
        w.load_refused.connect(self._on_load_refused)
        w.holding.connect(self.model_label.setText)
        w.kernels_unavailable.connect(self._on_kernels_unavailable)
        w.warming_up.connect(self._on_warming_up)
        w.detected.connect(self._on_detected)
        w.partial.connect(self._on_partial)
        w.translated.connect(self._on_translated)
        w.doubted.connect(self._on_doubted)
        w.failed.connect(self._on_failed)
        w.cancelled.connect(self._on_cancelled)
        w.laid_out.connect(self._on_laid_out)
        self.post_editing = PostEditing(w, self.target, self.statusBar(), self.activity_label, lambda: bool(self.job_id),
                                        self)
        self.post_editing.chosen_line.connect(self._on_alternative_chosen)
        w.remembered.connect(lambda *_: self.statusBar().showMessage("Translation remembered (Ctrl+Shift+E lists them)", 3000))
        self.source.textChanged.connect(self._on_text_changed)
        self.pasted_pictures = PastedPictureReader(self.source, self.source_picker.code, self.statusBar())
        self.typing_timer.timeout.connect(self.translate_now)
        self.source_picker.changed.connect(self._on_source_changed)
        self.target_picker.changed.connect(self._on_target_changed)
        self.swap_button.clicked.connect(self.swap_languages)
        self.clear_button.clicked.connect(self.clear_text)
        self.copy_button.clicked.connect(self.copy_translation)
        self.stop_button.clicked.connect(self.cancel_translation)
        self.settings_button.clicked.connect(self.open_settings)
        self.glossary_button.clicked.connect(self.open_glossary)
        self.history_button.clicked.connect(self.open_history)
        self.adapter_picker.currentIndexChanged.connect(self._on_adapter_changed)
        self.adapter_picker.changed_on_disk.connect(self._on_adapter_files_changed)
        self.welcome.imported.connect(self.use_model)
        self.welcome.download_button.clicked.connect(self.manage_models)
        self.welcome.settings_button.clicked.connect(self.open_settings)
        QGuiApplication.styleHints().colorSchemeChanged.connect(self._on_color_scheme_changed)
        self.documents.message.connect(lambda text: self.statusBar().showMessage(text, 5000))
        self.documents.output_folder_chosen.connect(self._use_documents_folder)
        self.documents.set_output_folder(self.settings.documents_folder)
        # Files and folders dropped anywhere on the window, the text boxes too, become document jobs.
        self.setAcceptDrops(True)
        self.file_drops = FileDrops(self.open_documents, self)
        for widget in (self, self.source.viewport(), self.target.viewport()):
            widget.installEventFilter(self.file_drops)

    def apply_theme(self) -> None:
        self.colors = theme.apply(QApplication.instance(), self.settings.theme)
        self.target.pending_colour = QColor(self.colors["muted"])
        for button in self.findChildren(QToolButton, "icon"):
            button.setIcon(theme.icon(button.property("icon_name"), self.colors["text"]))
        for picker in (self.source_picker, self.target_picker):
            picker.setIcon(theme.icon("chevron", self.colors["muted"], 14))
            picker.setIconSize(QSize(14, 14))

    def _on_color_scheme_changed(self) -> None:
        if self.settings.theme == "system":
            self.apply_theme()

    # -- the model -----------------------------------------------------------------------------------

    def _start_model(self) -> None:
        if not self.settings.model_dir:
            installed = models.list_models(self.paths.models_dir)
            if installed:
                self.settings.model_dir = str(installed[0].path)
        if self.settings.model_dir:
            self.load_model()
        else:
            self.welcome.explain_first_run()
            self.pages.setCurrentWidget(self.welcome)
            self.model_label.setText("No model")

    def _model_settings(self) -> tuple:
        s = self.settings
        return s.model_dir, s.device, s.precision, s.adapter_slots, s.gpu_memory_mb

    def load_model(self) -> None:
        s = self.settings
        self.model_ready = False
        self.loading = self._model_settings()
        self.pages.setCurrentWidget(self.translator_page)
        self.source.setFocus()
        self.statusBar().showMessage(f"Loading {Path(s.model_dir).name}…")
        self.model_label.setText("Loading model…")
        self.load_progress.show()
        # The server lets go of the model the worker is about to unload (its requests finishing) first.
        self.local_server.stop(then=lambda: self.worker.load(
            s.model_dir, s.device, s.precision, s.adapters_path(self.paths), s.adapter_slots,
            typed_options=self.typed_options(), gpu_memory=s.gpu_memory_mb << 20))

    def _on_loaded(self, description: str) -> None:
        self.model_ready = True
        self.working = self.loading
        self.load_progress.hide()
        self.model_label.setText(description)
        if self.statusBar().currentMessage().startswith("Loading"):  # keep a note that came meanwhile
            self.statusBar().showMessage("Ready", 4000)
        self.local_server.fit(self.settings, self.worker, self.typed_options())
        if self.isVisible() and self.source.toPlainText().strip() and not self.job_id:
            self.translate_now()  # a window started hidden (for the popup) translates its text once shown

    def _on_warming_up(self, warming: bool, building: bool) -> None:
        """While the GPU warms up (on a first launch its kernels compiled in another process, then
        its graphs captured), the model already translates, its first sentences more slowly: said
        until it is done."""
        if warming:
            self.statusBar().showMessage(BUILDING_KERNELS if building else WARMING_UP)
        elif self.statusBar().currentMessage() in (WARMING_UP, BUILDING_KERNELS):  # keep a note that came meanwhile
            self.statusBar().showMessage("Ready", 4000)

    def _on_kernels_unavailable(self, message: str) -> None:
        self.kernels_label.setText(message)
        self.kernels_label.show()

    def _on_load_refused(self, message: str) -> None:
        """New model settings that failed: the worker goes on with the model that worked (`loaded` follows);
        the settings go back to its, and the status bar says why in one line."""
        s = self.settings
        assert self.working is not None  # refused only beside a model that works
        s.model_dir, s.device, s.precision, s.adapter_slots, s.gpu_memory_mb = self.working
        self.loading = self.working
        self.save_settings()
        self.statusBar().showMessage(f"Kept the previous model settings: {message}")

    def _on_load_failed(self, message: str) -> None:
        self.load_progress.hide()
        self.model_label.setText("No model")
        self.statusBar().clearMessage()
        self.welcome.explain_failure(self.settings.model_dir, message)
        self.pages.setCurrentWidget(self.welcome)

    def manage_models(self) -> None:
        dialog = ModelsDialog(self.paths, self.settings.model_dir, self)
        if dialog.exec() == QDialog.Accepted and dialog.chosen_path():
            self.use_model(dialog.chosen_path())
        dialog.deleteLater()

    def use_model(self, model_dir: str) -> None:
        self.settings.model_dir = model_dir
        self.save_settings()
        self.load_model()

    # -- translating ---------------------------------------------------------------------------------

    def _on_text_changed(self) -> None:
        self.post_editing.discard()
        text = self.source.toPlainText()
        self.count_label.setText(f"{len(text):,} character{'s' if len(text) != 1 else ''}")
        if text.strip():
            if self.settings.translate_as_you_type:
                self.typing_timer.start()
                self.worker.expect_typing()
        else:
            self.typing_timer.stop()
            self.cancel_translation()
            self.segments = []
            self.target.clear()
            self.target.set_doubts({})
            self.detected = ""
            self._show_detected()

    def open_documents(self, paths: Sequence[str | Path]) -> None:
        """Files and folders dropped on the window, named on the command line (`dragoman FILE...`,
        "Open with") or opened from Finder: looked through off this thread, confirmed, then queued."""
        self.documents.add_paths([Path(p).absolute() for p in paths])  # relative to where `dragoman` ran

    def make_document_job(self, path: Path) -> DocumentJob:
        """A dropped document's job: the languages, options and adapter typed text uses now."""
        typed = self.make_job()
        target = self.target_picker.code()
        options = {"bilingual": self.bilingual_box.isChecked()}
        folder = Path(self.settings.documents_folder) if self.settings.documents_folder else None
        return DocumentJob(path, output_path(path, target, folder, options), typed.source, target, typed.options,
                           typed.adapter, document_options=options)

    def typed_options(self) -> dict:
        """The decoding options typed text uses now (overrides of the model's defaults)."""
        s = self.settings
        return {"num_beams": s.num_beams, "length_penalty": s.length_penalty, "max_length": s.max_length}

    def make_job(self) -> TranslationJob:
        s = self.settings
        source = self.source_picker.code()
        detecting = source == AUTO_DETECT
        if detecting:
            source = self.detected or next(iter(s.recent_languages), "eng_Latn")
        return TranslationJob(
            texts=self.source.toPlainText().split("\n"),
            source=source,
            target=self.target_picker.code(),
            options=self.typed_options(),
            detect=detecting,
            typed=True,
            adapter=s.adapter,
            adapters_dir=str(s.adapters_path(self.paths)),
        )

    def translate_now(self) -> None:
        """Translate the source text now (Ctrl+Return, or after a pause in typing); supersedes the previous job."""
        self.typing_timer.stop()
        if self.pages.currentWidget() is not self.translator_page or not self.source.toPlainText().strip():
            return
        job = self.make_job()
        if job.source == job.target and not job.detect:
            self.cancel_translation()
            self.post_editing.discard()
            self._show_target("", streaming=False)
            self.activity_label.setText(f"Source and target are both {get_language(job.target).name}: "
                                        "choose another language to translate into")
            return
        # Lines keep their old translation until their first hypothesis arrives: less flicker.
        old = self.target.toPlainText().split("\n")
        self.segments = [old[i] if i < len(old) and text.strip() else "" for i, text in enumerate(job.texts)]
        self.job_id = self.worker.submit(job)
        self.jobs = {self.job_id: job}
        self.job_started = time.monotonic()
        self.activity_label.setText("Translating…" if self.model_ready else "Waiting for the model…")
        self.stop_button.show()

    def cancel_translation(self) -> None:
        if self.job_id:
            self.worker.cancel(self.job_id)

    def _on_detected(self, job_id: int, code: str) -> None:
        if job_id == self.job_id:
            self.detected = code
            self._show_detected()

    def _show_detected(self) -> None:
        if self.source_picker.code() != AUTO_DETECT or not self.source.toPlainText().strip():
            self.detected_label.clear()
        elif self.detected:
            self.detected_label.setText(f"Detected: {get_language(self.detected).name}")
        else:
            self.detected_label.setText("Detected: not sure")

    def _on_partial(self, job_id: int, index: int, text: str) -> None:
        if job_id == self.job_id and index < len(self.segments):
            self.segments[index] = text
            self._show_target("\n".join(self.segments), streaming=True)

    def _on_doubted(self, job_id: int, doubts: dict) -> None:
        if job_id == self.job_id:
            self.doubts = doubts

    def _on_translated(self, job_id: int, texts: list) -> None:
        if self.post_editing.finished(job_id) or job_id != self.job_id:
            return
        self.job_id = 0
        self.segments = list(texts)
        self._show_target("\n".join(texts), streaming=False)
        if self.settings.keep_history:
            job = self.jobs[job_id]
            self.history.add(self.detected or job.source, job.target, "\n".join(job.texts), "\n".join(texts))
        self.target.set_doubts(self.doubts)
        self._idle()
        lines = sum(1 for t in texts if t)
        self.statusBar().showMessage(
            f"Translated {counted(lines, 'line')} in {time.monotonic() - self.job_started:.2f} s", 5000
        )

    def _on_failed(self, job_id: int, message: str) -> None:
        self.post_editing.failed(job_id, message)
        if job_id == self.job_id:
            self.job_id = 0
            self._idle()
            self._show_target(self.target.toPlainText(), streaming=False)
            self.statusBar().showMessage(f"Translation failed: {message}")

    def _on_cancelled(self, job_id: int) -> None:
        self.post_editing.cancelled(job_id)
        if job_id == self.job_id:
            # What was shown is not this text's translation (lines cut mid-sentence, lines left from
            # the last one): it stays greyed and read-only, said so until the next translation.
            self.job_id = 0
            self._idle()
            self._show_target(self.target.toPlainText(), streaming=False)
            self.statusBar().clearMessage()  # "Translated ..." was about the last translation
            if self.target.toPlainText().strip():
                self.target.set_partial(True)
                self.activity_label.setText("Stopped: partial translation (Ctrl+Return to finish)")

    def _idle(self) -> None:
        self.activity_label.clear()
        self.stop_button.hide()

    def _show_target(self, text: str, streaming: bool) -> None:
        if self.target.property("partial"):
            self.target.set_partial(False)
        if self.target.property("streaming") != streaming:
            self.target.setProperty("streaming", streaming)
            self.target.style().unpolish(self.target)
            self.target.style().polish(self.target)
        if self.target.toPlainText() != text:
            with self.post_editing.not_an_edit():
                self.target.setPlainText(text)
        if streaming:  # the marks of the last translation no longer apply
            self.doubts = {}
            self.target.set_doubts({})

    # -- editing the translation (app.window.post_editing) --------------------------------------------

    def _on_laid_out(self, job_id: int, layout: tuple) -> None:
        """Where each sentence's translation is: the translation shown may now be edited."""
        if self.post_editing.completed(job_id, layout) or job_id not in self.jobs:
            return
        job = self.jobs[job_id]
        self.post_editing.show(replace(job, source=self.detected or job.source, detect=False) if job.detect else job,
                               layout)

    def _on_alternative_chosen(self, line: int) -> None:
        if self.doubts.pop(line, None) is not None:  # a person chose it
            self.target.set_doubts(self.doubts)

    def translate_or_accept(self) -> None:
        """Ctrl+Return: in the target pane, accept the edited sentence; elsewhere translate now."""
        if self.target.hasFocus() and self.post_editing.editing is not None:
            self.post_editing.accept_edit()
        else:
            self.translate_now()

    # -- languages and the rest ----------------------------------------------------------------------

    def _on_source_changed(self, code: str) -> None:
        self.settings.source_language = code
        self._remember(code)
        self.detected = ""
        self._show_detected()
        self.translate_now()

    def _on_target_changed(self, code: str) -> None:
        self.settings.target_language = code
        self._remember(code)
        self.translate_now()

    def _remember(self, code: str) -> None:
        self.settings.remember_language(code)
        for picker in (self.source_picker, self.target_picker):
            picker.recent = list(self.settings.recent_languages)
        self.save_settings()

    def swap_languages(self) -> None:
        """Swap the languages, and move the translation into the source box (as DeepL does)."""
        source = self.source_picker.code()
        if source == AUTO_DETECT:
            source = self.detected or next(iter(self.settings.recent_languages), "eng_Latn")
        target = self.target_picker.code()
        translation = self.target.toPlainText()
        self.source_picker.set_code(target)
        self.target_picker.set_code(source)
        self.settings.source_language, self.settings.target_language = target, source
        self.detected = ""
        self._show_detected()
        self.save_settings()
        if translation.strip():
            self.source.setPlainText(translation)  # textChanged translates after the pause
            self.translate_now()
        self.source.setFocus()

    def copy_translation(self) -> None:
        text = self.target.toPlainText()
        if text:
            QGuiApplication.clipboard().setText(text)
            self.statusBar().showMessage("Translation copied", 2000)

    def clear_text(self) -> None:
        self.source.clear()
        self.source.setFocus()

    def _on_adapter_changed(self) -> None:
        self.settings.adapter = self.adapter_picker.currentData() or ""
        self.save_settings()
        self.translate_now()

    def _on_adapter_files_changed(self, name: str) -> None:
        if name == self.settings.adapter and self.source.toPlainText().strip():
            self.typing_timer.start()  # once the files settle: a copy changes them many times

    def open_settings(self) -> None:
        dialog = SettingsDialog(self.settings, self.paths, self, shortcut_note=self.desktop.global_shortcut.note)
        if dialog.exec() == QDialog.Accepted:
            self.apply_settings(dialog.result_settings())
        dialog.deleteLater()

    def open_glossary(self) -> None:
        dialog = GlossaryDialog(self.settings, self.paths, self)
        if dialog.exec() == QDialog.Accepted:
            self.apply_glossary(dialog.result_settings())
        dialog.deleteLater()

    def apply_glossary(self, new: Settings) -> None:
        """Jobs from now on keep to the glossaries and do-not-translate list; the text is translated again."""
        self.settings = new
        self.save_settings()
        self.worker.set_terms(saved_terms(self.paths, new))
        self.translate_now()

    def apply_settings(self, new: Settings) -> None:
        old = self.settings
        self.settings = new
        self.save_settings()
        if new.theme != old.theme:
            self.apply_theme()
        if new.text_size != old.text_size:
            self.set_text_size(new.text_size)
        self.desktop.fit()
        self.documents.set_output_folder(new.documents_folder)
        if new.adapters_path(self.paths) != old.adapters_path(self.paths):
            self.adapter_picker.rescan(new.adapters_path(self.paths), new.adapter)
        if (new.model_dir, new.device, new.precision, new.adapter_slots, new.gpu_memory_mb) != (
            old.model_dir, old.device, old.precision, old.adapter_slots, old.gpu_memory_mb
        ):
            self._start_model()
        elif (new.num_beams, new.length_penalty, new.max_length) != (old.num_beams, old.length_penalty, old.max_length):
            self.translate_now()
        self.local_server.fit(new, self.worker if self.model_ready else None, self.typed_options())

    def save_settings(self) -> None:
        self.settings.save(self.paths.settings_file)

    def _restore_as_last_quit(self) -> None:
        """The window's size and place, and the text, as the last quit left them."""
        s = self.settings
        if s.window_geometry:
            self.restoreGeometry(QByteArray.fromBase64(s.window_geometry.encode("ascii")))
            size = self.size()
            resize_within_screen(self, size.width(), size.height())  # a smaller screen since
        if s.last_text:
            self.source.setPlainText(s.last_text)  # translated once the model is loaded

    def set_text_size(self, points: int) -> None:
        self.settings.text_size = max(MIN_TEXT_SIZE, min(MAX_TEXT_SIZE, points))
        for pane in (self.source, self.target):
            font = QFont(pane.font())
            font.setPointSize(self.settings.text_size)
            pane.setFont(font)
        self.save_settings()

    def open_memory(self) -> None:
        try:
            memory = open_memory(self.paths)
        except DatabaseError as e:
            self.statusBar().showMessage(str(e))
            return
        dialog = MemoryDialog(memory, self)
        dialog.exec()
        memory.close()
        dialog.deleteLater()

    def open_history(self) -> None:
        dialog = HistoryDialog(self.history, self.settings.keep_history, self)
        dialog.keep.toggled.connect(self._keep_history)
        dialog.exec()
        if dialog.chosen is not None:
            entry = dialog.chosen
            self.source_picker.set_code(entry.source_language)
            self.target_picker.set_code(entry.target_language)
            self.settings.source_language, self.settings.target_language = entry.source_language, entry.target_language
            self.source.setPlainText(entry.source)
            self.translate_now()
        dialog.deleteLater()

    def _keep_history(self, keep: bool) -> None:
        self.settings.keep_history = keep
        self.save_settings()

    # -- the window shown, hidden, quit ---------------------------------------------------------------

    def open_text(self, text: str) -> None:
        """"Open in Dragoman" in the popup: its text in the window, translated there."""
        self.show_and_raise()
        self.source.setPlainText(text)
        self.translate_now()

    def show_and_raise(self) -> None:
        self.showNormal()
        self.raise_()
        self.activateWindow()
        if self.source.toPlainText().strip() and not self.target.toPlainText().strip() and not self.job_id:
            self.translate_now()  # the text restored while the window was hidden

    def show_or_hide(self) -> None:
        if self.isVisible():
            self.close()  # to the tray
        else:
            self.show_and_raise()

    def _use_documents_folder(self, folder: str) -> None:
        self.settings.documents_folder = folder
        self.save_settings()

    def quit_app(self) -> None:
        """Ctrl+Q, the tray's Quit: close for good, even with the tray."""
        self.quitting = True
        self.close()

    def _remember_window(self) -> None:
        self.settings.window_geometry = bytes(self.saveGeometry().toBase64()).decode("ascii")
        self.settings.last_text = self.source.toPlainText() if self.settings.keep_history else ""  # off: no text kept
        self.save_settings()

    def closeEvent(self, event: QCloseEvent) -> None:
        """With the tray: the window hides and the app goes on. Otherwise (or quitting) stop the engine
        thread (the running job ends at its next step) and wait for it: no orphan thread."""
        if self.closed_for_good:
            event.accept()
            return
        if self.isVisible():  # a window started hidden keeps the size and place saved before
            self._remember_window()
        if self.desktop.tray is not None and not self.quitting:
            self.hide()
            event.ignore()
            return
        self.closed_for_good = True
        self.hide()
        self.desktop.stop()
        self.typing_timer.stop()
        self.welcome.stop()
        self.pasted_pictures.wait()
        self.documents.shut_down()  # before the worker stops: the jobs it drops are resumed next time
        self.local_server.stop(wait=True)
        self.worker.stop()
        self.worker.wait()
        self.history.close()
        event.accept()
        self.shut_down.emit()
