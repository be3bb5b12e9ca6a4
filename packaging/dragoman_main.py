"""The bundle's entry point: the `dragoman` command, as `pip install` gives it (dragoman.app.cli:main)."""

import sys
import warnings

from dragoman.app.cli import main

# torch warns on import when numpy is absent; the engine never hands torch a numpy array, and the
# bundle leaves numpy out (~35 MB).
warnings.filterwarnings("ignore", message="Failed to initialize NumPy", category=UserWarning)

if __name__ == "__main__":
    sys.exit(main())
