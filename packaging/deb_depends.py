"""The Debian `Depends:` of the bundle: the system libraries its programs and libraries link to.

`python packaging/deb_depends.py dist/dragoman` prints the field's value. The bundle carries Python,
Qt, torch and the Python packages; libraries of the system (C library, X11/Wayland, fontconfig,
glib, OpenSSL...) are left out of it by the spec and come from these packages instead. Every
shared library that an ELF file in the bundle needs (`readelf -d`, NEEDED) must be either in the
bundle or in SYSTEM_PACKAGES below: an unknown one stops the build, naming the library and who
needs it. The C and C++ runtimes' minimum versions follow from the symbol versions the bundle
uses (GLIBC_2.x, GLIBCXX_3.4.x). A bundle with triton (a CUDA build) needs a C compiler too.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

# soname -> Debian package ("new | old" where Debian 13 / Ubuntu 24.04 renamed it in the 64-bit
# time_t transition).
SYSTEM_PACKAGES = {
    # glibc (its version comes from the symbols, below)
    "libc.so.6": "libc6", "libm.so.6": "libc6", "libdl.so.2": "libc6", "libpthread.so.0": "libc6",
    "librt.so.1": "libc6", "libresolv.so.2": "libc6", "libutil.so.1": "libc6", "ld-linux-x86-64.so.2": "libc6",
    "ld-linux-aarch64.so.1": "libc6",
    # C++ and GCC runtimes
    "libstdc++.so.6": "libstdc++6", "libgcc_s.so.1": "libgcc-s1",
    # Python's own extension modules
    "libz.so.1": "zlib1g", "libbz2.so.1.0": "libbz2-1.0", "liblzma.so.5": "liblzma5", "libzstd.so.1": "libzstd1",
    "libffi.so.8": "libffi8", "libsqlite3.so.0": "libsqlite3-0", "libuuid.so.1": "libuuid1",
    "libexpat.so.1": "libexpat1", "libmpdec.so.3": "libmpdec3",
    "libssl.so.3": "libssl3t64 | libssl3", "libcrypto.so.3": "libssl3t64 | libssl3",
    # Qt: graphics, X11 (xcb), Wayland, fonts, D-Bus, glib
    "libEGL.so.1": "libegl1", "libGL.so.1": "libgl1", "libOpenGL.so.0": "libopengl0",
    "libX11.so.6": "libx11-6", "libX11-xcb.so.1": "libx11-xcb1", "libxcb.so.1": "libxcb1",
    "libxcb-cursor.so.0": "libxcb-cursor0", "libxcb-glx.so.0": "libxcb-glx0", "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-image.so.0": "libxcb-image0", "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-render-util.so.0": "libxcb-render-util0", "libxcb-render.so.0": "libxcb-render0",
    "libxcb-shape.so.0": "libxcb-shape0", "libxcb-shm.so.0": "libxcb-shm0", "libxcb-sync.so.1": "libxcb-sync1",
    "libxcb-util.so.1": "libxcb-util1", "libxcb-xfixes.so.0": "libxcb-xfixes0", "libxcb-xkb.so.1": "libxcb-xkb1",
    "libxcb-xinput.so.0": "libxcb-xinput0", "libxcb-xinerama.so.0": "libxcb-xinerama0",
    "libxkbcommon.so.0": "libxkbcommon0", "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libwayland-client.so.0": "libwayland-client0", "libwayland-cursor.so.0": "libwayland-cursor0",
    "libwayland-egl.so.1": "libwayland-egl1",
    "libfontconfig.so.1": "libfontconfig1", "libfreetype.so.6": "libfreetype6",
    "libdbus-1.so.3": "libdbus-1-3",
    "libglib-2.0.so.0": "libglib2.0-0t64 | libglib2.0-0", "libgthread-2.0.so.0": "libglib2.0-0t64 | libglib2.0-0",
    # QtNetwork (the single-instance socket)
    "libbrotlicommon.so.1": "libbrotli1", "libbrotlidec.so.1": "libbrotli1", "libgssapi_krb5.so.2": "libgssapi-krb5-2",
}
# The NVIDIA driver's (CUDA builds): it comes with the driver, from NVIDIA's installer or the
# distribution's driver packages, so it cannot be named as a dependency.
DRIVER_LIBRARIES = {"libcuda.so.1"}
# GLIBCXX_3.4.N -> the GCC release whose libstdc++ first has it (Debian versions libstdc++6 by GCC's).
GLIBCXX_GCC = {
    20: 5, 21: 5, 22: 6, 23: 7, 24: 8, 25: 8, 26: 9, 27: 9, 28: 10, 29: 11, 30: 12, 31: 13, 32: 13, 33: 14, 34: 15,
}


def elf_files(bundle: Path) -> list[Path]:
    files = []
    for path in sorted(bundle.rglob("*")):
        if path.is_file() and not path.is_symlink():
            with path.open("rb") as f:
                if f.read(4) == b"\x7fELF":
                    files.append(path)
    return files


def readelf(option: str, path: Path) -> str:
    return subprocess.run(["readelf", option, "-W", str(path)], check=True, capture_output=True, text=True).stdout


def depends(bundle: Path) -> str:
    bundled = {path.name for path in bundle.rglob("*")}
    needed_by: dict[str, Path] = {}
    glibc, glibcxx = (2, 17), 0
    for path in elf_files(bundle):
        for soname in re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", readelf("-d", path)):
            if soname not in bundled and soname not in DRIVER_LIBRARIES:
                needed_by.setdefault(soname, path)
        versions = readelf("-V", path)
        for major, minor in re.findall(r"Name: GLIBC_(\d+)\.(\d+)", versions):
            glibc = max(glibc, (int(major), int(minor)))
        for minor in re.findall(r"Name: GLIBCXX_3\.4\.(\d+)", versions):
            glibcxx = max(glibcxx, int(minor))
    unknown = sorted(set(needed_by) - set(SYSTEM_PACKAGES))
    if unknown:
        lines = [f"  {soname} (needed by {needed_by[soname].relative_to(bundle)})" for soname in unknown]
        sys.exit("deb_depends.py: no Debian package known for these libraries; add them to SYSTEM_PACKAGES:\n"
                 + "\n".join(lines))
    minimum = {"libc6": f"{glibc[0]}.{glibc[1]}"}
    if glibcxx:
        if glibcxx not in GLIBCXX_GCC:
            sys.exit(f"deb_depends.py: which GCC first has GLIBCXX_3.4.{glibcxx}? Add it to GLIBCXX_GCC.")
        minimum["libstdc++6"] = str(GLIBCXX_GCC[glibcxx])
    packages = sorted({SYSTEM_PACKAGES[soname] for soname in needed_by})
    if (bundle / "_internal" / "triton").is_dir():  # a CUDA build: Triton compiles its kernel launchers at first use
        packages += ["gcc | clang", "libc6-dev"]
    return ", ".join(f"{p} (>= {minimum[p]})" if p in minimum else p for p in packages)


if __name__ == "__main__":
    print(depends(Path(sys.argv[1])))
