"""``sidecar serve``'s flags, and the settings it takes from the environment only.

Rules / theory of operation
---------------------------
* Every flag is a :class:`sidecar.config.Settings` field and can also be set as ``SIDECAR_<FIELD>``
  (flags win).  A field with no flag (:func:`serve_flags` tells which have one) is set by the
  environment only; ``serve --help`` lists those with their ``Field(description=…)``
  (:func:`env_only_help`), and a bad one is named by its variable alone
  (:func:`sidecar.cli.preflight.flag_of`) — the line named a flag ``--stack-timeout-s`` that serve
  refuses, and no help named ``SIDECAR_STACK_TIMEOUT_S`` (brk33).
* Its own module so that :mod:`sidecar.cli.preflight` can ask which flags exist without importing
  :mod:`sidecar.cli.main` (which imports it).
"""
from __future__ import annotations

import argparse
from functools import cache
from pathlib import Path
from typing import Any

from sidecar.protocol.contract import EXIT_CODES


def add_serve(sub: Any) -> argparse.ArgumentParser:
    """Add the ``serve`` command to ``sub`` (an ``add_subparsers()`` result); the parser."""
    s = sub.add_parser("serve", help="run the sidecar (Electron launches this)",
                       epilog=env_only_help() + "\n" + EXIT_CODES,
                       description="Run the sidecar. Every flag can also be set by the environment "
                                   "variable SIDECAR_<FLAG> (e.g. SIDECAR_PORT); flags win.",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_flags(s)
    return s


def _add_flags(s: argparse.ArgumentParser) -> None:
    """``serve``'s flags, each a :class:`sidecar.config.Settings` field."""
    s.add_argument("--port", type=int, help="websocket port on 127.0.0.1, 0-65535 (0 = free port)")
    s.add_argument("--data-dir", type=Path, help="SQLite and logs (default: per-OS app data)")
    s.add_argument("--clock", choices=["wall", "virtual"], help="virtual: moved by clock.advance_to")
    s.add_argument("--time-scale", type=float, help="run real time K > 0 times faster (demos)")
    s.add_argument("--stack-url", help="Stack base URL, e.g. http://127.0.0.1:8080")
    s.add_argument("--stack-flush-interval-s", type=float,
                   help="virtual clock: send Stack's new writes at most every N s (default 10; 0 = at once)")
    s.add_argument("--seed", help="deployment seed of the keyed randomness")
    s.add_argument("--token-file", type=Path,
                   help="file with the per-launch token (wins over SIDECAR_TOKEN); one of the two is required")
    s.add_argument("--durability", choices=["normal", "full"], help="SQLite synchronous mode")
    s.add_argument("--allow-origin", action="append", dest="allow_origin",
                   help="an Origin allowed to connect (repeatable; default none)")
    s.add_argument("--log-level", help="DEBUG, INFO, WARNING, ERROR or CRITICAL")


@cache
def serve_flags() -> frozenset[str]:
    """The settings (``Settings`` field names) that ``sidecar serve`` takes as flags; every other
    one is set by the environment only (``SIDECAR_<FIELD>``)."""
    serve = argparse.ArgumentParser(add_help=False)
    _add_flags(serve)
    return frozenset(a.dest for a in serve._actions)


def env_only() -> list[str]:
    """The settings ``serve`` has no flag for, in ``Settings``' order (``token``: ``--token-file``,
    in the flags' help) — derived, so a new setting is listed without another edit."""
    from sidecar.config import Settings

    flags = serve_flags()
    return [name for name in Settings.model_fields if name not in flags and name != "token"]


def env_only_help() -> str:
    """The ``serve --help`` section listing :func:`env_only`, each with its description."""
    from sidecar.config import Settings

    fields = Settings.model_fields
    rows = [f"  SIDECAR_{name.upper():<26} {fields[name].description}" for name in env_only()]
    return "environment only (no flag):\n" + "\n".join(rows) + "\n"
