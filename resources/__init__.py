"""Data files shipped with Dragoman (languages, icons, styles, desktop metadata)."""

from pathlib import Path

_HERE = Path(__file__).resolve().parent


def path(name: str) -> Path:
    """The path of data file `name` inside this package (also inside a PyInstaller bundle)."""
    return _HERE / name
