"""The distribution claims one import name, `dragoman`: the wheel built from this tree holds the
package `dragoman` (app, engine, kernels, resources inside it) and nothing else at its top, its
console script runs from the installed copy alone, and no module anywhere still imports the
repository's top-level folders by their own names."""

import ast
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from dragoman.app import __version__

ROOT = Path(__file__).resolve().parents[2]
SUBPACKAGES = ("app", "engine", "kernels", "resources")  # top-level folders here, dragoman.* installed
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel `pip wheel` builds from a copy of the tree (setuptools writes build/ and *.egg-info
    into the folder it builds, and a stale build/ would leak into the wheel)."""
    work = tmp_path_factory.mktemp("wheel")
    tree = work / "tree"
    tree.mkdir()
    for path in ROOT.iterdir():
        if path.is_file():
            shutil.copy2(path, tree)
    for name in ("dragoman", *SUBPACKAGES):
        shutil.copytree(ROOT / name, tree / name, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([*PIP, "wheel", "--no-deps", "--no-build-isolation", "--no-index", str(tree), "-w", str(work)],
                   check=True, capture_output=True)
    (path,) = work.glob("*.whl")
    return path


def wheel_names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def wheel_text(wheel: Path, suffix: str) -> str:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(suffix)]
        return archive.read(name).decode()


def test_the_wheel_holds_only_the_dragoman_package(wheel):
    assert {name.split("/")[0] for name in wheel_names(wheel)} == {"dragoman", f"dragoman-{__version__}.dist-info"}
    assert wheel_text(wheel, ".dist-info/top_level.txt").split() == ["dragoman"]


def test_the_console_script_points_into_the_package(wheel):
    scripts = wheel_text(wheel, ".dist-info/entry_points.txt").split("[console_scripts]")[1].strip().splitlines()
    assert [line.replace(" ", "") for line in scripts if line.strip()] == ["dragoman=dragoman.app.cli:command"]


def test_every_package_folder_and_data_file_of_the_tree_is_in_the_wheel(wheel):
    names = set(wheel_names(wheel))
    for folder in SUBPACKAGES:
        for init in (ROOT / folder).rglob("__init__.py"):
            package = f"dragoman/{init.relative_to(ROOT).as_posix()}"
            assert package in names, f"{init.parent}: a package pyproject.toml does not list"
    data = [p for p in (ROOT / "resources").iterdir() if p.is_file() and p.suffix != ".py"]
    assert data and {f"dragoman/resources/{p.name}" for p in data} <= names


def test_the_installed_wheel_runs_on_its_own(wheel, tmp_path):
    """Installed into a folder of its own and run from elsewhere, so that nothing of the checkout can be
    imported: the version from the command line, a language from resources/languages.json through
    the engine's front door, and no module under a top-level name of the repository."""
    target = tmp_path / "site"
    subprocess.run([*PIP, "install", "--no-deps", "--no-index", "--target", str(target), str(wheel)], check=True,
                   capture_output=True)
    code = (
        "import sys\n"
        "from dragoman.app.cli import main\n"
        "from dragoman.engine import get_language\n"
        "import dragoman\n"
        "print(dragoman.__file__)\n"
        "print(get_language('fra_Latn').name)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in %r))\n"
        "main(['--version'])\n" % (SUBPACKAGES,)
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(target)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [str(target / "dragoman" / "__init__.py"), "French", "[]",
                                        f"dragoman {__version__}"]


def old_name_imports(source: Path) -> list[tuple[int, str]]:
    """(line, module) of each `import engine...` and `from app... import` of `source`."""
    found = []
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"), str(source))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.split(".")[0] in SUBPACKAGES]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module.split(".")[0] in SUBPACKAGES:
            found.append((node.lineno, node.module))
    return sorted(found)


def test_the_walk_finds_imports_by_the_old_names(tmp_path):
    source = tmp_path / "old.py"
    source.write_text("import torch, kernels\nfrom dragoman import engine\nimport dragoman.app.cli\n"
                      "def f():\n    from app.documents import FORMATS\n    import resources as r\n")
    assert old_name_imports(source) == [(1, "kernels"), (5, "app.documents"), (6, "resources")]


def test_nothing_imports_the_top_level_folders_by_their_own_names():
    # Here they are importable by those names too (from the repository's root), but installed they are not.
    sources = [p for folder in ("dragoman", *SUBPACKAGES, "tests", "bench", "packaging")
               for p in sorted((ROOT / folder).rglob("*.py"))] + [ROOT / "packaging" / "dragoman.spec"]
    assert ROOT / "kernels" / "__init__.py" in sources
    wrong = [f"{source.relative_to(ROOT)}:{line}: {module}" for source in sources
             for line, module in old_name_imports(source)]
    assert wrong == []
