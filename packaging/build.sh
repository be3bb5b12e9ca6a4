#!/usr/bin/env bash
# Build Dragoman's Linux installers from a clean checkout:
#   dist/dragoman/                        the PyInstaller one-folder bundle (`dist/dragoman/dragoman`)
#   dist/dragoman_<version>_<arch>.deb    the bundle under /opt/dragoman, `dragoman` on the PATH,
#                                         desktop entry, icons, AppStream metadata
# Needs: python3 with venv and pip, binutils (objcopy, readelf), dpkg-deb, Qt's runtime libraries
# (tests/setup.sh installs all of them on Debian/Ubuntu). See packaging/README.md.
#
# Environment (all optional):
#   TORCH        the torch to bundle (default torch==2.13.0, the tests' pin: the CPU build where pip
#                finds it locally, as on CI; from PyPI on Linux it is the CUDA build)
#   TORCH_INDEX  an extra index for torch, e.g. https://download.pytorch.org/whl/cpu (with
#                TORCH=torch==2.13.0+cpu) or https://download.pytorch.org/whl/cu130 for a CUDA build
#   PYTHON       the Python whose virtual environment is bundled (default python3)
#   BUILD_DIR    work files (default build/), DIST_DIR the results (default dist/)
#   DEB_COMPRESSION  dpkg-deb's compressor (default xz; zstd is several times faster to build)
set -euo pipefail
umask 022
cd "$(dirname "$0")/.."
build=$(mkdir -p "${BUILD_DIR:-build}" && cd "${BUILD_DIR:-build}" && pwd)
dist=$(mkdir -p "${DIST_DIR:-dist}" && cd "${DIST_DIR:-dist}" && pwd)
venv=$build/venv
pip=(python -m pip install -q --disable-pip-version-check)

step() { printf '\n== [%ss] %s\n' "$SECONDS" "$*"; }

step "build environment: $venv"
rm -rf "$venv"
"${PYTHON:-python3}" -m venv "$venv"
PATH=$venv/bin:$PATH
unset PYTHONPATH  # the build environment's packages only: no checkout or other tree on the path
# Only Dragoman's runtime dependencies and PyInstaller: test-only packages (transformers, peft,
# pytest) are not installed, so nothing can pull them into the bundle.
"${pip[@]}" "${TORCH:-torch==2.13.0}" ${TORCH_INDEX:+--extra-index-url "$TORCH_INDEX"}
# Dragoman installed, not editable: PyInstaller analyses the installed dragoman package. setuptools
# builds in build/ of the checkout, whatever BUILD_DIR says: a stale module there would go into the wheel.
rm -rf build/lib build/bdist.* dragoman.egg-info
"${pip[@]}" ".[package]"
version=$(cd "$build" && python -c 'from dragoman.app import __version__; print(__version__)')
arch=$(dpkg --print-architecture)
python -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda or "none")'

step "PyInstaller bundle: $dist/dragoman"
rm -rf "$dist/dragoman"
pyinstaller --noconfirm --clean --log-level WARN --workpath "$build/pyinstaller" --distpath "$dist" packaging/dragoman.spec
python packaging/third_party.py "$dist/dragoman/licenses"
"$dist/dragoman/dragoman" --version

step "Debian package"
stage=$build/deb
rm -rf "$stage"
mkdir -p "$stage/DEBIAN" "$stage/opt" "$stage/usr/bin" "$stage/usr/share/applications" \
  "$stage/usr/share/metainfo" "$stage/usr/share/doc/dragoman"
cp -a "$dist/dragoman" "$stage/opt/dragoman"
ln -s /opt/dragoman/dragoman "$stage/usr/bin/dragoman"
cp resources/dragoman.desktop "$stage/usr/share/applications/"
cp resources/*.metainfo.xml "$stage/usr/share/metainfo/"
python packaging/render_icons.py "$stage/usr/share/icons/hicolor"
cat >"$stage/usr/share/doc/dragoman/copyright" <<'EOF'
Dragoman: offline translation between 200 languages.
License: MIT (Copyright the Dragoman developers).

/opt/dragoman bundles Python, Qt (through PySide6, under the LGPL-3.0), PyTorch and other
software, each under its own license: /opt/dragoman/licenses/README.txt lists them, and the
license files each ships are beside it. On Debian systems the full texts of the LGPL-3.0, the
GPL-3.0 and the Apache-2.0 license are in /usr/share/common-licenses/.
EOF
# Files root's, readable by all; directories and programs executable.
chmod -R u+rwX,go+rX,go-w "$stage"
depends=$(python packaging/deb_depends.py "$dist/dragoman")
cat >"$stage/DEBIAN/control" <<EOF
Package: dragoman
Version: $version
Architecture: $arch
Maintainer: The Dragoman developers <dragoman@invalid>
Installed-Size: $(du -sk --exclude=DEBIAN "$stage" | cut -f1)
Depends: $depends
Recommends: fonts-noto-core, tesseract-ocr, tesseract-ocr-eng, jbig2dec
Suggests: fonts-noto-cjk
Section: text
Priority: optional
Description: offline translator for the 200 languages of NLLB-200
 Dragoman translates text and documents between the 200 languages of Meta's
 NLLB-200 models entirely on this computer: nothing leaves the machine.
 .
 It bundles its own Python, Qt and PyTorch under /opt/dragoman. Models are
 not included: import or download one from the window; they are kept in the
 user's data folder.
EOF
(cd "$stage" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) >"$stage/DEBIAN/md5sums"
deb=$dist/dragoman_${version}_${arch}.deb
dpkg-deb --root-owner-group -Z"${DEB_COMPRESSION:-xz}" --build "$stage" "$deb"

step "done"
du -sh "$dist/dragoman" "$deb"
