"""Operator workspace sidecar (DESIGN.md §1): the process the Electron app launches."""

__version__ = "0.1.0"
PROTOCOL_VERSION = 1
