"""The command line: :mod:`.main` (``sidecar``, ``python -m sidecar``) and its sub-commands."""
