#!/usr/bin/env bash
# Install Dragoman from this checkout into a virtual environment of its own, so that it works on
# Debian/Ubuntu's own Python (which refuses `pip install` outside one) and anywhere else:
#   - on Debian/Ubuntu, the system libraries Qt needs on X11, the Noto fonts translated PDFs are
#     drawn in, Tesseract OCR with its English model for scans and pictures of text (other languages:
#     tesseract-ocr-LANG, or DRAGOMAN_OCR="ara chi-sim ..."), jbig2dec (the JBIG2 pictures of
#     scanned PDFs), and python3-venv (apt: directly as
#     root, through sudo otherwise);
#   - the environment: as root /usr/local/lib/dragoman, else ~/.local/lib/dragoman (rebuilt on each
#     run, so an update is the same command);
#   - PyTorch (the CPU build where pip finds one locally; PyPI's, with CUDA, elsewhere on Linux)
#     and Dragoman with its runtime dependencies, nothing else;
#   - the `dragoman` command: ~/.local/bin/dragoman, and /usr/local/bin/dragoman as root.
# DRAGOMAN_PREFIX=DIR puts the environment in DIR/venv and the command in DIR/bin instead, and
# leaves the system alone (CI installs a throw-away copy this way).
set -euo pipefail
umask 022
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
apt_packages="libxcb-cursor0 libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-randr0 libxcb-render-util0
  libxcb-shape0 libxcb-xkb1 libxkbcommon-x11-0 libegl1 libfontconfig1 libdbus-1-3 fontconfig fonts-noto-core
  fonts-noto-cjk tesseract-ocr tesseract-ocr-eng jbig2dec python3-venv"
for language in ${DRAGOMAN_OCR:-}; do
  apt_packages="$apt_packages tesseract-ocr-$language"
done

if [ -n "${DRAGOMAN_PREFIX:-}" ]; then
  venv=$DRAGOMAN_PREFIX/venv
  links=("$DRAGOMAN_PREFIX/bin")
elif [ "$(id -u)" = 0 ]; then
  venv=/usr/local/lib/dragoman
  links=(/usr/local/bin "$HOME/.local/bin")
else
  venv=$HOME/.local/lib/dragoman
  links=("$HOME/.local/bin")
fi

if [ -z "${DRAGOMAN_PREFIX:-}" ] && command -v apt-get >/dev/null; then
  sudo=()
  [ "$(id -u)" = 0 ] || sudo=(sudo)
  if [ "$(id -u)" != 0 ] && ! command -v sudo >/dev/null; then
    echo "Not root and no sudo: ask an administrator to install these packages if the window does not open:" $apt_packages
  else
    # shellcheck disable=SC2086
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends $apt_packages >/dev/null 2>&1 ||
      { "${sudo[@]}" apt-get update -qq && "${sudo[@]}" apt-get install -y -qq --no-install-recommends $apt_packages >/dev/null; }
  fi
fi

"$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
  { echo "Dragoman needs Python 3.10 or later; $("$python" --version 2>&1) found" >&2; exit 1; }
echo "Installing Dragoman into $venv"
rm -rf "$venv"
"$python" -m venv "$venv"
# From a copy of the package's folders: setuptools builds in the tree it is given, and a build/ left
# there by an earlier build would put stale modules into this one.
source=$(mktemp -d)
trap 'rm -rf "$source"' EXIT
cp -r pyproject.toml README.md dragoman app engine kernels resources "$source"
"$venv/bin/python" -m pip install -q --disable-pip-version-check torch==2.13.0 "$source"
for folder in "${links[@]}"; do
  mkdir -p "$folder"
  ln -sf "$venv/bin/dragoman" "$folder/dragoman"
done
echo "Installed $(du -sh "$venv" | cut -f1) in $venv; the command is ${links[0]}/dragoman"
case ":$PATH:" in
  *":${links[0]}:"*) ;;
  *) echo "(${links[0]} is not on your PATH yet: open a new terminal, or run ${links[0]}/dragoman)" ;;
esac
