import json

import pytest

from dragoman.app.settings import AUTO_DETECT, MAX_RECENT_LANGUAGES, AppPaths, Settings
from dragoman.app.window.gui import startup_settings
from dragoman.engine.languages import UnknownLanguageError


def test_dragoman_home_holds_every_folder(paths, tmp_path):
    home = tmp_path / "home"
    assert paths == AppPaths(home / "config", home / "data", home / "cache")
    assert paths.settings_file == home / "config" / "settings.json"
    assert paths.models_dir == home / "data" / "models"


def test_settings_round_trip(paths):
    settings = Settings(model_dir="/m", device="cpu", precision="bfloat16", num_beams=2, length_penalty=1.5,
                        max_length=64, theme="dark", source_language=AUTO_DETECT, target_language="deu_Latn",
                        recent_languages=["deu_Latn", "fra_Latn"], adapter="legal", adapter_slots=2, gpu_memory_mb=4096)
    settings.save(paths.settings_file)
    assert Settings.load(paths.settings_file) == settings
    assert not paths.settings_file.with_name("settings.json.tmp").exists()


@pytest.mark.parametrize("content", ["", "{not json", "[1, 2]", "\xff\xfe"])
def test_unreadable_settings_give_defaults(paths, content):
    paths.settings_file.parent.mkdir(parents=True)
    paths.settings_file.write_text(content, encoding="latin-1")
    assert Settings.load(paths.settings_file) == Settings()


def test_mistyped_or_unknown_values_are_ignored(paths):
    paths.settings_file.parent.mkdir(parents=True)
    paths.settings_file.write_text(json.dumps({
        "num_beams": "four", "length_penalty": 2, "theme": "purple", "precision": "int3",
        "recent_languages": ["fra_Latn", 7], "surprise": True, "max_length": 128, "adapter_slots": 0,
        "gpu_memory_mb": 12,
    }))
    settings = Settings.load(paths.settings_file)
    assert settings.num_beams == Settings().num_beams
    assert settings.length_penalty == 2.0
    assert settings.theme == "system" and settings.precision == "auto"
    assert settings.recent_languages == ["fra_Latn"]
    assert settings.max_length == 128
    assert settings.adapter_slots == Settings().adapter_slots
    assert settings.gpu_memory_mb == Settings().gpu_memory_mb


def test_recent_languages_most_recent_first_and_capped():
    settings = Settings()
    for code in ["fra_Latn", "deu_Latn", "fra_Latn", AUTO_DETECT]:
        settings.remember_language(code)
    assert settings.recent_languages == ["fra_Latn", "deu_Latn"]
    codes = ["spa_Latn", "ita_Latn", "por_Latn", "nld_Latn", "pol_Latn", "ces_Latn", "slk_Latn", "swe_Latn", "fin_Latn"]
    for code in codes:
        settings.remember_language(code)
    assert settings.recent_languages == codes[::-1][:MAX_RECENT_LANGUAGES]


def test_command_line_choices_override_saved_ones(paths, tmp_path):
    Settings(source_language="eng_Latn", target_language="fra_Latn", device="auto").save(paths.settings_file)
    settings = startup_settings(paths, model=str(tmp_path / "m"), adapters=str(tmp_path / "a"),
                                src="deu_Latn", tgt="zho_Hant", device="cpu")
    assert (settings.source_language, settings.target_language, settings.device) == ("deu_Latn", "zho_Hant", "cpu")
    assert settings.model_dir == str(tmp_path / "m") and settings.adapters_dir == str(tmp_path / "a")
    assert settings.recent_languages[:2] == ["deu_Latn", "zho_Hant"]
    assert startup_settings(paths, src="auto").source_language == AUTO_DETECT


def test_command_line_unknown_language_is_refused_with_suggestions(paths):
    with pytest.raises(UnknownLanguageError, match="fra_Latn"):
        startup_settings(paths, tgt="fr")


def test_the_gpu_memory_default_is_the_engine_s():
    from dragoman.engine.generator import DEFAULT_GPU_MEMORY

    assert Settings().gpu_memory_mb << 20 == DEFAULT_GPU_MEMORY


def test_glossary_settings_round_trip_and_bad_entries_are_dropped(paths):
    settings = Settings(glossary_pairs_off=[["ui.csv", "eng_Latn", ""]], do_not_translate=["Dragoman"], protect=False)
    settings.save(paths.settings_file)
    assert Settings.load(paths.settings_file) == settings
    assert paths.glossaries_dir == paths.data_dir / "glossaries"
    paths.settings_file.write_text(json.dumps({
        "glossary_pairs_off": [["ui.csv", "eng_Latn", "fra_Latn"], ["short"], "ui.csv", ["a", "b", 3]],
        "do_not_translate": ["Acme", "", 7, "  "], "protect": "no",
    }))
    loaded = Settings.load(paths.settings_file)
    assert (loaded.glossary_pairs_off, loaded.do_not_translate, loaded.protect) == (
        [["ui.csv", "eng_Latn", "fra_Latn"]], ["Acme"], True)


def make_hostile(path, kind: str) -> None:
    """`path` made a FIFO (no writer ever comes), a link to /dev/zero (endless) or JSON nested 100,000 deep."""
    import os

    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    else:
        path.write_text("[" * 100_000 + "]" * 100_000)


HOSTILE = ["fifo", "dev-zero", "nested"]


@pytest.mark.parametrize("kind", HOSTILE)
def test_a_settings_file_that_is_a_fifo_a_device_or_nested_deep_gives_defaults_and_one_line(paths, kind, caplog):
    make_hostile(paths.settings_file, kind)
    assert Settings.load(paths.settings_file) == Settings()
    [line] = [r.getMessage() for r in caplog.records]
    assert line.startswith(f"{paths.settings_file}: not readable JSON (") and "\n" not in line
    assert line.endswith("; the default settings are used")


@pytest.mark.parametrize("kind", HOSTILE)
def test_the_apps_other_json_files_refuse_a_fifo_a_device_or_deep_nesting(tmp_path, kind):
    from dragoman.app.server.stores import GlossaryStore
    from dragoman.app.window.jobs_panel import load_pending
    from dragoman.engine import CheckpointError, load_config, read_json_object

    make_hostile(tmp_path / "model" / "config.json", kind)
    with pytest.raises(CheckpointError, match=r"config\.json: not readable JSON \((not a regular file|nested too deeply)\)$"):
        load_config(tmp_path / "model")
    make_hostile(tmp_path / "glossaries" / f"{'a' * 32}.json", kind)
    (tmp_path / "glossaries" / f"{'a' * 32}.tsv").write_text("cat\tchat\n")
    assert GlossaryStore(tmp_path / "glossaries").list() == []  # the server's glossaries skip it
    make_hostile(tmp_path / "document_jobs.json", kind)
    assert load_pending(tmp_path / "document_jobs.json") == []  # the window's unfinished jobs: none restored
    make_hostile(tmp_path / "corpus" / "_dragoman.json", kind)
    with pytest.raises(ValueError):
        read_json_object(tmp_path / "corpus" / "_dragoman.json", ValueError, "")
