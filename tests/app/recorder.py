"""Record an EngineWorker's signals for the whole life of the worker, and wait on them.

Tests wait here rather than with `qtbot.waitSignal` on the worker's signals: emissions from the
engine thread are queued, `partial` keeps firing after the first, and with PySide6 6.12 an emission
that arrives after its `waitSignal` blocker is gone crashed the test process (seen here). The
recorder stays connected until the worker has stopped and its queue is flushed.
"""

from __future__ import annotations

SIGNALS = ("loaded", "load_failed", "load_refused", "detected", "partial", "doubted", "translated", "failed", "cancelled",
           "document_progress", "document_done", "document_failed", "holding", "kernels_unavailable", "laid_out",
           "completing", "remembered", "alternatives_found", "document_report")
WAIT_MS = 30_000


class Recorder:
    def __init__(self, worker):
        self.events: list[tuple] = []
        for name in SIGNALS:
            getattr(worker, name).connect(lambda *args, name=name: self.events.append((name, *args)))

    def of(self, job_id: int) -> list[tuple]:
        """The events about one job (every job signal carries its id first)."""
        return [e for e in self.events if e[0] not in ("loaded", "load_failed", "load_refused", "holding", "kernels_unavailable")
                and e[1] == job_id]

    def kinds(self, job_id: int) -> list[str]:
        return [e[0] for e in self.of(job_id)]

    def find(self, kind: str, job_id: int | None = None) -> tuple | None:
        for event in self.events:
            if event[0] == kind and (job_id is None or event[1] == job_id):
                return event
        return None

    def wait(self, qtbot, kind: str, job_id: int | None = None, timeout: int = WAIT_MS) -> tuple:
        """The first `kind` event (of job `job_id`), waiting for it if needed."""
        qtbot.waitUntil(lambda: self.find(kind, job_id) is not None, timeout=timeout)
        return self.find(kind, job_id)


def translated_in(qtbot, window, text: str) -> str:
    """Type `text` into a real window's source pane, translate it now, and return the target pane
    once the translation is final (the pane is editable again)."""
    window.source.setPlainText(text)
    window.translate_now()
    window.events.wait(qtbot, "translated", window.job_id)
    qtbot.waitUntil(lambda: not window.target.isReadOnly(), timeout=WAIT_MS)
    return window.target.toPlainText()
