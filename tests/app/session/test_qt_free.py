"""The translation pipeline, the document formats and the local server never import Qt: the command
line and the server run them without a window, and the window's worker is only their adapter to signals."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_session_the_formats_and_the_server_load_without_qt():
    modules = [".".join(["dragoman", *source.relative_to(ROOT).with_suffix("").parts]).removesuffix(".__init__")
               for folder in ("app/session", "app/documents", "app/server") for source in sorted((ROOT / folder).rglob("*.py"))]
    assert {"dragoman.app.session.terms", "dragoman.app.documents.pdf", "dragoman.app.server.app"} <= set(modules)
    code = "".join(f"import {name}\n" for name in modules) + "import sys\nprint(' '.join(sys.modules))"
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, check=True)
    assert not [name for name in run.stdout.split() if name.startswith("PySide6")]
