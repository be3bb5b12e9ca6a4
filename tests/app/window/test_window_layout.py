"""The window's layout: equal panes at every width, each paragraph in its own script's direction, every control on
screen at 2x scaling, and keyboard focus visible on every Tab stop. Real widgets."""

import json
import os
import subprocess
import sys

from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QColor, QKeyEvent
from PySide6.QtWidgets import QApplication

from dragoman.app.window.main_window import PANE_MIN_WIDTH
from dragoman.app.session.jobs import open_memory
from recorder import WAIT_MS, translated_in


def pane_widths(window):
    return window.source.parentWidget().width(), window.target.parentWidget().width()


def test_the_two_panes_are_equal_and_usable_at_the_minimum_width(qtbot, open_window, settings):
    window = open_window(settings)
    for size in (window.size(), window.minimumSizeHint()):
        window.resize(size)
        qtbot.waitUntil(lambda: window.size() == size.expandedTo(window.minimumSizeHint()), timeout=WAIT_MS)
        source, target = pane_widths(window)
        assert abs(source - target) <= 2 and source >= PANE_MIN_WIDTH


def line_edges(editor):
    """(left, right) of each paragraph's first line, in the editor's viewport."""
    QApplication.processEvents()
    editor.document().size()  # laid out now, also where the editor is hidden
    block, edges = editor.document().firstBlock(), []
    while block.isValid():
        assert block.layout().lineCount()
        rect = block.layout().lineAt(0).naturalTextRect()
        edges.append((rect.left(), rect.right()))
        block = block.next()
    return edges


def sides(editor) -> list[str]:
    """Where each paragraph's first line sits: flush "right", flush "left", or "?" (short lines: not both)."""
    width = editor.viewport().width()
    return ["right" if right > width - 40 and left > 40 else "left" if left < 40 and right < width - 40 else "?"
            for left, right in line_edges(editor)]


MIXED = "مرحبا بالعالم\nHello world\nשלום עולם\n123 Good morning"


def test_each_paragraph_takes_its_own_direction_in_both_panes_and_the_popup(qtbot, open_window, settings):
    window = open_window(settings)
    window.desktop.popup.show()
    for editor in (window.source, window.target, window.desktop.popup.translation):
        editor.setPlainText(MIXED)
        assert sides(editor) == ["right", "left", "right", "left"]
        assert [editor.document().findBlockByNumber(i).textDirection() for i in range(4)] == \
            [Qt.RightToLeft, Qt.LeftToRight, Qt.RightToLeft, Qt.LeftToRight]
        editor.setPlainText("Hello world\nGood morning")
        assert sides(editor) == ["left", "left"]


def test_a_paragraph_turns_as_it_is_typed(qtbot, open_window, settings):
    window = open_window(settings)
    window.source.setPlainText("Hello world\nGood morning")
    window.source.setFocus()
    cursor = window.source.textCursor()
    cursor.setPosition(window.source.document().findBlockByNumber(1).position())  # the start of the second line
    window.source.setTextCursor(cursor)
    for letter in "שלום ":  # key events carrying Hebrew letters, as a Hebrew keyboard layout sends them
        for kind in (QEvent.KeyPress, QEvent.KeyRelease):
            QApplication.sendEvent(window.source, QKeyEvent(kind, Qt.Key_unknown, Qt.NoModifier, letter))
    assert window.source.toPlainText() == "Hello world\nשלום Good morning"
    assert sides(window.source) == ["left", "right"]
    qtbot.keyClick(window.source, Qt.Key_Home)
    qtbot.keyClick(window.source, Qt.Key_A, Qt.ShiftModifier)  # a Latin letter first: the line turns back
    assert sides(window.source) == ["left", "left"]


def test_a_translation_of_mixed_scripts_is_aligned_paragraph_by_paragraph(qtbot, open_window, settings, paths):
    memory = open_memory(paths)  # the translations, so that their scripts are known
    memory.add("eng_Latn", "fra_Latn", {"Good morning.": "صباح الخير.", "The cat sleeps.": "Le chat dort."})
    memory.close()
    window = open_window(settings)
    assert translated_in(qtbot, window, "Good morning.\nThe cat sleeps.") == "صباح الخير.\nLe chat dort."
    assert sides(window.target) == ["right", "left"]
    assert sides(window.source) == ["left", "left"]


SCALED = r"""
import json, sys
from PySide6.QtWidgets import QAbstractButton, QApplication, QComboBox
from dragoman.app.settings import AppPaths, Settings
from dragoman.app.window.glossary_dialog import GlossaryDialog
from dragoman.app.window.gui import show_window
from dragoman.app.window.history_dialog import HistoryDialog
from dragoman.app.window.settings_dialog import SettingsDialog
app = QApplication([])
paths = AppPaths.default()
settings = Settings(model_dir=sys.argv[1], device="cpu", precision="float32")
window = show_window(paths, settings, ())
screen = window.screen().availableGeometry()
def off_screen(top):
    QApplication.processEvents()
    controls = [w for w in top.findChildren(QAbstractButton) + top.findChildren(QComboBox) if w.isVisible()]
    frame = top.frameGeometry()
    out = [] if screen.contains(frame) else [f"{type(top).__name__} {frame}"]
    for w in controls:
        if w.visibleRegion().isEmpty():  # scrolled out of view inside its dialog: reached by scrolling
            continue
        rect = w.rect().translated(w.mapToGlobal(w.rect().topLeft()))
        if not screen.contains(rect):
            out.append(f"{type(w).__name__} {w.text() if hasattr(w, 'text') else ''} {rect}")
    return out
found = {"window": off_screen(window)}
dialog = GlossaryDialog(settings, paths, window)
dialog.show()
found["glossary"] = off_screen(dialog)
dialog.close()
for name, dialog in (("settings", SettingsDialog(settings, paths, window)), ("history", HistoryDialog(window.history, True, window))):
    dialog.show()
    found[name] = off_screen(dialog)
    dialog.close()
window.close()
print(json.dumps(found))
"""


def test_at_2x_scaling_the_window_and_its_dialogs_fit_the_screen(tmp_path, tiny_checkpoint):
    screens = tmp_path / "screen.json"  # a 1920x1080 screen: 960x540 of Qt's pixels at 2x
    screens.write_text(json.dumps({"screens": [{"name": "laptop", "x": 0, "y": 0, "width": 1920, "height": 1080,
                                                "logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}]}))
    env = dict(os.environ, QT_QPA_PLATFORM=f"offscreen:configfile={screens}", QT_SCALE_FACTOR="2")
    done = subprocess.run([sys.executable, "-c", SCALED, str(tiny_checkpoint)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"window": [], "glossary": [], "settings": [], "history": []}


def accent_pixels(widget, accent):
    """How many pixels of the widget are drawn in (nearly) the accent colour."""
    image = widget.grab().toImage()
    near = 0
    for y in range(image.height()):
        for x in range(image.width()):
            c = image.pixelColor(x, y)
            near += abs(c.red() - accent.red()) + abs(c.green() - accent.green()) + abs(c.blue() - accent.blue()) < 60
    return near


def test_every_tab_stop_shows_that_it_has_the_focus(qtbot, open_window, settings):
    window = open_window(settings)
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=WAIT_MS)
    accent = QColor(window.colors["accent"])
    window.source.setFocus()
    seen, widget = [], window.source
    while widget not in seen:
        seen.append(widget)
        if widget not in (window.source, window.target):  # the text panes: their frame shows it
            focused = accent_pixels(widget, accent)
            window.source.setFocus()
            QApplication.processEvents()
            # a ring in the accent colour, not a faint change of shade
            assert focused >= accent_pixels(widget, accent) + 20, f"{type(widget).__name__} {widget.objectName()}"
            widget.setFocus(Qt.TabFocusReason)
            QApplication.processEvents()
        qtbot.keyClick(widget, Qt.Key.Key_Tab)
        QApplication.processEvents()
        widget = QApplication.focusWidget()
    assert len(seen) > 5
