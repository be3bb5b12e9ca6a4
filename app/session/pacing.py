"""The app's helper threads give way to typed text.

A typed sentence's steps take a fraction of a millisecond each on a GPU, and the engine's thread
needs the interpreter to launch each one. A thread of the app that runs Python meanwhile (a
document's next part being prepared, its translations judged for doubts) keeps it waiting up to
the switch interval at every step. So those threads let the interpreter go after each item, and
wait while typed text decodes (`Translator.typing`).
"""

from __future__ import annotations

import time
from typing import Callable

HOLD_POLL_S = 0.001  # how often a held-back thread asks whether typed text is done


def give_way(typing: Callable[[], bool]) -> None:
    """Let the interpreter go (to the engine's thread, if it waits for it), then wait while `typing()`."""
    time.sleep(0)
    while typing():
        time.sleep(HOLD_POLL_S)
