"""A picture of text pasted into the source pane (a real QImage with text drawn by Qt, on the
clipboard): read by the system's Tesseract off the GUI thread, put in the pane and translated."""

from PySide6.QtCore import QMimeData, Qt
from PySide6.QtGui import QColor, QFont, QImage, QPainter
from PySide6.QtWidgets import QApplication

from recorder import WAIT_MS

LINE = "The old town lies on a hill above the river."


def picture_of(text):
    """A screenshot-like picture: `text` drawn by Qt at 36 pixels, dark on white."""
    image = QImage(1100, 120, QImage.Format.Format_RGB32)
    image.fill(QColor("white"))
    painter = QPainter(image)
    font = QFont("Noto Sans")
    font.setPixelSize(36)
    painter.setFont(font)
    painter.setPen(QColor(20, 20, 40))
    painter.drawText(40, 75, text)
    painter.end()
    return image


def test_a_pasted_picture_is_read_off_the_gui_thread_put_in_the_pane_and_translated(qtbot, open_window, settings):
    window = open_window(settings)
    QApplication.clipboard().setImage(picture_of(LINE))
    translations = sum(e[0] == "translated" for e in window.events.events)
    qtbot.keyClick(window.source, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)
    assert window.statusBar().currentMessage().startswith("Reading the text of the pasted picture (1100 x 120)")
    qtbot.waitUntil(lambda: window.source.toPlainText().strip() != "", timeout=WAIT_MS)
    text = window.source.toPlainText()
    assert "old town lies on a hill" in text, text
    qtbot.waitUntil(lambda: sum(e[0] == "translated" for e in window.events.events) > translations and window.job_id == 0,
                    timeout=WAIT_MS)
    assert window.target.toPlainText().strip()


def test_a_picture_without_text_says_so_and_text_on_the_clipboard_pastes_as_text(qtbot, open_window, settings):
    window = open_window(settings)
    blank = QImage(400, 200, QImage.Format.Format_RGB32)
    blank.fill(QColor("white"))
    with qtbot.waitSignal(window.pasted_pictures.failed, timeout=WAIT_MS) as failure:
        QApplication.clipboard().setImage(blank)
        window.source.paste()
    assert failure.args == ["no text found in the picture"]
    assert window.statusBar().currentMessage() == "Pasted picture: no text found in the picture"
    assert window.source.toPlainText() == ""
    read = window.pasted_pictures.task
    qtbot.waitUntil(lambda: not read.isRunning(), timeout=WAIT_MS)  # it says so from its thread, just before it ends
    both = QMimeData()  # a picture with its text (as a browser copies one): the text is pasted, nothing is read
    both.setImageData(picture_of(LINE))
    both.setText("Some text.")
    window.source.insertFromMimeData(both)
    assert window.source.toPlainText() == "Some text." and window.pasted_pictures.task is read
