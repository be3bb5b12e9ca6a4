"""The bundle's entry point: the `dragoman` command, as `pip install` gives it (dragoman.app.cli:main)."""

import sys

from dragoman.app.cli import main

if __name__ == "__main__":
    sys.exit(main())
