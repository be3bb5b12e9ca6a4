import sys

from PySide6.QtCore import QObject, Signal


class Emitter(QObject):
    ping = Signal(int)


def test_thousands_of_signals_do_not_exhaust_true():
    """PySide6 6.12.0 drops a reference to True per emit and Python 3.11 aborts: pyproject keeps it out."""
    emitter = Emitter()
    for i in range(5000):
        emitter.ping.emit(i)
    assert sys.getrefcount(True) > 1000
