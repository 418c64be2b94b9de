"""PyInstaller entry point: the frozen ``sidecar`` binary runs the same CLI as ``python -m sidecar``."""
import multiprocessing
import sys

from sidecar.cli.main import main

if __name__ == "__main__":
    multiprocessing.freeze_support()
    sys.exit(main())
