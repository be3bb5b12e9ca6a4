"""The first-run page, shown while no model can be used."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QVBoxLayout, QWidget


class WelcomePage(QWidget):
    """Shown while no model can be used: says what to do and offers import and download."""

    def __init__(self, parent=None):
        super().__init__(parent)
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
