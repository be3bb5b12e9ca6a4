"""Windows and dialogs open no larger than the screen they are on (at 2x scaling a 1920x1080
screen is 960x540 of Qt's pixels): each asks for its usual size and gets what fits."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

SCREEN_SHARE = 0.95  # leave room for the desktop's panels and the window frame


def resize_within_screen(widget: QWidget, width: int, height: int) -> None:
    """Resize `widget` to width x height, or less where its screen is smaller."""
    available = widget.screen().availableGeometry()
    widget.resize(min(width, int(available.width() * SCREEN_SHARE)), min(height, int(available.height() * SCREEN_SHARE)))
