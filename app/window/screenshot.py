"""Screenshot the window translating a text: `python -m dragoman.app.window.screenshot OUT.png --model DIR [--theme dark]`.

Run it under a real X server (e.g. `xvfb-run -s "-screen 0 1280x800x24" python -m dragoman.app.window.screenshot ...`)
so Qt draws with the platform's fonts. On Debian that takes `xvfb`, Qt's xcb libraries
(`libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-shape0 libxkbcommon-x11-0`) and, for the
scripts a random test model writes, `fonts-noto-core fonts-noto-cjk`. It uses a throw-away settings folder: the user's settings
are neither read nor changed. The picture is saved with a palette of 128 colours (the window's flat
colours and its text's anti-aliasing fit; a third of the size of full colour), for the README.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

PALETTE_COLOURS = 128
SAMPLE_TEXT = (
    "Dragoman translates between two hundred languages on your own computer.\n"
    "Nothing you type leaves the machine.\n\n"
    "Results stream in while the sentence is still being decoded."
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dragoman.app.window.screenshot", description=__doc__.splitlines()[0])
    parser.add_argument("output", help="PNG file to write")
    parser.add_argument("--model", required=True, help="NLLB checkpoint folder")
    parser.add_argument("--theme", choices=("light", "dark"), default="light")
    parser.add_argument("--text", default=SAMPLE_TEXT)
    parser.add_argument("--from", dest="src", default="eng_Latn")
    parser.add_argument("--to", dest="tgt", default="fra_Latn")
    parser.add_argument("--size", default="1040x600", help="window size, WIDTHxHEIGHT")
    parser.add_argument("--timeout", type=float, default=120, help="seconds to wait for the translation")
    args = parser.parse_args(argv)
    width, height = (int(n) for n in args.size.split("x"))

    os.environ["DRAGOMAN_HOME"] = tempfile.mkdtemp(prefix="dragoman-screenshot-")
    os.environ.pop("DBUS_SESSION_BUS_ADDRESS", None)  # this throw-away window asks the desktop for no global shortcut
    from PySide6.QtCore import QTimer
    from PySide6.QtGui import QGuiApplication
    from PySide6.QtWidgets import QApplication

    from dragoman.app.settings import AppPaths, Settings
    from dragoman.app.window.main_window import MainWindow
    from dragoman.app.window.qt_compat import MainThreadGarbageCollector

    app = QApplication(sys.argv[:1])
    app.setApplicationName("Dragoman")
    MainThreadGarbageCollector(app)  # a child of app: collects while the app runs
    paths = AppPaths.default()
    settings = Settings(model_dir=os.path.abspath(args.model), device="cpu", theme=args.theme,
                        source_language=args.src, target_language=args.tgt, max_length=48,
                        recent_languages=[args.tgt, args.src, "deu_Latn", "spa_Latn"])
    window = MainWindow(paths, settings)
    window.resize(width, height)
    window.show()
    outcome = {"code": 1}

    def grab() -> None:
        window.source.setFocus()
        window.source.moveCursor(window.source.textCursor().MoveOperation.End)
        app.processEvents()
        screen = QGuiApplication.primaryScreen()
        picture = screen.grabWindow(window.winId())
        if picture.isNull() or picture.width() < width // 2:  # platforms that cannot read the screen
            picture = window.grab()
        if picture.save(args.output):
            _as_palette(args.output)
            outcome["code"] = 0
        window.close()

    def on_translated(job_id: int, texts: list) -> None:
        QTimer.singleShot(300, grab)  # let the last repaint land

    def on_failed(*details) -> None:
        print("dragoman screenshot:", *details[-1:], file=sys.stderr)
        window.close()

    window.worker.translated.connect(on_translated)
    window.worker.load_failed.connect(on_failed)
    window.worker.failed.connect(on_failed)
    window.source.setPlainText(args.text)
    window.translate_now()
    QTimer.singleShot(int(args.timeout * 1000), lambda: on_failed("timed out waiting for the translation"))
    app.exec()
    if outcome["code"] == 0:
        print(f"wrote {args.output}")
    return outcome["code"]


def _as_palette(path: str) -> None:
    """Save the PNG at `path` again with PALETTE_COLOURS colours, undithered (text stays crisp)."""
    from PIL import Image

    with Image.open(path) as picture:
        small = picture.convert("RGB").quantize(PALETTE_COLOURS, method=Image.Quantize.MEDIANCUT,
                                                dither=Image.Dither.NONE)
    small.save(path, optimize=True)


if __name__ == "__main__":
    sys.exit(main())
