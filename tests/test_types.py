"""mypy over app, engine and kernels (pyproject.toml's [tool.mypy]), as installed: from a tree where
they are folders of `dragoman`, so that every import of the project resolves to its definition."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("app", "engine", "kernels", "resources")


@pytest.fixture(scope="module")
def installed_tree(tmp_path_factory) -> Path:
    """dragoman/ with the checkout's folders linked in, as the wheel places them."""
    tree = tmp_path_factory.mktemp("types")
    (tree / "dragoman").mkdir()
    (tree / "dragoman" / "__init__.py").write_bytes((ROOT / "dragoman" / "__init__.py").read_bytes())
    for name in PACKAGES:
        (tree / "dragoman" / name).symlink_to(ROOT / name, target_is_directory=True)
    return tree


def mypy(tree: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                           "--cache-dir", str(tree / ".mypy_cache"), *args], cwd=tree, capture_output=True, text=True)


def test_app_engine_and_kernels_type_check(installed_tree):
    run = mypy(installed_tree, "-p", "dragoman.app", "-p", "dragoman.engine", "-p", "dragoman.kernels")
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_front_door_hands_out_the_definitions_not_any(installed_tree):
    probe = installed_tree / "probe.py"
    probe.write_text("from dragoman.engine import Translator\n"
                     "from dragoman.app.session.session import TranslationSession\n"
                     "reveal_type(Translator)\nreveal_type(TranslationSession.alternatives)\n")
    run = mypy(installed_tree, "--enable-error-code", "misc", str(probe))  # where reveal_type speaks
    revealed = [line for line in run.stdout.splitlines() if line.startswith("probe.py")]
    assert len(revealed) == 2, run.stdout
    assert "-> dragoman.engine.translator.Translator" in revealed[0]
    assert "-> list[dragoman.engine.handle.Translation]" in revealed[1]
    assert not [line for line in revealed if "Any" in line], revealed
