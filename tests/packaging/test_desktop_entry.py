"""The desktop integration files in resources/ (and the Windows installer's file associations):
valid for the desktop's tools, and in step with the app (the document formats it opens, its
version, its icon)."""

import configparser
import re
import subprocess
from pathlib import Path
from xml.etree import ElementTree

from dragoman.app import __version__
from dragoman.app.documents import FORMATS

ROOT = Path(__file__).resolve().parents[2]
RESOURCES = ROOT / "resources"
DESKTOP = RESOURCES / "dragoman.desktop"
# The shared-mime-info type of each extension app/documents opens.
MIME_TYPES = {
    ".txt": "text/plain", ".text": "text/plain",
    ".md": "text/markdown", ".markdown": "text/markdown",
    ".html": "text/html", ".htm": "text/html", ".xhtml": "application/xhtml+xml",
    ".srt": "application/x-subrip", ".vtt": "text/vtt", ".ass": "text/x-ssa", ".ssa": "text/x-ssa",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".docm": "application/vnd.ms-word.document.macroEnabled.12",
    ".dotx": "application/vnd.openxmlformats-officedocument.wordprocessingml.template",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ".pptm": "application/vnd.ms-powerpoint.presentation.macroEnabled.12",
    ".ppsx": "application/vnd.openxmlformats-officedocument.presentationml.slideshow",
    ".potx": "application/vnd.openxmlformats-officedocument.presentationml.template",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".xlsm": "application/vnd.ms-excel.sheet.macroEnabled.12",
    ".xltx": "application/vnd.openxmlformats-officedocument.spreadsheetml.template",
    ".odt": "application/vnd.oasis.opendocument.text",
    ".ott": "application/vnd.oasis.opendocument.text-template",
    ".epub": "application/epub+zip",
    ".pdf": "application/pdf",
    ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp",
    ".tif": "image/tiff", ".tiff": "image/tiff",
}


def desktop_entry() -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # keys are case-sensitive
    parser.read(DESKTOP, encoding="utf-8")
    return parser["Desktop Entry"]


def metainfo() -> Path:
    (path,) = RESOURCES.glob("*.metainfo.xml")
    return path


def test_desktop_file_is_valid():
    done = subprocess.run(["desktop-file-validate", str(DESKTOP)], capture_output=True, text=True)
    assert done.returncode == 0 and not done.stdout.strip(), done.stdout + done.stderr


def test_desktop_file_offers_the_popup_as_an_action():
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str
    parser.read(DESKTOP, encoding="utf-8")
    assert parser["Desktop Entry"]["Actions"] == "popup;"
    assert parser["Desktop Action popup"]["Exec"] == "dragoman popup"


def test_desktop_file_opens_every_document_format_and_names_the_icon():
    entry = desktop_entry()
    unknown = sorted(set(FORMATS) - set(MIME_TYPES))
    assert not unknown, f"add the MIME types of {unknown} to MIME_TYPES and to MimeType= in {DESKTOP.name}"
    assert set(entry["MimeType"].rstrip(";").split(";")) == {MIME_TYPES[ext] for ext in FORMATS}
    assert entry["Exec"] == "dragoman %F"
    assert entry["Icon"] == "dragoman" and (RESOURCES / "dragoman.svg").is_file()


def test_appstream_metadata_is_valid_and_names_this_version():
    done = subprocess.run(["appstreamcli", "validate", "--no-net", str(metainfo())], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    component = ElementTree.parse(metainfo()).getroot()
    assert metainfo().name == component.findtext("id") + ".metainfo.xml"
    assert component.findtext("launchable[@type='desktop-id']") == DESKTOP.name
    assert component.find("releases/release").get("version") == __version__  # newest first


def test_windows_installer_offers_open_with_for_every_document_format():
    script = (ROOT / "packaging" / "dragoman.iss").read_text(encoding="utf-8")
    assert set(re.findall(r"Software\\Classes\\(\.\w+)\\OpenWithProgids", script)) == set(FORMATS)
