"""``python -m electron_stub`` = ``sidecar-stub``."""
import sys

from electron_stub.cli import main

sys.exit(main())
