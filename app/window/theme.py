"""Light and dark themes: Qt's Fusion style, a palette, resources/dragoman.qss and single-colour icons."""

from __future__ import annotations

from PySide6.QtCore import QByteArray, Qt
from PySide6.QtGui import QColor, QGuiApplication, QIcon, QPainter, QPalette, QPixmap
from PySide6.QtSvg import QSvgRenderer
from PySide6.QtWidgets import QApplication

from dragoman import resources

COLORS = {
    "light": {
        "window": "#f4f5f7", "base": "#ffffff", "text": "#1f2328", "muted": "#6b7280",
        "border": "#d9dee4", "hover": "#eceff3", "selection": "#d7e3fc", "accent": "#2563eb",
        "accent_hover": "#1d4ed8", "accent_text": "#ffffff", "error": "#c62828",
    },
    "dark": {
        "window": "#1b1c1f", "base": "#25272b", "text": "#e6e7e9", "muted": "#9aa1a9",
        "border": "#393c42", "hover": "#2f3237", "selection": "#2d4473", "accent": "#5b8def",
        "accent_hover": "#7aa3f5", "accent_text": "#0c1222", "error": "#f07171",
    },
}


def resolve(theme: str) -> str:
    """'light' or 'dark': 'system' follows the desktop's colour scheme (light when it says nothing)."""
    if theme in COLORS:
        return theme
    return "dark" if QGuiApplication.styleHints().colorScheme() == Qt.ColorScheme.Dark else "light"


def apply(app: QApplication, theme: str) -> dict[str, str]:
    """Style the whole application; returns the colours in use (for icons)."""
    colors = COLORS[resolve(theme)]
    app.setStyle("Fusion")
    app.setPalette(_palette(colors))
    qss = resources.path("dragoman.qss").read_text(encoding="utf-8")
    for name in sorted(colors, key=len, reverse=True):  # "accent_hover" before "accent"
        qss = qss.replace(f"@{name}", colors[name])
    app.setStyleSheet(qss)
    return colors


def _palette(c: dict[str, str]) -> QPalette:
    p = QPalette()
    roles = {
        QPalette.Window: c["window"], QPalette.WindowText: c["text"], QPalette.Base: c["base"],
        QPalette.AlternateBase: c["hover"], QPalette.Text: c["text"], QPalette.Button: c["base"],
        QPalette.ButtonText: c["text"], QPalette.Highlight: c["accent"], QPalette.HighlightedText: c["accent_text"],
        QPalette.ToolTipBase: c["base"], QPalette.ToolTipText: c["text"], QPalette.PlaceholderText: c["muted"],
        QPalette.Link: c["accent"], QPalette.Mid: c["border"], QPalette.Midlight: c["hover"],
        QPalette.Dark: c["border"], QPalette.Light: c["base"], QPalette.Shadow: c["border"],
    }
    for role, color in roles.items():
        p.setColor(role, QColor(color))
    for role in (QPalette.WindowText, QPalette.Text, QPalette.ButtonText):
        p.setColor(QPalette.Disabled, role, QColor(c["muted"]))
    return p


def icon(name: str, color: str, size: int = 20) -> QIcon:
    """resources/icon-<name>.svg drawn in `color`, sharp at 1x and 2x."""
    svg = resources.path(f"icon-{name}.svg").read_text(encoding="utf-8").replace("currentColor", color)
    renderer = QSvgRenderer(QByteArray(svg.encode()))
    result = QIcon()
    for scale in (1, 2):
        pixmap = QPixmap(size * scale, size * scale)
        pixmap.fill(Qt.transparent)
        painter = QPainter(pixmap)
        renderer.render(painter)
        painter.end()
        pixmap.setDevicePixelRatio(scale)
        result.addPixmap(pixmap)
    return result


def app_icon() -> QIcon:
    return QIcon(str(resources.path("dragoman.svg")))
