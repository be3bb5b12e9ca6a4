"""Dragoman, the one import name of the distribution: `dragoman.app`, `dragoman.engine`,
`dragoman.kernels` and `dragoman.resources`.

Installed, they are folders of this package (pyproject.toml's package-dir puts them there). In the
repository they are its top-level folders, beside this one: there the repository's root is searched
too, so that a checkout imports itself as `dragoman` with nothing installed (`python -m bench`, the
tests, the GPU machine's plain copy of the tree).

A checkout's root also lands on `sys.path` (`python -m` puts the working folder first), where its
folders would shadow installed distributions of the same names: transformers imports PyPI's
`kernels`, and would get ours. So in a checkout these names never resolve to the root's folders
(`CheckoutGuard`); they are only ever `dragoman.<name>`. Entry points that run from a checkout
(tests/conftest.py, bench/__init__.py) import dragoman before anything that may import them.
"""

import importlib.abc
import importlib.machinery
import sys
from pathlib import Path

_root = Path(__file__).resolve().parent.parent
SUBPACKAGES = ("app", "engine", "kernels", "resources")  # the checkout's folders that are dragoman.<name>


def _is_root(entry: str) -> bool:
    try:
        return Path(entry or ".").resolve() == _root
    except OSError:
        return False


class CheckoutGuard(importlib.abc.MetaPathFinder):
    """Finds the top-level `app`, `engine`, `kernels` and `resources` on `sys.path` without the
    checkout's root: an installed distribution of that name, or none at all."""

    def find_spec(self, name, path=None, target=None):
        if path is not None or name not in SUBPACKAGES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, [p for p in sys.path if not _is_root(p)])
        if spec is None:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return spec


if (_root / "pyproject.toml").is_file() and not Path(__file__).with_name("engine").is_dir():
    __path__.append(str(_root))
    if not any(isinstance(finder, CheckoutGuard) for finder in sys.meta_path):
        sys.meta_path.insert(0, CheckoutGuard())
