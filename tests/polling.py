"""Waiting, in tests, for what other threads and processes do."""

import time


def wait_for(condition, seconds: float = 30, every: float = 0.01) -> bool:
    """Whether `condition()` came true within `seconds`, asked every `every` seconds."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(every)
    return True
