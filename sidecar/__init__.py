"""Operator workspace sidecar (DESIGN.md §1): the process the Electron app launches."""

__version__ = "0.1.0"
from sidecar.protocol.version import PROTOCOL_MAJOR, PROTOCOL_VERSION  # noqa: E402,F401 - the contract's version
