"""Start the desktop window: `dragoman [FILE ...]` with no subcommand lands here (app/cli.py calls run_window)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Callable, Sequence

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication

from dragoman.app.settings import AUTO_DETECT, AppPaths, Settings
from dragoman.app.window.popup import read_selection
from dragoman.app.wording import counted
from dragoman.app.window.qt_compat import MainThreadGarbageCollector
from dragoman.app.window.single_instance import LaunchListener, PopupRequest, hand_over, hand_over_popup
from dragoman.engine import UnknownLanguageError, resolve_language


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


class FileOpenEvents(QObject):
    """An event filter on the application: on macOS, documents opened from Finder ("Open With", a drop
    on the Dock icon) come as QFileOpenEvents, one per file, not on the command line. The files of
    one such open go to `opened(paths)` together, so they are confirmed once, as a drop is."""

    def __init__(self, opened: Callable[[list[Path]], None], parent=None):
        super().__init__(parent)
        self.opened = opened
        self.files: list[Path] = []
        # Finder sends the events of one open back to back: a zero timer fires after the last.
        self.batch = QTimer(self, singleShot=True, interval=0)
        self.batch.timeout.connect(self._hand_over)

    def eventFilter(self, watched, event) -> bool:
        if event.type() == QEvent.FileOpen and event.file():
            self.files.append(Path(event.file()))
            self.batch.start()
            return True
        return super().eventFilter(watched, event)

    def _hand_over(self) -> None:
        files, self.files = self.files, []
        self.opened(files)


def show_window(paths: AppPaths, settings: Settings, files: Sequence[str | Path] = (), shown: bool = True):
    """Show the main window (unless not `shown`: started for the popup, it waits in the tray), with
    `files` (and any opened from Finder later) queued as documents."""
    from dragoman.app.window.main_window import MainWindow  # after QApplication: widgets need it

    window = MainWindow(paths, settings)
    if shown:
        window.show()
        window.source.setFocus()
    QApplication.instance().installEventFilter(FileOpenEvents(window.open_documents, window))
    if files:
        window.open_documents(files)
    return window


def listen_for_launches(window, paths: AppPaths) -> LaunchListener:
    """Later launches hand their files to this window, and raise it; `dragoman popup` hands its text to
    the window's popup."""
    listener = LaunchListener(paths, window)

    def opened(files: list[Path]) -> None:
        window.show_and_raise()
        if files:
            window.open_documents(files)

    listener.opened.connect(opened)
    listener.popup.connect(window.desktop.show_popup)
    if not listener.listen():
        print(f"dragoman: a second launch cannot reach this window ({listener.server.errorString()})", file=sys.stderr)
    return listener


def run_window(
    model: str | None, adapters: str | None, src: str | None, tgt: str | None, device: str | None, files: Sequence[str] = (),
    popup: PopupRequest | None = None,
) -> int:
    """Open the window with these choices (None = as saved) and these documents to translate, run until it
    closes for good; the exit code. With `popup`, the popup translates its text and the window stays hidden."""
    paths = AppPaths.default()
    try:
        settings = startup_settings(paths, model, adapters, src, tgt, device)
    except UnknownLanguageError as e:
        print(f"dragoman: {e}", file=sys.stderr)
        return 2
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("Dragoman")
    app.setDesktopFileName("dragoman")
    if popup is not None and hand_over_popup(paths, popup):
        print("dragoman: Dragoman is already running: the text handed to its popup", file=sys.stderr)
        return 0
    if popup is None and hand_over(paths, files):
        what = f"{counted(len(files), 'file')} handed to it" if files else "its window raised"
        print(f"dragoman: Dragoman is already running: {what}", file=sys.stderr)
        return 0
    MainThreadGarbageCollector(app)  # a child of app: collects while the app runs

    window = show_window(paths, settings, files, shown=popup is None)
    listen_for_launches(window, paths)
    # The window may close to the tray, and the popup is a window too: the app ends when the window closes for good.
    app.setQuitOnLastWindowClosed(False)
    window.shut_down.connect(app.quit)
    if popup is not None:
        window.desktop.show_popup(popup)
    # Ctrl+C in the terminal closes the window (and so stops the engine thread) cleanly. Python
    # handles signals only when it runs, so a timer wakes it now and then.
    signal.signal(signal.SIGINT, lambda *_: window.quit_app())
    wake = QTimer(interval=250)
    wake.timeout.connect(lambda: None)
    wake.start()
    return app.exec()


def run_popup(clipboard_only: bool, text: str | None) -> int:
    """`dragoman popup`: `text`, else the selection (or the clipboard: where there is no selection, or
    `clipboard_only`), translated in the popup of the running app, which starts in the tray if none runs."""
    app = QApplication.instance() or QApplication(sys.argv[:1])  # the clipboard needs it; run_window goes on with it
    request = PopupRequest(text, clipboard=False) if text is not None else read_selection(clipboard_only)
    return run_window(None, None, None, None, None, popup=request)
