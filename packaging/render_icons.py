"""The app icon as PNGs for the desktop's icon theme, drawn from resources/dragoman.svg by Qt's SVG
renderer (offscreen: no display needed), so no binary icon is kept in the repository.

`python packaging/render_icons.py DIR` writes DIR/<N>x<N>/apps/dragoman.png for each size below
and DIR/scalable/apps/dragoman.svg: DIR is a hicolor icon theme folder, e.g.
usr/share/icons/hicolor of the .deb. On Windows and macOS the spec renders the 512-pixel PNG with
`render` and PyInstaller turns it into the .ico or .icns (with Pillow).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtGui import QGuiApplication, QImage, QPainter  # noqa: E402
from PySide6.QtSvg import QSvgRenderer  # noqa: E402

SVG = Path(__file__).resolve().parent.parent / "resources" / "dragoman.svg"
SIZES = (16, 22, 24, 32, 48, 64, 128, 256, 512)  # the hicolor theme's usual fixed sizes
_app = None


def render(size: int) -> QImage:
    """The app icon, size x size pixels."""
    global _app
    _app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])  # Qt's painting needs one, kept alive
    renderer = QSvgRenderer(str(SVG))
    if not renderer.isValid():
        raise SystemExit(f"render_icons.py: {SVG} is not a valid SVG")
    image = QImage(size, size, QImage.Format_ARGB32_Premultiplied)
    image.fill(Qt.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.Antialiasing)
    renderer.render(painter)
    painter.end()
    return image


def save(image: QImage, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    if not image.save(str(out), "PNG"):
        raise SystemExit(f"render_icons.py: could not write {out}")


def main(theme_dir: str) -> None:
    theme = Path(theme_dir)
    for size in SIZES:
        save(render(size), theme / f"{size}x{size}" / "apps" / "dragoman.png")
    scalable = theme / "scalable" / "apps"
    scalable.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SVG, scalable / "dragoman.svg")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python packaging/render_icons.py ICON_THEME_DIR")
    main(sys.argv[1])
