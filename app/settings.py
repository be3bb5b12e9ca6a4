"""Where Dragoman keeps its files, and the user's settings saved between runs.

Folders come from platformdirs. `DRAGOMAN_HOME` puts everything under one folder instead
(config/, data/, cache/): tests point it at a temporary folder, and a portable install can too.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import platformdirs

APP_NAME = "dragoman"
SETTINGS_FILE = "settings.json"
MAX_RECENT_LANGUAGES = 8
DEVICES = ("auto", "cpu")  # plus "cuda:N" for each GPU found
PRECISIONS = ("auto", "float32", "bfloat16", "float16", "int8")
THEMES = ("system", "light", "dark")
AUTO_DETECT = "auto"  # the source language "detect it"
# "GPU memory for translation": the engine's default (engine.generator.DEFAULT_GPU_MEMORY), enough
# for an 8 GB card beside the display.
DEFAULT_GPU_MEMORY_MB = 2048
MIN_GPU_MEMORY_MB = 256
DEFAULT_TEXT_SIZE, MIN_TEXT_SIZE, MAX_TEXT_SIZE = 13, 8, 40
DEFAULT_SERVER_PORT = 5000  # LibreTranslate's, as `dragoman serve`'s


@dataclass(frozen=True)
class AppPaths:
    config_dir: Path
    data_dir: Path
    cache_dir: Path

    @classmethod
    def under(cls, root: Path) -> AppPaths:
        """The folders of one home, as DRAGOMAN_HOME names it: root/config, root/data, root/cache."""
        return cls(root / "config", root / "data", root / "cache")

    @classmethod
    def default(cls) -> AppPaths:
        home = os.environ.get("DRAGOMAN_HOME")
        if home:
            return cls.under(Path(home))
        return cls(
            Path(platformdirs.user_config_dir(APP_NAME, appauthor=False)),
            Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)),
            Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False)),
        )

    @property
    def settings_file(self) -> Path:
        return self.config_dir / SETTINGS_FILE

    @property
    def models_dir(self) -> Path:
        """Installed models, one folder each."""
        return self.data_dir / "models"

    @property
    def weights_cache(self) -> Path:
        """Weights derived from models (the CPU's int8 ones), kept so that a later start skips the work."""
        return self.cache_dir / "weights"

    @property
    def default_adapters_dir(self) -> Path:
        return self.data_dir / "adapters"

    @property
    def history_file(self) -> Path:
        """The typed translations kept (app.history)."""
        return self.data_dir / "history.sqlite3"

    @property
    def glossaries_dir(self) -> Path:
        """The glossaries in use: copies of those imported, and the user's own (app.window.glossary_dialog)."""
        return self.data_dir / "glossaries"


class SettingsError(Exception):
    """A settings file that cannot be used, and why (one line)."""


@dataclass
class Settings:
    model_dir: str = ""  # the model in use: a folder under models_dir, or any checkpoint folder
    adapters_dir: str = ""  # "" = the data dir's adapters/ folder
    adapter: str = ""  # "" = the base model
    adapter_slots: int = 4  # LoRA adapters kept resident on the device at once
    device: str = "auto"
    precision: str = "auto"
    gpu_memory_mb: int = DEFAULT_GPU_MEMORY_MB  # GPU memory for translation beyond the model's weights
    num_beams: int = 4
    length_penalty: float = 1.0
    max_length: int = 200
    theme: str = "system"
    source_language: str = "eng_Latn"  # or AUTO_DETECT
    target_language: str = "fra_Latn"
    recent_languages: list[str] = field(default_factory=list)
    # Glossary pairs turned off in the Glossary dialog: [file name, source, target] ("" = any language).
    glossary_pairs_off: list[list[str]] = field(default_factory=list)
    do_not_translate: list[str] = field(default_factory=list)  # terms kept as written
    protect: bool = True  # also keep URLs, e-mail addresses, placeholders and numbers with units as written
    translate_as_you_type: bool = True  # else only on Ctrl+Return
    text_size: int = DEFAULT_TEXT_SIZE  # points, of the two text panes
    keep_history: bool = True  # typed translations are kept in a searchable history (app.history)
    tray_icon: bool = True  # where the desktop has a tray: closing the window keeps Dragoman there
    copy_twice: bool = False  # the same text copied twice within half a second opens the popup (app.desktop_shortcut)
    documents_folder: str = ""  # where document translations are saved ("" = beside each document)
    serve_apis: bool = False  # the window serves the LibreTranslate and DeepL APIs on 127.0.0.1 (app.window.local_server)
    server_port: int = DEFAULT_SERVER_PORT
    window_geometry: str = ""  # the window's size and place at the last quit (Qt's saveGeometry, base64)
    last_text: str = ""  # the source text at the last quit (kept only with keep_history)

    def remember_language(self, code: str) -> None:
        """Move `code` to the front of the recently used languages."""
        if code == AUTO_DETECT:
            return
        recent = [code] + [c for c in self.recent_languages if c != code]
        self.recent_languages = recent[:MAX_RECENT_LANGUAGES]

    def adapters_path(self, paths: AppPaths) -> Path:
        return Path(self.adapters_dir) if self.adapters_dir else paths.default_adapters_dir

    @classmethod
    def load(cls, path: Path) -> Settings:
        """The saved settings; defaults for a missing file and for unknown or mistyped keys. A file
        that cannot be used (not JSON, not a regular file: a FIFO, a link to a device; over 4 MiB;
        nested too deeply) gives the defaults and one line on stderr saying so."""
        from dragoman.engine import read_json_object

        if not path.exists():
            return cls()
        try:
            raw = read_json_object(path, SettingsError, "")
        except SettingsError as e:
            logging.getLogger(__name__).warning("%s; the default settings are used", e)
            return cls()
        settings = cls()
        for f in fields(cls):
            value = raw.get(f.name)
            default = getattr(settings, f.name)
            if value is None:
                continue
            if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            if type(value) is type(default):
                setattr(settings, f.name, value)
        settings.recent_languages = [c for c in settings.recent_languages if isinstance(c, str)]
        settings.glossary_pairs_off = [p for p in settings.glossary_pairs_off
                                       if isinstance(p, list) and len(p) == 3 and all(isinstance(x, str) for x in p)]
        settings.do_not_translate = [t for t in settings.do_not_translate if isinstance(t, str) and t.strip()]
        if settings.theme not in THEMES:
            settings.theme = "system"
        if settings.precision not in PRECISIONS:
            settings.precision = "auto"
        if not MIN_TEXT_SIZE <= settings.text_size <= MAX_TEXT_SIZE:
            settings.text_size = DEFAULT_TEXT_SIZE
        if settings.adapter_slots < 1:
            settings.adapter_slots = cls.adapter_slots
        if settings.gpu_memory_mb < MIN_GPU_MEMORY_MB:
            settings.gpu_memory_mb = cls.gpu_memory_mb
        return settings

    def save(self, path: Path) -> None:
        """Write atomically: a crash mid-write leaves the previous file."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, path)
