"""Start the desktop window: `dragoman` with no subcommand lands here (app/cli.py calls run_window)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from app.qt_compat import MainThreadGarbageCollector
from app.settings import AUTO_DETECT, AppPaths, Settings
from engine.languages import UnknownLanguageError, resolve_language


def startup_settings(
    paths: AppPaths,
    model: str | None = None,
    adapters: str | None = None,
    src: str | None = None,
    tgt: str | None = None,
    device: str | None = None,
) -> Settings:
    """The saved settings with the command line's choices on top (they are kept, like choices made in the window).

    Raises UnknownLanguageError for a language code NLLB does not know.
    """
    settings = Settings.load(paths.settings_file)
    if model:
        settings.model_dir = str(Path(model).expanduser().resolve())
    if adapters:
        settings.adapters_dir = str(Path(adapters).expanduser().resolve())
    if device:
        settings.device = device
    if tgt:
        settings.target_language = resolve_language(tgt)
        settings.remember_language(settings.target_language)
    if src:
        settings.source_language = AUTO_DETECT if src == AUTO_DETECT else resolve_language(src)
        settings.remember_language(settings.source_language)
    return settings


def run_window(model: str | None, adapters: str | None, src: str | None, tgt: str | None, device: str | None) -> int:
    """Open the window with these choices (None = as saved), run until it closes; the exit code."""
    paths = AppPaths.default()
    try:
        settings = startup_settings(paths, model, adapters, src, tgt, device)
    except UnknownLanguageError as e:
        print(f"dragoman: {e}", file=sys.stderr)
        return 2
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("Dragoman")
    app.setDesktopFileName("dragoman")
    MainThreadGarbageCollector(app)  # a child of app: collects for the whole session

    from app.window import MainWindow  # after QApplication: widgets need it

    window = MainWindow(paths, settings)
    window.show()
    window.source.setFocus()
    # Ctrl+C in the terminal closes the window (and so stops the engine thread) cleanly. Python
    # handles signals only when it runs, so a timer wakes it now and then.
    signal.signal(signal.SIGINT, lambda *_: window.close())
    wake = QTimer(interval=250)
    wake.timeout.connect(lambda: None)
    wake.start()
    return app.exec()
