"""A one-off background task (import or download a model) on its own QThread, with progress and cancel."""

from __future__ import annotations

import threading
from typing import Any, Callable

from PySide6.QtCore import QThread, Signal

from dragoman.app.models import Cancelled


class Task(QThread):
    """Runs `work(report, should_stop)` off the GUI thread; `report(done, total, what)` becomes `progress`."""

    progress = Signal(object, object, str)  # done, total (Python ints: byte counts pass 2**31), what
    succeeded = Signal(object)  # what work returned
    failed = Signal(str)
    cancelled = Signal()

    def __init__(self, work: Callable[[Callable, Callable], Any], parent=None):
        super().__init__(parent)
        self._work = work
        self._stop = threading.Event()

    def cancel(self) -> None:
        self._stop.set()

    def run(self) -> None:
        try:
            result = self._work(lambda done, total, what: self.progress.emit(done, total, what), self._stop.is_set)
        except Cancelled:
            self.cancelled.emit()
        except Exception as e:
            self.failed.emit(str(e) or type(e).__name__)
        else:
            self.succeeded.emit(result)
