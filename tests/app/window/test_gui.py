"""Documents given to the app rather than dropped on it: `dragoman FILE...` (the desktop entry's
`Exec=dragoman %F`, "Open with") and, on macOS, Finder's QFileOpenEvents. They take the drop's path:
looked through, confirmed once, queued as document jobs; what cannot be translated is said in the
status bar. And the window's start: it shows before torch is imported."""

import os

import pytest
from PySide6.QtGui import QFileOpenEvent
from PySide6.QtWidgets import QApplication

import dragoman.app.window.gui
from dragoman.app import __version__
from dragoman.app.cli import main
from dragoman.app.window.jobs_panel import DONE
from recorder import WAIT_MS

NOTHING_TO_TRANSLATE = "Nothing to translate there: no supported documents"


@pytest.fixture
def documents(tmp_path):
    """A plain text file and a subtitle file."""
    (tmp_path / "notes.txt").write_text("Hello world.\n\nThe cat reads a book.\n", encoding="utf-8")
    (tmp_path / "film.srt").write_text("1\n00:00:01,000 --> 00:00:02,500\nGood morning, my friend.\n\n",
                                       encoding="utf-8")
    return tmp_path / "notes.txt", tmp_path / "film.srt"


def jobs_done(qtbot, window, count):
    """{document name: its job row}, once `count` jobs are listed and all are done."""
    rows = window.documents.rows

    def all_done():  # on a timeout, the rows' states say why
        assert len(rows) == count and all(r.state == DONE for r in rows), [(r.job.source_path.name, r.state,
                                                                             r.status.text()) for r in rows]

    qtbot.waitUntil(all_done, timeout=WAIT_MS)
    return {r.job.source_path.name: r for r in rows}


def status_says(qtbot, window, text):
    qtbot.waitUntil(lambda: text in window.statusBar().currentMessage(), timeout=WAIT_MS)


# -- the command line ---------------------------------------------------------------------------------


def test_files_without_a_subcommand_open_the_window_with_them(monkeypatch):
    opened = []
    monkeypatch.setattr(dragoman.app.window.gui, "run_window", lambda **choices: opened.append(choices) or 0)
    assert main(["notes.txt", "--to", "deu_Latn", "film.srt"]) == 0
    assert opened == [dict(model=None, adapters=None, src=None, tgt="deu_Latn", device=None,
                           files=["notes.txt", "film.srt"])]
    assert main(["--device", "cpu"]) == 0
    assert opened[-1]["files"] == [] and opened[-1]["device"] == "cpu"


def test_subcommands_and_version_are_unchanged(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(dragoman.app.window.gui, "run_window", lambda **choices: pytest.fail("the window opened"))
    with pytest.raises(SystemExit) as exit:
        main(["--version"])
    assert exit.value.code == 0 and capsys.readouterr().out == f"dragoman {__version__}\n"
    assert main(["adapters", "--adapters", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith(f"0 adapter folders in {tmp_path}")
    with pytest.raises(SystemExit) as exit:
        main(["translate", "--from", "eng_Latn"])
    assert exit.value.code == 2
    assert "dragoman translate: error: the following arguments are required: --to" in capsys.readouterr().err


# -- the window ---------------------------------------------------------------------------------------


def test_each_file_given_becomes_a_document_job_as_if_dropped(qtbot, open_window, settings, documents, monkeypatch):
    notes, film = documents
    monkeypatch.chdir(notes.parent)  # `dragoman notes.txt` from the documents' folder
    window = open_window(settings, True, files=["notes.txt", str(film)])
    rows = jobs_done(qtbot, window, 2)
    assert window.documents.ask.questions[0].startswith("2 documents to translate")
    assert rows["notes.txt"].job.source_path == notes
    assert (notes.parent / "notes.fra_Latn.txt").is_file() and (film.parent / "film.fra_Latn.srt").is_file()
    assert window.documents.isVisible()


def test_a_missing_or_unsupported_file_is_said_in_the_status_bar(qtbot, open_window, settings, tmp_path):
    (tmp_path / "notes.xyz").write_text("not a format Dragoman reads", encoding="utf-8")
    files = [str(tmp_path / "missing.txt"), str(tmp_path / "notes.xyz")]
    window = open_window(settings, files=files, wait_for_model=False)
    # Found before the model is loaded, most likely: the model's "Ready" must not hide it.
    qtbot.waitUntil(lambda: window.model_ready, timeout=WAIT_MS)
    status_says(qtbot, window, NOTHING_TO_TRANSLATE)
    assert window.documents.rows == [] and window.documents.ask.questions == []


def test_files_opened_from_finder_become_document_jobs(qtbot, open_window, settings, documents, tmp_path):
    window = open_window(settings, True)
    application = QApplication.instance()
    for path in documents:  # Finder sends one event per file
        assert QApplication.sendEvent(application, QFileOpenEvent(str(path)))
    jobs_done(qtbot, window, 2)
    assert len(window.documents.ask.questions) == 1, "one open, one question, as for a drop"
    assert QApplication.sendEvent(application, QFileOpenEvent(str(tmp_path / "missing.txt")))
    status_says(qtbot, window, NOTHING_TO_TRANSLATE)
    assert len(window.documents.rows) == 2


def test_the_window_shows_before_torch_is_imported(tmp_path):
    """torch takes over a second to import: the window comes up first, and its worker imports torch
    with the model (here no model is set, so nothing imports it at all)."""
    import subprocess
    import sys

    probe = ("import sys\n"
             "import dragoman\n"
             "from PySide6.QtWidgets import QApplication\n"
             "app = QApplication([])\n"
             "from dragoman.app.settings import AppPaths, Settings\n"
             "from dragoman.app.window.gui import show_window\n"
             "paths = AppPaths.default()\n"
             "window = show_window(paths, Settings.load(paths.settings_file), ())\n"
             "app.processEvents()\n"
             "print(window.isVisible(), 'torch' in sys.modules, flush=True)\n"
             "import os; os._exit(0)\n")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                         env={**os.environ, "DRAGOMAN_HOME": str(tmp_path / "home"), "QT_QPA_PLATFORM": "offscreen"})
    assert run.stdout.split() == ["True", "False"], run.stdout + run.stderr
