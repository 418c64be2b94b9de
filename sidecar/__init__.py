"""Operator workspace sidecar (DESIGN.md §1): the process the Electron app launches."""

__version__ = "0.1.0"
# the bridge contract's version, "MAJOR.MINOR" (DESIGN §4; docs/protocol.md "Versions"): the one
# place it is written.  An additive change (a new method, field or capability) bumps the minor;
# anything an older client could misread bumps the major (the auth of another major gets 4426).
PROTOCOL_VERSION = "1.1"
PROTOCOL_MAJOR = int(PROTOCOL_VERSION.split(".")[0])  # the ready line's and status's ``protocol``
