"""app/window/glossary_dialog.py: importing, listing and turning off glossaries, the user's own, do-not-translate."""

from PySide6.QtCore import Qt

from dragoman.app.session.glossary import read_glossary
from dragoman.app.session.terms import USER_GLOSSARY, saved_terms
from dragoman.app.settings import Settings
from dragoman.app.window.glossary_dialog import GlossaryDialog

TBX = ('<?xml version="1.0" encoding="UTF-8"?><martif type="TBX"><text><body>'
       '<termEntry><langSet xml:lang="en"><tig><term>report</term></tig></langSet>'
       '<langSet xml:lang="fr"><tig><term>rapport</term></tig></langSet></termEntry>'
       '</body></text></martif>')


def make_files(folder):
    folder.mkdir(exist_ok=True)
    csv = folder / "ui.csv"
    csv.write_text("source,target,source_lang,target_lang\nsave,enregistrer,en,fr\nopen,öffnen,en,de\n"
                   "close,fermer,en,fr\n", encoding="utf-8")
    tbx = folder / "terms.tbx"
    tbx.write_text(TBX, encoding="utf-8")
    return csv, tbx


def table(dialog):
    return [(dialog.glossaries.item(r, 0).text(), dialog.glossaries.item(r, 1).text(),
             dialog.glossaries.item(r, 2).text(), dialog.glossaries.item(r, 0).checkState() == Qt.Checked)
            for r in range(dialog.glossaries.rowCount())]


def open_dialog(qtbot, settings, paths):
    dialog = GlossaryDialog(settings, paths)
    qtbot.addWidget(dialog)
    return dialog


def test_imported_glossaries_are_listed_per_pair_and_a_pair_turned_off_stays_off(qtbot, paths, tmp_path):
    csv, tbx = make_files(tmp_path / "mine")
    dialog = open_dialog(qtbot, Settings(), paths)
    assert dialog.import_files([csv, tbx])
    assert (paths.glossaries_dir / "ui.csv").read_bytes() == csv.read_bytes()  # a copy: the original may go
    assert table(dialog) == [("terms.tbx", "English → French", "1", True),
                             ("terms.tbx", "French → English", "1", True),
                             ("ui.csv", "English → French", "2", True),
                             ("ui.csv", "English → German", "1", True)]
    dialog.glossaries.item(2, 0).setCheckState(Qt.Unchecked)
    dialog.accept()
    settings = dialog.result_settings()
    assert settings.glossary_pairs_off == [["ui.csv", "eng_Latn", "fra_Latn"]]
    settings.save(paths.settings_file)

    settings = Settings.load(paths.settings_file)
    terms = saved_terms(paths, settings)
    assert terms.for_pair("eng_Latn", "fra_Latn").of("Save the report and close it.") == ["rapport"]
    assert terms.for_pair("eng_Latn", "deu_Latn").of("Open it.") == ["öffnen"]
    again = open_dialog(qtbot, settings, paths)
    assert [row[3] for row in table(again)] == [True, True, False, True]


def test_a_bad_file_is_refused_in_one_line_naming_it_and_its_line(qtbot, paths, tmp_path):
    csv, _ = make_files(tmp_path / "mine")
    bad = tmp_path / "mine" / "bad.tsv"
    bad.write_text("save\tenregistrer\nopen\t\n", encoding="utf-8")
    dialog = open_dialog(qtbot, Settings(), paths)
    assert not dialog.import_files([bad, csv])
    assert dialog.problem.text() == "bad.tsv: line 2: the target term is empty"
    assert not dialog.problem.isHidden()
    assert not (paths.glossaries_dir / "bad.tsv").exists() and not (paths.glossaries_dir / "ui.csv").exists()
    assert dialog.import_files([csv])
    assert dialog.problem.isHidden()


def test_the_users_glossary_is_written_as_a_file_the_parser_reads_back(qtbot, paths):
    settings = Settings(source_language="eng_Latn", target_language="fra_Latn")
    dialog = open_dialog(qtbot, settings, paths)
    dialog.add_entry("Dragoman app", "l'appli Dragoman")  # for the pair translated now
    dialog.add_entry("quote, \"mark\"", "guillemet", "", "")  # any pair; a comma and quotes in a term
    dialog.accept()
    assert dialog.result() == GlossaryDialog.Accepted
    entries = [(e.source, e.target, e.source_lang, e.target_lang)
               for e in read_glossary(paths.glossaries_dir / USER_GLOSSARY).entries]
    assert entries == [("Dragoman app", "l'appli Dragoman", "eng_Latn", "fra_Latn"),
                       ('quote, "mark"', "guillemet", None, None)]

    again = open_dialog(qtbot, settings, paths)
    assert again.user_entries() == [("Dragoman app", "l'appli Dragoman", "eng_Latn", "fra_Latn"),
                                    ('quote, "mark"', "guillemet", "", "")]
    assert table(again) == []  # the user's own glossary is edited below, not listed with the imported ones
    again.entries.selectRow(0)
    again.delete_selected_entries()
    again.entries.item(0, 1).setText("")  # a term left empty: the parser's line, and nothing written
    again.accept()
    assert again.problem.text() == f"{USER_GLOSSARY}: line 2: the target term is empty"
    assert again.result() != GlossaryDialog.Accepted
    assert len(read_glossary(paths.glossaries_dir / USER_GLOSSARY).entries) == 2
    again.entries.selectRow(0)
    again.delete_selected_entries()
    again.accept()
    assert not (paths.glossaries_dir / USER_GLOSSARY).exists()  # no entries: no file


def test_the_do_not_translate_list_and_the_automatic_spans_persist(qtbot, paths):
    dialog = open_dialog(qtbot, Settings(), paths)
    dialog.keep.setPlainText("Dragoman\n\n  Acme Corp  \n")
    dialog.protect.setChecked(False)
    dialog.accept()
    settings = dialog.result_settings()
    settings.save(paths.settings_file)
    settings = Settings.load(paths.settings_file)
    assert (settings.do_not_translate, settings.protect) == (["Dragoman", "Acme Corp"], False)
    terms = saved_terms(paths, settings).for_pair("eng_Latn", "fra_Latn")
    assert terms.of("Acme Corp ships 5 kg of dragoman.") == ["Acme Corp", "dragoman"]

    too_long = open_dialog(qtbot, settings, paths)
    too_long.keep.setPlainText("x" * 101)
    too_long.accept()
    assert too_long.problem.text() == "Do not translate: do-not-translate term #1 is longer than 100 characters"
    assert too_long.result() != GlossaryDialog.Accepted


def test_removing_a_glossary_deletes_its_copy(qtbot, paths, tmp_path):
    csv, tbx = make_files(tmp_path / "mine")
    dialog = open_dialog(qtbot, Settings(), paths)
    dialog.import_files([csv, tbx])
    dialog.glossaries.selectRow(0)  # terms.tbx
    dialog.remove_selected()
    assert [row[0] for row in table(dialog)] == ["ui.csv"] * 2
    assert not (paths.glossaries_dir / "terms.tbx").exists() and tbx.exists()


def test_the_windows_glossary_reaches_the_engine_with_typed_text(qtbot, open_window, settings, paths, monkeypatch):
    from recorder import WAIT_MS

    window = open_window(settings)
    engine = window.worker.translator
    calls = []
    submit = engine.submit
    monkeypatch.setattr(engine, "submit", lambda request: calls.append((request.texts, request.terms)) or submit(request))
    dialog = GlossaryDialog(window.settings, paths, window)
    dialog.add_entry("cat", "chat")
    dialog.accept()
    window.source.setPlainText("A cat sleeps.")
    done = sum(e[0] == "translated" for e in window.events.events)
    window.apply_glossary(dialog.result_settings())  # translates the text again, with the glossary
    dialog.deleteLater()
    qtbot.waitUntil(lambda: sum(e[0] == "translated" for e in window.events.events) > done, timeout=WAIT_MS)
    assert calls == [(["A cat sleeps."], [["chat"]])]
    assert (paths.glossaries_dir / USER_GLOSSARY).exists()


def test_a_users_glossary_broken_by_hand_is_said_and_kept(qtbot, paths):
    paths.glossaries_dir.mkdir(parents=True)
    broken = paths.glossaries_dir / USER_GLOSSARY
    broken.write_text("source\ttarget\nsave\n", encoding="utf-8")
    dialog = open_dialog(qtbot, Settings(), paths)
    assert dialog.problem.text() == f"{USER_GLOSSARY}: line 2: the target term is empty"
    assert dialog.user_entries() == []
    dialog.accept()
    assert broken.read_text(encoding="utf-8") == "source\ttarget\nsave\n"


def test_a_bad_files_error_is_in_the_error_colour_not_grey(qtbot, paths, tmp_path):
    from PySide6.QtGui import QColor, QPalette
    from PySide6.QtWidgets import QApplication

    from dragoman.app.window import theme

    colours = theme.apply(QApplication.instance(), "light")
    bad = tmp_path / "bad.tsv"
    bad.write_text("save\tenregistrer\nopen\t\n", encoding="utf-8")
    dialog = open_dialog(qtbot, Settings(), paths)
    dialog.show()
    assert not dialog.import_files([bad])
    assert dialog.problem.palette().color(QPalette.WindowText) == QColor(colours["error"])
    assert dialog.problem.font().bold()


def test_an_imported_glossarys_terms_can_be_seen(qtbot, paths, tmp_path):
    csv, _ = make_files(tmp_path / "mine")
    dialog = open_dialog(qtbot, Settings(), paths)
    dialog.show()
    assert dialog.import_files([csv])
    dialog.glossaries.selectRow(0)  # ui.csv, English → French
    dialog.terms_button.click()
    terms = dialog.terms_view.findChild(type(dialog.glossaries), "terms")
    assert dialog.terms_view.isVisible()
    assert [(terms.item(r, 0).text(), terms.item(r, 1).text()) for r in range(terms.rowCount())] == [
        ("save", "enregistrer"), ("close", "fermer")]
    assert not terms.editTriggers() & terms.EditTrigger.DoubleClicked
    dialog.terms_view.close()
