"""The bundle's entry point: the `dragoman` command, as `pip install` gives it (dragoman.app.cli:command)."""

import multiprocessing

from dragoman.app.cli import command

if __name__ == "__main__":
    multiprocessing.freeze_support()  # a long PDF's pages are read in processes of the bundle's own executable
    command()
