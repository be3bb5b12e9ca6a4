"""A new user's machine: the README's install command alone (packaging/install.sh, into a throw-away
prefix, no test extras) gives a `dragoman` that imports a checkpoint in the published layout with
`pytorch_model.bin`, lists it, translates stdin, a .docx and a PDF with it by name, and opens the
window offscreen. Everything runs from the installed copy, outside the checkout."""

import os
import subprocess
from pathlib import Path

import docx
import pytest
from pypdf import PdfReader

from documents.document_fakes import pdf_bytes

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The prefix packaging/install.sh installed into (its venv/ and bin/dragoman)."""
    prefix = tmp_path_factory.mktemp("prefix")
    done = subprocess.run(["bash", str(ROOT / "packaging" / "install.sh")], capture_output=True, text=True,
                          env={**os.environ, "DRAGOMAN_PREFIX": str(prefix)}, timeout=1200)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (prefix / "bin" / "dragoman").is_file()
    return prefix


def test_the_install_holds_the_runtime_alone(installed):
    python = installed / "venv" / "bin" / "python"
    missing = subprocess.run([python, "-c", "import importlib.util as u; print([m for m in "
                              "('transformers', 'peft', 'pytest', 'docx', 'reportlab') if u.find_spec(m)])"],
                             capture_output=True, text=True, check=True)
    assert missing.stdout.strip() == "[]"


def test_a_published_bin_checkpoint_imports_and_translates_text_documents_and_the_window(installed, bin_checkpoint,
                                                                                          tmp_path):
    work = tmp_path / "work"  # not the checkout: only the installed copy can be imported
    work.mkdir()
    env = {**os.environ, "DRAGOMAN_HOME": str(tmp_path / "home"), "QT_QPA_PLATFORM": "offscreen"}
    env.pop("PYTHONPATH", None)

    def dragoman(*args, stdin=""):
        done = subprocess.run([installed / "bin" / "dragoman", *args], input=stdin, capture_output=True, text=True,
                              cwd=work, env=env, timeout=600)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert dragoman("models", "import", str(bin_checkpoint), "--name", "nllb-tiny").startswith("nllb-tiny: installed")
    assert dragoman("models", "list").splitlines()[1].split()[0] == "nllb-tiny"

    options = ["--model", "nllb-tiny", "--from", "eng_Latn", "--to", "fra_Latn", "--device", "cpu", "--max-length", "16"]
    lines = dragoman("translate", *options, stdin="Hello world.\nThe cat reads a book.\n").splitlines()
    assert len(lines) == 2 and all(lines)

    document = docx.Document()
    document.add_paragraph("The first paragraph is short.")
    document.add_paragraph("A second one follows it.")
    document.save(work / "letter.docx")
    (work / "report.pdf").write_bytes(pdf_bytes([["The only line of the report."]]))
    dragoman("translate", *options, "letter.docx", "report.pdf")
    assert len(docx.Document(work / "letter.fra_Latn.docx").paragraphs) == 2
    assert len(PdfReader(work / "report.fra_Latn.pdf").pages) == 1

    model = tmp_path / "home" / "data" / "models" / "nllb-tiny"
    window = subprocess.run([installed / "venv" / "bin" / "python", "-m", "dragoman.app.window.screenshot",
                             str(work / "window.png"), "--model", str(model), "--timeout", "300"],
                            capture_output=True, text=True, cwd=work, env=env, timeout=600)
    assert window.returncode == 0, window.stderr
    assert (work / "window.png").stat().st_size > 10_000
