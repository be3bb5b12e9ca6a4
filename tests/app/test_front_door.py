"""The app reaches the engine through its front door, `engine/__init__.py` (`dragoman.engine`), and only for
names it exports."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dragoman import engine

ROOT = Path(__file__).resolve().parents[2]


ENGINE = "dragoman.engine"


def package_of(source: Path) -> str:
    """The package a module of app/ is in, as installed: app/documents/pdf.py -> dragoman.app.documents."""
    return ".".join(["dragoman", *source.parent.relative_to(ROOT).parts])


def engine_imports(source: Path, package: str) -> list[tuple[int, str, str | None]]:
    """(line, module, name) of each import from the engine package in `source`, a module of `package`
    (relative imports resolved); name is None for `import dragoman.engine...` and `from dragoman import engine`."""
    def of_engine(module: str) -> bool:
        return module == ENGINE or module.startswith(ENGINE + ".")

    found = []
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"), str(source))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, None) for alias in node.names if of_engine(alias.name)]
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            base = parts[:len(parts) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            if of_engine(module):
                found += [(node.lineno, module, alias.name) for alias in node.names]
            else:  # the package itself, as a name: `from dragoman import engine`
                found += [(node.lineno, f"{module}.{alias.name}", None) for alias in node.names
                          if f"{module}.{alias.name}" == ENGINE]
    return found


def test_the_app_imports_only_the_front_doors_names():
    sources = sorted((ROOT / "app").rglob("*.py"))
    assert ROOT / "app" / "documents" / "pdf.py" in sources  # the walk reaches the formats too
    wrong = [
        f"{source.relative_to(ROOT)}:{line}: {module}" + (f" {name}" if name else "")
        for source in sources
        for line, module, name in engine_imports(source, package_of(source))
        if module != ENGINE or name not in engine.__all__  # a submodule, or a name the front door does not give
    ]
    assert wrong == []
    assert any(engine_imports(source, package_of(source)) for source in sources)


def test_the_walk_finds_imports_of_engine_modules(tmp_path):
    source = tmp_path / "reaching_in.py"
    source.write_text("import dragoman.engine.config\nfrom dragoman.engine.config import load_config\n"
                      "def f():\n    from dragoman.engine import translator, Translator\n"
                      "from dragoman import engine, app\nfrom ...engine import decoding\nfrom ... import engine\n")
    assert sorted(engine_imports(source, "dragoman.app.documents")) == [
        (1, "dragoman.engine.config", None), (2, "dragoman.engine.config", "load_config"),
        (4, ENGINE, "Translator"), (4, ENGINE, "translator"),
        (5, ENGINE, None), (6, ENGINE, "decoding"), (7, ENGINE, None),
    ]
    assert "translator" not in engine.__all__ and "Translator" in engine.__all__


@pytest.mark.parametrize("name", engine.__all__)
def test_every_front_door_name_resolves(name):
    assert getattr(engine, name) is not None
    assert name in dir(engine)
    namespace = {}
    exec(f"from dragoman.engine import {name}", namespace)
    assert namespace[name] is getattr(engine, name)


def test_a_name_the_front_door_does_not_give_is_an_attribute_error():
    with pytest.raises(AttributeError, match="'dragoman.engine' has no attribute 'generate_beam_batch'"):
        engine.generate_beam_batch


def test_the_front_door_names_are_the_engine_modules_own():
    from dragoman.engine import peft_adapter, translator

    assert engine.Translator is translator.Translator
    assert engine.scan_adapters is peft_adapter.scan_adapters
    assert engine.ADAPTER_FILES == (peft_adapter.CONFIG_FILE, peft_adapter.WEIGHTS_FILE)


def loaded_modules(code: str) -> set[str]:
    """The modules loaded after running `code` in a fresh interpreter, from this tree."""
    run = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys\nprint(' '.join(sys.modules))"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "QT_QPA_PLATFORM": "offscreen"},
        capture_output=True, text=True, check=True,
    )
    return set(run.stdout.split())


@pytest.mark.parametrize("code", [
    "from dragoman import engine",
    "import dragoman.app.window.gui",  # the window's start, up to the window module (which imports the model import code)
    "from dragoman.app.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass",
    "from dragoman.app.cli import main\ntry:\n    main(['translate', '--help'])\nexcept SystemExit:\n    pass",
])
def test_the_front_door_loads_torch_only_when_a_name_needs_it(code):
    modules = loaded_modules(code)
    assert not {"torch", "triton", "sentencepiece"} & modules
    assert "dragoman.engine.peft_adapter" not in modules and "dragoman.engine.translator" not in modules
