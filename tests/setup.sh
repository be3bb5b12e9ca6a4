#!/usr/bin/env bash
# Everything the test suite needs on a fresh Debian/Ubuntu machine: Qt's runtime libraries for the
# offscreen platform; for the installer tests (tests/packaging) binutils (PyInstaller's objcopy,
# readelf), desktop-file-validate and appstreamcli; Noto fonts for the scripts translated PDFs are
# drawn in (fontconfig finds them); then Dragoman with its test extras. torch is
# pinned so that pip takes the CPU build where one is provided locally (an unpinned torch pulls a
# multi-GB CUDA build); setuptools 77 reads pyproject's licence, and the packaging tests build the wheel
# without isolation. packaging/build.sh installs PyInstaller into its own build environment.
set -euo pipefail
cd "$(dirname "$0")/.."
packages="libegl1 libxkbcommon0 libfontconfig1 libdbus-1-3 libglib2.0-0 binutils desktop-file-utils appstream fontconfig fonts-noto-core fonts-noto-cjk"
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get install -y -qq --no-install-recommends $packages >/dev/null 2>&1 ||
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends $packages >/dev/null; }
fi
python3 -m pip install -q --disable-pip-version-check 'setuptools>=77' torch==2.13.0 -e '.[test]'
