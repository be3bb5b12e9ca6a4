"""The models dialog: the installed models (choose, remove), import a folder, download from the hub."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
)

from dragoman.app import models
from dragoman.app.settings import AppPaths
from dragoman.app.window.screen_fit import resize_within_screen
from dragoman.app.window.tasks import Task


def choose_model_folder(parent) -> str:
    """Ask for a checkpoint folder; '' when the user cancels."""
    return QFileDialog.getExistingDirectory(
        parent, "Import an NLLB model folder", str(Path.home()), QFileDialog.ShowDirsOnly
    )


class ModelsDialog(QDialog):
    def __init__(self, paths: AppPaths, current: str, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Models")
        resize_within_screen(self, 640, 560)
        self.paths = paths
        self.current = current
        self.task: Task | None = None

        self.installed = QListWidget()
        self.import_button = QPushButton("Import folder…")
        self.remove_button = QPushButton("Remove")
        self.catalog = QListWidget()
        for entry in models.CATALOG:
            item = QListWidgetItem(f"{entry.title} · about {models.format_size(entry.approx_bytes)}")
            item.setData(Qt.UserRole, entry.repo_id)
            item.setToolTip(entry.repo_id)
            self.catalog.addItem(item)
        self.catalog.setCurrentRow(0)
        self.download_button = QPushButton("Download")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.progress = QProgressBar(textVisible=False)
        self.progress.hide()
        self.status = QLabel(wordWrap=True, objectName="hint")
        self.message = QLabel(wordWrap=True, objectName="error", textInteractionFlags=Qt.TextSelectableByMouse)
        self.use_button = QPushButton("Use this model", objectName="primary")
        close_button = QPushButton("Close")

        layout = QVBoxLayout(self)
        layout.setContentsMargins(18, 18, 18, 18)
        layout.setSpacing(10)
        layout.addWidget(_heading("Installed models"))
        layout.addWidget(self.installed, 1)
        row = QHBoxLayout()
        row.addWidget(self.import_button)
        row.addWidget(self.remove_button)
        row.addStretch()
        layout.addLayout(row)
        layout.addSpacing(8)
        layout.addWidget(_heading("Download from Hugging Face"))
        layout.addWidget(QLabel(
            "Meta's NLLB-200 checkpoints. Downloads resume where they stopped.", objectName="hint"
        ))
        layout.addWidget(self.catalog, 2)
        row = QHBoxLayout()
        row.addWidget(self.download_button)
        row.addWidget(self.cancel_button)
        row.addWidget(self.progress, 1)
        row.addStretch(0)  # keeps the buttons narrow while the progress bar is hidden
        layout.addLayout(row)
        layout.addWidget(self.status)
        layout.addWidget(self.message)
        row = QHBoxLayout()
        row.addStretch()
        row.addWidget(close_button)
        row.addWidget(self.use_button)
        layout.addLayout(row)

        self.import_button.clicked.connect(self.import_folder)
        self.remove_button.clicked.connect(self.remove_selected)
        self.download_button.clicked.connect(self.download_selected)
        self.cancel_button.clicked.connect(self.cancel_task)
        self.use_button.clicked.connect(self.accept)
        close_button.clicked.connect(self.reject)
        self.installed.itemDoubleClicked.connect(self.accept)
        self.installed.currentItemChanged.connect(self._update_buttons)
        self.refresh()

    def chosen_path(self) -> str:
        item = self.installed.currentItem()
        return item.data(Qt.UserRole) if item else ""

    def refresh(self, select: str | None = None) -> None:
        select = select or self.chosen_path() or self.current
        self.installed.clear()
        for model in models.list_models(self.paths.models_dir):
            item = QListWidgetItem(model.label)
            item.setData(Qt.UserRole, str(model.path))
            item.setToolTip(str(model.path))
            if str(model.path) == self.current:
                font = QFont(self.font())
                font.setBold(True)
                item.setFont(font)
                item.setText(model.label + "  — in use")
            self.installed.addItem(item)
            if str(model.path) == select:
                self.installed.setCurrentItem(item)
        if self.installed.currentItem() is None and self.installed.count():
            self.installed.setCurrentRow(0)
        self._update_buttons()

    def _update_buttons(self) -> None:
        busy = self.task is not None
        chosen = self.installed.currentItem() is not None
        self.use_button.setEnabled(chosen and not busy)
        self.remove_button.setEnabled(chosen and not busy and self.chosen_path() != self.current)
        self.import_button.setEnabled(not busy)
        self.download_button.setEnabled(not busy)
        self.cancel_button.setEnabled(busy)

    def import_folder(self) -> None:
        folder = choose_model_folder(self)
        if folder:
            self._start(lambda report, stop: models.import_model(folder, self.paths.models_dir, report, stop),
                        f"Importing {folder}")

    def download_selected(self) -> None:
        repo_id = self.catalog.currentItem().data(Qt.UserRole)
        self._start(lambda report, stop: models.download_model(repo_id, self.paths.models_dir, report, stop),
                    f"Connecting to Hugging Face for {repo_id}…")

    def remove_selected(self) -> None:
        path = Path(self.chosen_path())
        model = next((m for m in models.list_models(self.paths.models_dir) if m.path == path), None)
        if model is None:
            return
        question = f"Delete {model.name} ({models.format_size(model.size_bytes)}) from this computer?"
        answer = QMessageBox.question(self, "Remove model", question)
        if answer == QMessageBox.Yes:
            models.remove_model(model, self.paths.models_dir)
            self.refresh()

    def _start(self, work, what: str) -> None:
        self.message.clear()
        self.status.setText(what)
        self.progress.setRange(0, 0)
        self.progress.show()
        self.task = Task(work, self)
        self.task.progress.connect(self._progress)
        self.task.succeeded.connect(self._succeeded)
        self.task.failed.connect(self._failed)
        self.task.cancelled.connect(lambda: self._done("Cancelled. A download resumes where it stopped next time."))
        self.task.finished.connect(self._task_ended)
        self._update_buttons()
        self.task.start()

    def cancel_task(self) -> None:
        if self.task is not None:
            self.task.cancel()
            self.status.setText("Cancelling…")

    def _progress(self, done: int, total: int, what: str) -> None:
        if total:
            self.progress.setRange(0, 1000)
            self.progress.setValue(int(1000 * done / total))
            self.status.setText(f"{what or 'Working'}: {models.format_size(done)} of {models.format_size(total)}")

    def _succeeded(self, model: models.InstalledModel) -> None:
        self._done(f"Installed {model.name}.")
        self.refresh(select=str(model.path))

    def _failed(self, message: str) -> None:
        self._done("")
        self.message.setText(message)

    def _done(self, status: str) -> None:
        self.progress.hide()
        self.status.setText(status)

    def _task_ended(self) -> None:
        if self.task is not None:
            self.task.deleteLater()
        self.task = None
        self._update_buttons()

    def done(self, result: int) -> None:  # closing waits for a running task to stop
        if self.task is not None:
            self.task.cancel()
            self.task.wait()
        super().done(result)


def _heading(text: str) -> QLabel:
    label = QLabel(text)
    font = label.font()
    font.setBold(True)
    font.setPointSizeF(font.pointSizeF() * 1.1)
    label.setFont(font)
    return label
