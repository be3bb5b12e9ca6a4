"""Pictures pasted into the source pane: their text recognised off the GUI thread and put in the pane.

`SourceEdit` is the source pane: a paste (Ctrl+V, the context menu, a drop) of picture data without text
emits `picture_pasted` instead of inserting nothing. `PastedPictureReader` reads such a picture's text
with OCR (ocr.picture_text, in the pane's source language) on a Task thread, says so in the status bar
meanwhile, and inserts the text at the cursor, where it is translated as typed text is.
"""

from __future__ import annotations

from typing import Callable

from PySide6.QtCore import QMimeData, QObject, Signal
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QStatusBar

from dragoman.app.window.tasks import Task
from dragoman.app.window.text_pane import TextPane


class SourceEdit(TextPane):
    """The source pane; a pasted picture without text becomes `picture_pasted`."""

    picture_pasted = Signal(QImage)

    def canInsertFromMimeData(self, source: QMimeData) -> bool:
        return source.hasImage() or super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:
        if source.hasImage() and not source.hasText():
            image = QImage(source.imageData())
            if not image.isNull():
                self.picture_pasted.emit(image)
            return
        super().insertFromMimeData(source)


def pil_image(image: QImage):
    """A copy of a QImage as a Pillow RGB image (made on the GUI thread: the QImage stays there)."""
    from PIL import Image

    rgb = image.convertToFormat(QImage.Format.Format_RGB888)
    width, height, stride = rgb.width(), rgb.height(), rgb.bytesPerLine()
    return Image.frombuffer("RGB", (width, height), bytes(rgb.constBits()), "raw", "RGB", stride, 1).copy()


class PastedPictureReader(QObject):
    """Reads the pictures `edit` is pasted, in the language `source_language()` names, one at a time."""

    read = Signal(str)  # the text inserted
    failed = Signal(str)  # why there is none

    def __init__(self, edit: SourceEdit, source_language: Callable[[], str], status: QStatusBar):
        super().__init__(edit)
        self.edit, self.source_language, self.status = edit, source_language, status
        self.task: Task | None = None
        edit.picture_pasted.connect(self.start)

    def start(self, image: QImage) -> None:
        if self.task is not None and self.task.isRunning():
            self.status.showMessage("Still reading the last picture pasted", 3000)
            return
        picture, source = pil_image(image), self.source_language()

        def work(report, should_stop) -> str:
            from dragoman.app.documents.ocr import picture_text

            return picture_text(picture, source)

        self.task = Task(work, self)
        self.task.succeeded.connect(self._insert)
        self.task.failed.connect(self._fail)
        self.status.showMessage(f"Reading the text of the pasted picture ({image.width()} x {image.height()})…")
        self.task.start()

    def wait(self) -> None:
        """Until the picture being read is read (the window closing)."""
        if self.task is not None:
            self.task.wait()

    def _insert(self, text: str) -> None:
        self.status.clearMessage()
        self.edit.insertPlainText(text)
        self.read.emit(text)

    def _fail(self, message: str) -> None:
        self.status.showMessage(f"Pasted picture: {message}", 5000)
        self.failed.emit(message)
