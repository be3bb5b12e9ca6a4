"""An adapters folder's layout: one PEFT LoRA adapter per subfolder, named by the subfolder, holding
`adapter_config.json` and `adapter_model.safetensors`; hidden subfolders are not adapters.

No torch here: the window lists and watches the folder while it starts. engine/peft_adapter.py reads
and checks what the subfolders hold.
"""

from __future__ import annotations

from pathlib import Path

CONFIG_FILE = "adapter_config.json"
WEIGHTS_FILE = "adapter_model.safetensors"
ADAPTER_FILES = (CONFIG_FILE, WEIGHTS_FILE)


def adapter_folders(folder: str | Path) -> list[Path]:
    """The subfolders of `folder` that may hold an adapter (hidden ones aside), in name order; none if
    `folder` is not a folder."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted((p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")),
                  key=lambda p: p.name.casefold())


def adapter_names(folder: str | Path) -> list[str]:
    """The adapters one can pick, in name order, found without reading them: the subfolders that hold
    an adapter_config.json. (`scan_adapters` inspects every subfolder and says what is wrong with each.)"""
    return [sub.name for sub in adapter_folders(folder) if (sub / CONFIG_FILE).is_file()]
