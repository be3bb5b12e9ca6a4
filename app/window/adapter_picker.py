"""The adapter picker: the LoRA adapters found in the adapters folder, kept in step with it."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QFileSystemWatcher, Signal
from PySide6.QtWidgets import QComboBox

from dragoman.engine import ADAPTER_FILES, adapter_folders, adapter_names

NO_ADAPTER = "None (base model)"


class AdapterPicker(QComboBox):
    """"None" and the adapters found in the adapters folder, which it watches: adapters added or
    removed appear or disappear, and `changed_on_disk` names an adapter whose files changed (the
    engine reloads it for the next translation)."""

    changed_on_disk = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.folder = Path()
        self.setSizeAdjustPolicy(QComboBox.AdjustToContents)
        self.watcher = QFileSystemWatcher(self)
        self.watcher.directoryChanged.connect(self._on_disk_change)
        self.watcher.fileChanged.connect(self._on_disk_change)

    def rescan(self, folder: Path | None = None, select: str | None = None) -> None:
        self.folder = folder or self.folder
        select = self.currentData() if select is None else select
        self.blockSignals(True)
        self.clear()
        self.addItem(NO_ADAPTER, "")
        for name in adapter_names(self.folder):
            self.addItem(name, name)
        self.setCurrentIndex(max(0, self.findData(select)))
        self.blockSignals(False)
        self.setToolTip(f"LoRA adapters from {self.folder}")
        self._watch()

    def _watch(self) -> None:
        """Watch the folder, its subfolders (one may become an adapter) and the adapters' two files
        (rewritten in place, or replaced)."""
        watched = self.watcher.directories() + self.watcher.files()
        if watched:
            self.watcher.removePaths(watched)
        paths = [self.folder] if self.folder.is_dir() else []
        for sub in adapter_folders(self.folder):
            paths += [sub] + [sub / name for name in ADAPTER_FILES]
        existing = [str(p) for p in paths if p.exists()]
        if existing:
            self.watcher.addPaths(existing)

    def _on_disk_change(self, path: str) -> None:
        self.rescan()
        changed = Path(path)
        if self.folder in changed.parents:
            self.changed_on_disk.emit(changed.relative_to(self.folder).parts[0])

    def showPopup(self) -> None:
        self.rescan()
        super().showPopup()
