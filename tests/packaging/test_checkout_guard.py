"""A checkout's top-level folders never shadow installed distributions of the same names, however the
project's code is run from it (`python -m pytest`, `python -m bench`, the app): transformers 5.25
imports PyPI's `kernels`, which must not be the checkout's `kernels/`."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dragoman import SUBPACKAGES

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def installed_namesakes(tmp_path) -> Path:
    """A site folder holding packages named like the checkout's folders, as PyPI's `kernels` is."""
    for name in SUBPACKAGES:
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"INSTALLED = {name!r}\n")
    return tmp_path


def run_from_checkout(code: str, site: Path | None) -> subprocess.CompletedProcess:
    """`python -c CODE` in the checkout's root, which -c (as -m) puts first on sys.path."""
    env = {**os.environ, "PYTHONPATH": str(site) if site else ""}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("name", SUBPACKAGES)
def test_an_installed_namesake_wins_over_the_checkout_folder(installed_namesakes, name):
    done = run_from_checkout(f"import dragoman, {name}; print({name}.INSTALLED)", installed_namesakes)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == name


def test_the_checkout_folders_are_dragoman_subpackages_only():
    done = run_from_checkout("import dragoman, dragoman.kernels as ours\n"
                             "try:\n    import kernels\nexcept ModuleNotFoundError:\n    kernels = None\n"
                             "print(ours.__file__, getattr(kernels, '__file__', None))", None)
    assert done.returncode == 0, done.stderr
    ours, installed = done.stdout.split()
    assert ours == str(ROOT / "kernels" / "__init__.py")
    assert installed != ours  # PyPI's kernels where installed (transformers needs it), or none


@pytest.mark.parametrize("entry", ["tests/conftest.py", "bench/__init__.py"])
def test_entry_points_import_dragoman_before_what_imports_kernels(entry):
    lines = (ROOT / entry).read_text().splitlines()
    first = {name: next((n for n, line in enumerate(lines) if line.startswith((f"import {name}", f"from {name}"))), None)
             for name in ("dragoman", "torch", "transformers", "peft", "bench.")}
    dragoman = first.pop("dragoman")
    assert dragoman is not None and all(n is None or n > dragoman for n in first.values())
