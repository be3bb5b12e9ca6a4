"""The settings dialog: model, adapters folder, device, precision, decoding options, theme, where
documents are saved, and translating from anywhere (the tray, Ctrl+C twice, and a line saying what
the desktop gave or offers for a global shortcut: app.window.global_shortcut, app.desktop_shortcut),
and the local API server (app.window.local_server).

Only what the chosen device can do is offered: on the CPU no float16 or bfloat16, on a GPU no
int8; GPU memory and resident adapters are greyed, with a note, where no GPU will be used."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from PySide6.QtGui import QGuiApplication

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from dragoman.app import models
from dragoman.app.desktop_shortcut import shortcut_advice
from dragoman.app.settings import MAX_TEXT_SIZE, MIN_GPU_MEMORY_MB, MIN_TEXT_SIZE, THEMES, AppPaths, Settings
from dragoman.app.window.models_dialog import ModelsDialog
from dragoman.app.window.screen_fit import resize_within_screen
from dragoman.app.window.tray import tray_available

BESIDE_EACH_DOCUMENT = "Beside each document"


PRECISION_LABELS = {
    "auto": "Automatic (bfloat16 on GPU, float16 before RTX 30, float32 on CPU)",
    "int8": "int8 (smaller and faster on the CPU)",
}
CPU_PRECISIONS = ("auto", "float32", "int8")
GPU_PRECISIONS = ("auto", "float32", "bfloat16", "float16")


def precisions_for(device: str, has_gpu: bool) -> tuple[str, ...]:
    """The precisions `device` supports ("auto": the GPU when there is one)."""
    on_gpu = device.startswith("cuda") or (device == "auto" and has_gpu)
    return GPU_PRECISIONS if on_gpu else CPU_PRECISIONS


def device_choices() -> list[tuple[str, str]]:
    """(value, label) for each device this machine has. Asks the CUDA driver for names only: no context is made."""
    from dragoman.engine import cuda_device_names  # it loads torch and the kernels: here, not at the window's start

    choices = [("auto", "Automatic (GPU if there is one)"), ("cpu", "CPU")]
    choices += [(f"cuda:{i}", f"GPU {i}: {name}") for i, name in enumerate(cuda_device_names())]
    return choices


class SettingsDialog(QDialog):
    def __init__(self, settings: Settings, paths: AppPaths, parent=None, shortcut_note: str = ""):
        """`shortcut_note`: what the desktop's portal gave for a global shortcut (app.window.global_shortcut);
        empty: what this kind of desktop offers."""
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self.setMinimumWidth(520)
        self.settings = settings
        self.paths = paths

        self.model = QComboBox()
        self.model.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
        manage = QPushButton("Models…")
        manage.setToolTip("Import, download or remove models")
        browse_model = QPushButton("Folder…")
        browse_model.setToolTip("Use a checkpoint folder where it is, without importing it")
        self.adapters = QLineEdit(str(settings.adapters_path(paths)))
        browse_adapters = QPushButton("Folder…")
        self.adapter_slots = QSpinBox(minimum=1, maximum=64, value=settings.adapter_slots)
        self.adapter_slots.setToolTip(
            "How many LoRA adapters stay loaded on the device at once; more use more memory, fewer are "
            "reloaded from disk more often"
        )
        self.device = QComboBox()
        choices = device_choices()
        self.has_gpu = any(value.startswith("cuda") for value, _ in choices)
        if settings.device not in [v for v, _ in choices]:
            choices.append((settings.device, f"{settings.device} (not found on this machine)"))
        for value, label in choices:
            self.device.addItem(label, value)
        self.device.setCurrentIndex(self.device.findData(settings.device))
        self.gpu_memory = QSpinBox(minimum=MIN_GPU_MEMORY_MB, maximum=1 << 20, singleStep=256, suffix=" MB",
                                   value=settings.gpu_memory_mb)
        self.gpu_memory.setToolTip(
            "GPU memory the translator may take beyond the model itself (its caches and working memory); "
            "more translates long documents faster, less leaves more for other programs"
        )
        self.precision = QComboBox()
        self.gpu_note = QLabel(objectName="hint", wordWrap=True)
        self.beams = QSpinBox(minimum=1, maximum=16, value=settings.num_beams)
        self.beams.setToolTip("More beams: slightly better translations, slower (1 = greedy)")
        self.length_penalty = QDoubleSpinBox(
            minimum=0.0, maximum=4.0, singleStep=0.1, decimals=2, value=settings.length_penalty
        )
        self.length_penalty.setToolTip("Above 1 favours longer translations, below 1 shorter ones")
        self.max_length = QSpinBox(minimum=8, maximum=1024, value=settings.max_length)
        self.max_length.setToolTip("The longest translation of one line, in tokens")
        self.as_you_type = QCheckBox("Translate as you type", checked=settings.translate_as_you_type,
                                     toolTip="Off: only Ctrl+Return translates")
        self.keep_history = QCheckBox("Keep a history of translations", checked=settings.keep_history,
                                      toolTip="Typed translations, kept on this computer and searchable (Ctrl+H)")
        self.text_size = QSpinBox(minimum=MIN_TEXT_SIZE, maximum=MAX_TEXT_SIZE, value=settings.text_size, suffix=" pt",
                                  toolTip="The size of the text in both panes (also Ctrl++ and Ctrl+-)")
        self.documents_folder = QLineEdit(settings.documents_folder, placeholderText=BESIDE_EACH_DOCUMENT,
                                          toolTip="Where translated documents are saved (empty: beside each document)")
        self.documents_folder.setClearButtonEnabled(True)
        browse_documents = QPushButton("Folder…")
        has_tray = tray_available()
        self.tray_icon = QCheckBox("Keep running in the tray when the window is closed",
                                   checked=settings.tray_icon and has_tray, enabled=has_tray,
                                   toolTip="The model stays loaded for the popup" if has_tray
                                   else "This desktop has no system tray")
        self.copy_twice = QCheckBox("Ctrl+C twice translates what was copied, in a popup", checked=settings.copy_twice,
                                    toolTip="Copy the same text twice within half a second, in any program")
        self.shortcut_note = QLabel(shortcut_note or shortcut_advice(QGuiApplication.platformName(),
                                                                     os.environ.get("XDG_SESSION_TYPE", "")),
                                    objectName="hint", wordWrap=True)
        self.serve_apis = QCheckBox("Serve the LibreTranslate and DeepL APIs on port", checked=settings.serve_apis,
                                    toolTip="For tools on this computer (browser extensions, Subtitle Edit, OmegaT...): "
                                            "http://127.0.0.1:PORT, with the window's model and glossaries")
        self.server_port = QSpinBox(minimum=1024, maximum=65535, value=settings.server_port)
        self.server_port.setEnabled(settings.serve_apis)
        self.serve_apis.toggled.connect(self.server_port.setEnabled)
        self.theme = QComboBox()
        for value in THEMES:
            self.theme.addItem(value.capitalize(), value)
        self.theme.setCurrentIndex(self.theme.findData(settings.theme))

        form = QFormLayout()
        form.setSpacing(10)
        form.addRow("Model", _row(self.model, browse_model, manage))
        form.addRow("Adapters folder", _row(self.adapters, browse_adapters))
        form.addRow("Resident adapters", self.adapter_slots)
        form.addRow("Device", self.device)
        form.addRow("GPU memory for translation", self.gpu_memory)
        form.addRow("Precision", self.precision)
        form.addRow("", self.gpu_note)
        form.addRow("Beam size", self.beams)
        form.addRow("Length penalty", self.length_penalty)
        form.addRow("Max length", self.max_length)
        form.addRow("Theme", self.theme)
        form.addRow("Text size", self.text_size)
        form.addRow("", self.as_you_type)
        form.addRow("", self.keep_history)
        form.addRow("Documents saved", _row(self.documents_folder, browse_documents))
        form.addRow("From anywhere", self.tray_icon)
        form.addRow("", self.copy_twice)
        form.addRow("", self.shortcut_note)
        form.addRow("Local server", _row(self.serve_apis, self.server_port))
        buttons = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        fields = QWidget()
        fields.setLayout(form)
        # On a small screen (or at 2x scaling) the fields scroll; OK and Cancel stay in view.
        scroll = QScrollArea(widgetResizable=True, frameShape=QFrame.NoFrame)
        scroll.setWidget(fields)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(18, 18, 18, 18)
        layout.addWidget(scroll, 1)
        layout.addWidget(QLabel(f"Settings are saved in {paths.settings_file}", objectName="hint", wordWrap=True))
        layout.addWidget(buttons)
        wanted = fields.sizeHint()
        resize_within_screen(self, max(self.minimumWidth(), wanted.width() + 60), wanted.height() + 120)

        self._fill_models(settings.model_dir)
        self._fit_to_device(settings.precision)
        self.device.currentIndexChanged.connect(lambda: self._fit_to_device(self.precision.currentData()))
        manage.clicked.connect(self._manage_models)
        browse_model.clicked.connect(self._browse_model)
        browse_adapters.clicked.connect(self._browse_adapters)
        browse_documents.clicked.connect(self._browse_documents_folder)

    def _fit_to_device(self, precision: str) -> None:
        """Offer the chosen device's precisions (keeping `precision` where it can), and grey what only a GPU uses."""
        offered = precisions_for(self.device.currentData(), self.has_gpu)
        self.precision.clear()
        for value in offered:
            self.precision.addItem(PRECISION_LABELS.get(value, value), value)
        self.precision.setCurrentIndex(max(0, self.precision.findData(precision)))
        on_gpu = offered is GPU_PRECISIONS
        self.gpu_memory.setEnabled(on_gpu)
        self.adapter_slots.setEnabled(on_gpu)
        self.gpu_note.setVisible(not on_gpu)
        self.gpu_note.setText("GPU memory and resident adapters apply to a GPU only: "
                              + ("the CPU is chosen." if self.has_gpu else "this machine has none."))

    def _fill_models(self, select: str) -> None:
        self.model.clear()
        for model in models.list_models(self.paths.models_dir):
            self.model.addItem(model.label, str(model.path))
        if select and self.model.findData(select) < 0:
            self.model.addItem(select, select)  # a folder used in place
        if not self.model.count():
            self.model.addItem("No model installed", "")
        self.model.setCurrentIndex(max(0, self.model.findData(select)))

    def _manage_models(self) -> None:
        dialog = ModelsDialog(self.paths, self.settings.model_dir, self)
        chosen = dialog.chosen_path() if dialog.exec() == QDialog.Accepted else self.model.currentData()
        dialog.deleteLater()
        self._fill_models(chosen or "")

    def _browse_model(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Model folder", self.model.currentData() or str(Path.home()))
        if folder:
            self._fill_models(folder)

    def _browse_adapters(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Adapters folder", self.adapters.text())
        if folder:
            self.adapters.setText(folder)

    def _browse_documents_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Save translated documents in",
                                                  self.documents_folder.text() or str(Path.home()))
        if folder:
            self.documents_folder.setText(folder)

    def result_settings(self) -> Settings:
        """The settings as the dialog shows them (the language choices are kept as they were)."""
        adapters = self.adapters.text().strip()
        return replace(
            self.settings,
            model_dir=self.model.currentData() or "",
            adapters_dir="" if adapters == str(self.paths.default_adapters_dir) else adapters,
            adapter_slots=self.adapter_slots.value(),
            device=self.device.currentData(),
            precision=self.precision.currentData(),
            gpu_memory_mb=self.gpu_memory.value(),
            num_beams=self.beams.value(),
            length_penalty=self.length_penalty.value(),
            max_length=self.max_length.value(),
            theme=self.theme.currentData(),
            text_size=self.text_size.value(),
            translate_as_you_type=self.as_you_type.isChecked(),
            keep_history=self.keep_history.isChecked(),
            documents_folder=self.documents_folder.text().strip(),
            # No tray here: the choice made where there was one is kept.
            tray_icon=self.tray_icon.isChecked() if self.tray_icon.isEnabled() else self.settings.tray_icon,
            copy_twice=self.copy_twice.isChecked(),
            serve_apis=self.serve_apis.isChecked(),
            server_port=self.server_port.value(),
        )


def _row(*widgets) -> QWidget:
    row = QWidget()
    layout = QHBoxLayout(row)
    layout.setContentsMargins(0, 0, 0, 0)
    for i, widget in enumerate(widgets):
        layout.addWidget(widget, 1 if i == 0 else 0)
    return row
