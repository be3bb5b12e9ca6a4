"""The bundle's entry point: the `dragoman` command, as `pip install` gives it (dragoman.app.cli:main)."""

import multiprocessing
import sys

from dragoman.app.cli import main

if __name__ == "__main__":
    multiprocessing.freeze_support()  # a long PDF's pages are read in processes of the bundle's own executable
    sys.exit(main())
