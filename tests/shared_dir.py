"""Where ``../shared`` is — the one place the tests, their helpers and ``python -m bench`` ask.

``../shared`` is the project's steering material (the binding ``DESIGN.md``, the seed documents,
the acceptance scenarios ``scenarios/seed/*.jsonl`` and the 8-hour ``scenarios/shift.jsonl``).
It sits beside the checkout in development and CI only: a user's clone has none, and the suite
must pass there too (issue 18 item 1).  So every test that reads it is marked ``shared``
(``tests/conftest.py`` skips those, with :data:`REASON`, when it is absent; a test that takes the
``shared_dir`` fixture gets the mark by itself), and nothing else depends on it.

* :data:`ENV` (``SIDECAR_SHARED_DIR``) overrides the location: a directory there is used
  instead; a value that names no directory makes ``../shared`` invisible — how CI runs the
  suite as a user's clone would (``.ci/run``).  An empty value counts as unset.
* Otherwise it is ``shared`` beside the checkout (the parent of the repository's root).
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the checkout
ENV = "SIDECAR_SHARED_DIR"


def locate(environ: Mapping[str, str] = os.environ) -> Path:
    """The location of ``../shared`` (whether or not anything is there): :data:`ENV` when set
    and not empty, else ``<checkout>/../shared``."""
    value = environ.get(ENV, "")
    return Path(value).expanduser() if value else ROOT.parent / "shared"


SHARED = locate()
AVAILABLE = SHARED.is_dir()
SEED_DIR = SHARED / "scenarios" / "seed"
SHIFT = SHARED / "scenarios" / "shift.jsonl"
REASON = (f"../shared is absent (looked at {SHARED}; set {ENV} to move it): it is the project's "
          f"design and seed scenarios, beside the checkout in development and CI only")
