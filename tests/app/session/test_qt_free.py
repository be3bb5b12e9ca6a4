"""The translation session and the document formats never import Qt: the command line and the
local server run them without a window, and the window's worker is only their adapter to signals."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_session_and_the_formats_load_without_qt():
    modules = [".".join(["dragoman", *source.relative_to(ROOT).with_suffix("").parts]).removesuffix(".__init__")
               for folder in ("app/session", "app/documents") for source in sorted((ROOT / folder).rglob("*.py"))]
    assert "dragoman.app.session.terms" in modules and "dragoman.app.documents.pdf" in modules
    code = "".join(f"import {name}\n" for name in modules) + "import sys\nprint(' '.join(sys.modules))"
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, check=True)
    assert not [name for name in run.stdout.split() if name.startswith("PySide6")]
