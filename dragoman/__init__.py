"""Dragoman, the one import name of the distribution: `dragoman.app`, `dragoman.engine`,
`dragoman.kernels` and `dragoman.resources`.

Installed, they are folders of this package (pyproject.toml's package-dir puts them there). In the
repository they are its top-level folders, beside this one: there the repository's root is searched
too, so that a checkout imports itself as `dragoman` with nothing installed (`python -m bench`, the
tests, the GPU machine's plain copy of the tree).
"""

from pathlib import Path

_root = Path(__file__).resolve().parent.parent
if (_root / "pyproject.toml").is_file() and not Path(__file__).with_name("engine").is_dir():
    __path__.append(str(_root))
