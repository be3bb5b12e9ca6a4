"""`python -m bench.window_start --checkpoint DIR [--device cpu|cuda] [--max-length 48]`: the window
from launch to its first translation, and whether it stays usable meanwhile.

Times, from the moment this module starts (before the window's imports): the window shown; its model
loaded (`loaded`); a sentence typed into the source pane as soon as the window is shown showing its
first words (a partial hypothesis) and coming back translated (`--max-length` caps it: a random
checkpoint writes every token it may). Meanwhile a 10 ms
timer on the GUI thread records the thread's longest stall: the window must answer while the model
loads. The data folder is new each run; the cache folder's weights (the CPU's int8 weights) are kept
in `--weights-cache` (a folder under the system's temporary folder unless told), so that a second
run starts warm, as a person's second launch does. Prints one JSON object.
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()

import argparse  # noqa: E402  (after the clock starts: the window's imports are part of what is timed)
import os  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

from bench import add_out_argument  # noqa: E402

SENTENCE = "The quick brown fox jumps over the lazy dog."


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.window_start", description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, required=True, help="NLLB checkpoint folder")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--max-length", type=int, default=48, help="the typed sentence's max_length")
    parser.add_argument("--weights-cache", type=Path, default=Path(tempfile.gettempdir()) / "dragoman-bench-weights",
                        help="kept between runs: the weights derived from the checkpoint")
    add_out_argument(parser)
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="dragoman-window-start-"))
    args.weights_cache.mkdir(parents=True, exist_ok=True)
    (home / "cache").mkdir()
    (home / "cache" / "weights").symlink_to(args.weights_cache.resolve(), target_is_directory=True)
    warm = any(args.weights_cache.iterdir())
    os.environ["DRAGOMAN_HOME"] = str(home)

    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from bench import emit
    from dragoman.app.settings import AppPaths, Settings
    from dragoman.app.window.gui import show_window

    app = QApplication.instance() or QApplication([])
    paths = AppPaths.default()
    settings = Settings.load(paths.settings_file)
    settings.model_dir, settings.device, settings.max_length = str(args.checkpoint), args.device, args.max_length
    window = show_window(paths, settings, ())
    shown = time.perf_counter()
    window.source.setPlainText(SENTENCE)  # typed at once: translated once the model is loaded
    stalls: list[float] = []
    last = time.perf_counter()

    def tick() -> None:
        nonlocal last
        now = time.perf_counter()
        stalls.append(now - last)
        last = now

    timer = QTimer()
    timer.timeout.connect(tick)
    timer.start(10)
    loaded = first_words = None

    def translated() -> bool:  # the final translation shown: no typed job running any more
        return window.model_ready and window.job_id == 0 and bool(window.target.toPlainText().strip())

    while not translated() and time.perf_counter() - shown < 600:
        app.processEvents()
        if loaded is None and window.model_ready:
            loaded = time.perf_counter()
        if first_words is None and window.target.toPlainText().strip():
            first_words = time.perf_counter()  # a partial hypothesis, streamed while decoding
        time.sleep(0.001)
    done = time.perf_counter()
    timer.stop()
    out = {
        "device": window.model_label.text(),
        "weights_cache_was_warm": warm,
        "max_length": args.max_length,
        "window_shown_s": shown - STARTED,
        "model_loaded_s": (loaded or done) - STARTED,
        "first_words_s": (first_words or done) - STARTED,
        "first_translation_s": done - STARTED,
        "translated": translated(),
        "longest_gui_stall_s": max(stalls, default=0.0),
        "gui_stalls_over_50ms": sum(s > 0.05 for s in stalls),
    }
    device = window.worker.translator.device  # read before the window closes and unloads it
    window.close()
    emit(out, "window_start", device, args.out)


if __name__ == "__main__":
    main()
