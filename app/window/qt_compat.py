"""Python and Qt living together: garbage collection on the right thread.

Python's cyclic garbage collector runs in whichever thread happens to allocate when a threshold
is reached: the engine thread, say. If it frees a cycle holding a Qt widget, the widget is destroyed
off the GUI thread and Qt crashes. `MainThreadGarbageCollector` turns automatic collection off and
collects from a timer on the GUI thread instead, with the same generation thresholds (as
qutebrowser does).

(PySide6 6.12.0 also drops a reference to `True` on every signal emit, which aborts Python 3.10 and
3.11 after ~600 emits: pyproject.toml keeps PySide6 below 6.12.)
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer


class MainThreadGarbageCollector(QObject):
    """While it lives, cyclic garbage is collected only on the thread that created it (the GUI thread)."""

    INTERVAL_MS = 1000

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.thresholds = gc.get_threshold()
        self.timer = QTimer(self, interval=self.INTERVAL_MS)
        self.timer.timeout.connect(self.collect)
        gc.disable()
        self.timer.start()

    def collect(self) -> None:
        """Collect the youngest generation over its threshold, and the older ones that are over theirs too."""
        counts = gc.get_count()
        for generation in range(3):
            if counts[generation] <= self.thresholds[generation]:
                break
            gc.collect(generation)
