"""The bridge contract's version, ``"MAJOR.MINOR"`` (DESIGN §4; docs/protocol.md "Versions"): the
one place it is written (``sidecar`` re-exports it; ``sidecar --version``, the ``auth`` answer, the
schema).  An additive change — a new method, field, capability or close code a client may ignore —
bumps the minor; anything an older client could misread bumps the major (an ``auth`` of another
major gets -32602 then close 4426, :mod:`bridge.auth` rule 5)."""
from __future__ import annotations

PROTOCOL_VERSION = "1.3"
PROTOCOL_MAJOR = int(PROTOCOL_VERSION.split(".")[0])  # the ready line's and status's ``protocol``
