#!/usr/bin/env bash
# Everything the test suite needs, in a virtual environment made anew on each run (.venv in the
# checkout), so that nothing installed before on the machine can hide a missing dependency.
# On Debian/Ubuntu as root it first installs Qt's runtime libraries for the offscreen platform; for
# the installer tests (tests/packaging) binutils (PyInstaller's objcopy, readelf),
# desktop-file-validate and appstreamcli; Noto fonts for the scripts translated PDFs are drawn in
# (fontconfig finds them); Tesseract with its English, Arabic and Simplified Chinese models (the OCR
# tests read scans in those scripts); Xvfb, xclip and Qt's xcb libraries (the popup's tests read a
# real X server's selection); dbus-daemon (the global shortcut's tests run a private session bus with a
# desktop portal on it); and python3-venv. Then Dragoman with its test extras, whose oracles
# (transformers, PEFT) are pinned to the versions the suite passes with: DRAGOMAN_ORACLES=newest
# installs the newest ones instead, to try them. torch is pinned so that pip takes the CPU build
# where one is provided locally (an unpinned torch pulls a multi-GB CUDA build); setuptools 77 reads
# pyproject's licence, and the packaging tests build the wheel without isolation.
set -euo pipefail
cd "$(dirname "$0")/.."
packages="libegl1 libxkbcommon0 libfontconfig1 libdbus-1-3 libglib2.0-0 binutils desktop-file-utils appstream fontconfig fonts-noto-core fonts-noto-cjk tesseract-ocr tesseract-ocr-eng tesseract-ocr-ara tesseract-ocr-chi-sim python3-venv
  xvfb xclip libxcb-cursor0 libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-randr0 libxcb-render-util0 libxcb-shape0 libxcb-xkb1 libxkbcommon-x11-0 dbus-daemon"
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get install -y -qq --no-install-recommends $packages >/dev/null 2>&1 ||
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends $packages >/dev/null; }
fi
rm -rf .venv
"${PYTHON:-python3}" -m venv .venv
pip=(.venv/bin/python -m pip install -q --disable-pip-version-check)
"${pip[@]}" 'setuptools>=77' torch==2.13.0 -e '.[test]'
if [ "${DRAGOMAN_ORACLES:-}" = newest ]; then
  "${pip[@]}" --upgrade transformers peft
fi
