"""An adapters folder's layout: which subfolders the window offers, and which `scan_adapters` inspects."""

from dragoman.engine.adapters import adapter_folders, adapter_names
from dragoman.engine.peft_adapter import scan_adapters


def test_adapters_are_the_subfolders_holding_a_config(tmp_path):
    for name in ("legal", "Medical", "notes", ".staging", "zulu"):
        (tmp_path / name).mkdir()
    for name in ("legal", "Medical", ".staging", "zulu"):
        (tmp_path / name / "adapter_config.json").write_text("{}")
    (tmp_path / "README.txt").write_text("not a folder")
    (tmp_path / "notes" / "adapter_model.safetensors").write_bytes(b"")

    assert [p.name for p in adapter_folders(tmp_path)] == ["legal", "Medical", "notes", "zulu"]
    assert adapter_names(tmp_path) == ["legal", "Medical", "zulu"]  # in name order, whatever the case
    assert [info.name for info in scan_adapters(tmp_path)] == ["legal", "Medical", "notes", "zulu"]
    [notes] = [info for info in scan_adapters(tmp_path) if info.name == "notes"]
    assert "adapter_config.json" in notes.error


def test_no_folder_has_no_adapters(tmp_path):
    (tmp_path / "a-file").write_text("")
    for folder in (tmp_path / "missing", tmp_path / "a-file"):
        assert adapter_folders(folder) == [] and adapter_names(folder) == [] and scan_adapters(folder) == []
