"""``sidecar serve``: every setting is checked before anything starts.

Rules / theory of operation
---------------------------
* A bad setting is ONE line on stderr naming the setting (its flag and environment variable) and
  exit code 2, before the database is opened or the data-dir lock taken — so nothing is left
  held or half-made.  The checks: pydantic's field constraints (``sidecar.config.Settings``: port
  0–65535, a known log level, a positive finite ``--time-scale``, an http(s) Stack URL …), the
  token (a given ``--token-file`` must be readable and non-empty and wins over ``SIDECAR_TOKEN``),
  a ``--port`` that is free on the loopback address, and last — the only check that creates
  anything — a data dir that is a folder we can create and write in (folders it made are
  removed again when it fails).
* The port check binds and releases at once, with ``SO_REUSEADDR`` as the real server does (a
  port in TIME_WAIT is free for it).  Another process may still take the port before the bridge
  binds; that race ends in the same one line and exit 2 (``sidecar.cli.main``).
"""
from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path
from typing import Any

import re

from pydantic import ValidationError
from pydantic_settings import SettingsError

from sidecar.cli.serve_args import serve_flags
from sidecar.config import Settings
from sidecar.domain.errors import InputError

__all__ = ["BadSetting", "load_settings", "check_settings", "flag_of"]


class BadSetting(InputError):
    """One bad setting; ``str()`` is the one line printed (without the ``sidecar:`` prefix)."""

    def __init__(self, setting: str, problem: str) -> None:
        super().__init__(f"bad setting {flag_of(setting)}: {problem}")
        self.setting = setting  # the Settings field name, e.g. "port"


def flag_of(field: str) -> str:
    """``time_scale`` → ``--time-scale (SIDECAR_TIME_SCALE)``: how a user sets it; a setting
    ``sidecar serve`` has no flag for is its variable alone (``SIDECAR_STACK_TIMEOUT_S``: the
    line named a flag ``--stack-timeout-s`` that serve refuses, brk33)."""
    if field == "token":
        return "SIDECAR_TOKEN (or --token-file)"
    if field not in serve_flags():
        return f"SIDECAR_{field.upper()}"
    return f"--{field.replace('_', '-')} (SIDECAR_{field.upper()})"


def load_settings(overrides: dict[str, Any]) -> Settings:
    """Settings from the environment and the command-line ``overrides``; :class:`BadSetting`
    naming the first bad one."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = str(err["loc"][0]) if err["loc"] else "?"
        msg = str(err["msg"]).removeprefix("Value error, ")
        given = err.get("input")
        shown = f" (got {given!r})" if given is not None and not isinstance(given, dict) else ""
        raise BadSetting(field, msg + shown) from None
    except SettingsError as exc:  # an environment value pydantic-settings could not even decode
        m = re.search(r'field "(\w+)"', str(exc))
        raise BadSetting(m.group(1) if m else "?", "cannot be read from the environment: "
                         + str(exc.__cause__ or exc)) from None


def check_settings(settings: Settings) -> str:
    """Check what pydantic cannot (token, data dir, port); return the token.  Raises
    :class:`BadSetting`.  Creates the data dir if it is missing (as the first start does)."""
    try:
        token = settings.resolved_token()
    except OSError as exc:
        raise BadSetting("token_file", f"cannot read {settings.token_file}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise BadSetting("token_file" if settings.token_file is not None else "token", str(exc)) from None
    if settings.port:
        _check_port(settings.host, settings.port)
    _check_data_dir(settings.data_dir)  # last: the only check that creates something
    return token


def _check_data_dir(path: Path) -> None:
    """Create ``path`` (and its missing parents) and prove it writable; on failure remove the
    folders this call made, so a refused start leaves nothing behind."""
    if path.exists() and not path.is_dir():
        raise BadSetting("data_dir", f"{path} is not a folder")
    missing = [p for p in (path, *path.parents) if not p.exists()]
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        for p in missing:  # deepest first
            try:
                p.rmdir()
            except OSError:
                break
        raise BadSetting("data_dir", f"{path} is not writable: {exc.strerror or exc}") from None


def _check_port(host: str, port: int) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        if os.name != "nt":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1" if host == "localhost" else host, port))
        except OSError as exc:
            raise BadSetting("port", f"{host}:{port} is not free: {exc.strerror or exc}") from None
