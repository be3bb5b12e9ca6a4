"""The first-run page, shown while no model can be used: says what to do, imports a model folder
(on a task thread), and offers a download (its button; the window opens the models dialog)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QVBoxLayout, QWidget

from dragoman.app import models
from dragoman.app.window.models_dialog import choose_model_folder
from dragoman.app.window.tasks import Task


class WelcomePage(QWidget):
    """Shown while no model can be used: says what to do and offers import (into `models_dir`;
    `imported` gives the model's folder) and download (the window opens the models dialog)."""

    imported = Signal(str)

    def __init__(self, models_dir: Path, parent=None):
        super().__init__(parent)
        self.models_dir = models_dir
        self.task: Task | None = None  # the import running
        self.title = QLabel("Welcome to Dragoman", objectName="title")
        self.text = QLabel(wordWrap=True, textFormat=Qt.RichText)
        self.import_button = QPushButton("Import a model folder…", objectName="primary")
        self.import_button.setToolTip(
            "A Hugging Face NLLB checkpoint folder (config.json, weights, sentencepiece.bpe.model)"
        )
        self.download_button = QPushButton("Download a model…")
        self.settings_button = QPushButton("Settings…")
        self.progress = QProgressBar(textVisible=False)
        self.progress.hide()
        self.status = QLabel(objectName="hint", wordWrap=True)
        self.error = QLabel(objectName="error", wordWrap=True, textInteractionFlags=Qt.TextSelectableByMouse)
        box = QWidget()
        box.setMaximumWidth(620)
        layout = QVBoxLayout(box)
        layout.setSpacing(14)
        layout.addWidget(self.title)
        layout.addWidget(self.text)
        buttons = QHBoxLayout()
        buttons.addWidget(self.import_button)
        buttons.addWidget(self.download_button)
        buttons.addWidget(self.settings_button)
        buttons.addStretch()
        layout.addLayout(buttons)
        layout.addWidget(self.progress)
        layout.addWidget(self.status)
        layout.addWidget(self.error)
        outer = QVBoxLayout(self)
        outer.addStretch(1)
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(box, 3)
        row.addStretch(1)
        outer.addLayout(row)
        outer.addStretch(2)
        self.import_button.clicked.connect(self.import_model_folder)
        self.explain_first_run()

    def explain_first_run(self) -> None:
        self.title.setText("Welcome to Dragoman")
        self.text.setText(
            "Dragoman translates between 200 languages on this computer with Meta's NLLB-200 models; "
            "nothing you type leaves it.<br><br>It needs a model first. <b>Import</b> a model folder you "
            "already have (a Hugging Face NLLB checkpoint, e.g. <i>nllb-200-distilled-600M</i>), or "
            "<b>download</b> one (the smallest is about 2.5 GB)."
        )

    def explain_failure(self, model_dir: str, message: str) -> None:
        self.title.setText("The model could not be loaded")
        self.text.setText(
            f"Dragoman could not use the model in <i>{model_dir}</i>. Check the device and precision in "
            "Settings, or import or download another model."
        )
        self.error.setText(message)

    def import_model_folder(self) -> None:
        """Ask for a checkpoint folder and import it on a task thread."""
        folder = choose_model_folder(self)
        if not folder or self.task is not None:
            return
        self.error.clear()
        self.status.setText(f"Checking {folder}…")
        self.progress.setRange(0, 0)
        self.progress.show()
        self.import_button.setEnabled(False)
        self.task = Task(lambda report, stop: models.import_model(folder, self.models_dir, report, stop), self)
        self.task.progress.connect(self._on_import_progress)
        self.task.succeeded.connect(self._on_imported)
        self.task.failed.connect(self._on_import_failed)
        self.task.finished.connect(self._on_import_ended)
        self.task.start()

    def stop(self) -> None:
        """The app quits: an import running stops (its partial copy removed)."""
        if self.task is not None:
            self.task.cancel()
            self.task.wait()

    def _on_import_progress(self, done: int, total: int, what: str) -> None:
        if total:
            self.progress.setRange(0, 1000)
            self.progress.setValue(int(1000 * done / total))
        if what:
            self.status.setText(what)

    def _on_imported(self, model: models.InstalledModel) -> None:
        self.status.setText(f"Imported {model.name}.")
        self.imported.emit(str(model.path))

    def _on_import_failed(self, message: str) -> None:
        self.status.clear()
        self.error.setText(message)

    def _on_import_ended(self) -> None:
        if self.task is not None:
            self.task.deleteLater()
        self.task = None
        self.progress.hide()
        self.import_button.setEnabled(True)
