"""The licenses of what the bundle carries, written beside it: `python packaging/third_party.py DIR`.

Run with the build environment's Python. DIR/README.txt lists every distribution installed there
(the bundle's contents: Python packages, Qt inside PySide6, torch and its libraries) with its
version and license; DIR/<name>/ holds the license files it ships, and DIR/Python/ Python's own.
Build tools (PyInstaller and its helpers, pip) are left out: they are not in the bundle.
"""

from __future__ import annotations

import shutil
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

BUILD_TOOLS = {"pip", "setuptools", "wheel", "pyinstaller", "pyinstaller-hooks-contrib", "altgraph", "dragoman"}
LICENSE_NAMES = ("LICENSE", "LICENCE", "COPYING", "NOTICE", "AUTHORS")


def license_of(dist: metadata.Distribution) -> str:
    meta = dist.metadata
    expression = meta.get("License-Expression")
    if expression:
        return expression
    classifiers = [c.split(" :: ")[-1] for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
    text = (meta.get("License") or "").strip()
    if classifiers:
        return ", ".join(classifiers)
    return text.splitlines()[0] if text else "see its license files"


def license_files(dist: metadata.Distribution) -> list[Path]:
    files = []
    for file in dist.files or []:
        where = file.as_posix()
        if ".dist-info/" in where and (file.name.upper().startswith(LICENSE_NAMES) or "/licenses/" in where):
            path = Path(dist.locate_file(file))
            if path.is_file():
                files.append(path)
    return files


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    lines = [
        "Dragoman (MIT) bundles the software below, each under its own license; the license files",
        "each ships are in the folder of its name.",
        "",
        f"Python {sys.version.split()[0]}: PSF-2.0",
    ]
    python_license = Path(sysconfig.get_path("stdlib")) / "LICENSE.txt"
    if python_license.is_file():
        (out / "Python").mkdir(exist_ok=True)
        shutil.copyfile(python_license, out / "Python" / "LICENSE.txt")
    dists = {dist.metadata["Name"].lower(): dist for dist in metadata.distributions()}
    for name in sorted(dists):
        if name in BUILD_TOOLS:
            continue
        dist = dists[name]
        lines.append(f"{dist.metadata['Name']} {dist.version}: {license_of(dist)}")
        for path in license_files(dist):
            target = out / dist.metadata["Name"] / path.name
            target.parent.mkdir(exist_ok=True)
            shutil.copyfile(path, target)
    (out / "README.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
