"""Documents beyond the list itself: the folder translations are saved in (the panel and Settings),
"Show in folder" for a done job, and the desktop notification when a job that ran long ends. The real
window, worker and tiny model."""

from PySide6.QtCore import QUrl

import dragoman.app.window.jobs_panel
import dragoman.app.window.desktop
from dragoman.app.settings import Settings
from dragoman.app.window.jobs_panel import DONE
from test_jobs_panel import drop, rows_settled


def test_translations_go_to_the_folder_chosen_and_show_in_folder_opens_it(qtbot, open_window, settings, tmp_path,
                                                                          paths):
    (tmp_path / "in").mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "in" / "a.txt").write_text("Hello world.\n", encoding="utf-8")
    window = open_window(settings, True, True)
    window.documents.choose_folder = lambda: str(tmp_path / "out")
    window.documents.folder_choice.menu().actions()[1].trigger()  # "In a folder…"
    assert Settings.load(paths.settings_file).documents_folder == str(tmp_path / "out")
    assert window.documents.folder_choice.text() == "Save in: out"
    drop(window, tmp_path / "in" / "a.txt")
    row = rows_settled(qtbot, window, 1)["a.txt"]
    assert f"saved in {tmp_path / 'out'}, e.g. a.fra_Latn.txt" in window.documents.ask.questions[0]
    assert row.state == DONE and (tmp_path / "out" / "a.fra_Latn.txt").is_file()
    assert not (tmp_path / "in" / "a.fra_Latn.txt").exists()
    assert row.folder_button.isVisible()
    row.folder_button.click()
    assert window.opened == [QUrl.fromLocalFile(str(tmp_path / "out"))]

    window.documents.open_url = lambda url: False  # a desktop where nothing opens folders
    row.folder_button.click()
    assert window.statusBar().currentMessage() == (f"Nothing on this desktop opens folders: the translation is "
                                                   f"{tmp_path / 'out' / 'a.fra_Latn.txt'}")

    window.documents.folder_choice.menu().actions()[0].trigger()  # "Beside each document"
    assert Settings.load(paths.settings_file).documents_folder == ""
    window.documents.clear_finished()
    drop(window, tmp_path / "in" / "a.txt")
    rows_settled(qtbot, window, 1)
    assert (tmp_path / "in" / "a.fra_Latn.txt").is_file()


def test_a_job_that_ran_long_ends_with_a_notification_from_the_tray(qtbot, open_window, settings, tmp_path,
                                                                     monkeypatch):
    monkeypatch.setattr(dragoman.app.window.desktop, "tray_available", lambda: True)
    (tmp_path / "a.txt").write_text("Hello world.\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("The cat sleeps.\n", encoding="utf-8")
    window = open_window(settings, True, True)
    notes = []
    window.desktop.tray.showMessage = lambda title, text, icon: notes.append((title, text))
    drop(window, tmp_path / "a.txt")
    rows_settled(qtbot, window, 1)
    assert notes == []  # a short job: the person is still here
    monkeypatch.setattr(dragoman.app.window.jobs_panel, "LONG_JOB_SECONDS", -1.0)
    drop(window, tmp_path / "b.txt")
    rows_settled(qtbot, window, 2)
    assert notes == [("b.txt translated", "Saved as b.fra_Latn.txt")]
    window.quit_app()
