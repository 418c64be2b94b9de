"""Settings (pydantic-settings): environment ``SIDECAR_*``, overridden by ``sidecar serve`` flags.

A field without a ``serve`` flag is set by the environment only; its ``description`` is its line
in ``sidecar serve --help`` (``sidecar.cli.serve_args.env_only_help``), and a bad value is named by
the variable alone (``sidecar.cli.preflight.flag_of``).

The data dir defaults to the OS's per-user app data folder (platformdirs), e.g.
``~/.local/share/operator-sidecar`` on Linux, ``%LOCALAPPDATA%\\operator-sidecar`` on Windows.
"""
from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from platformdirs import user_data_path
from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


LOG_LEVELS = tuple(logging.getLevelName(n) for n in (10, 20, 30, 40, 50))  # DEBUG … CRITICAL


def default_data_dir() -> Path:
    return user_data_path("operator-sidecar", appauthor=False)


#: seconds: the least a wall-clock wait setting (``*_timeout_s``) may be.  Below it a wait is no
#: wait on any machine (1e-9 s was taken and failed every request it guards; the breaker at stop 33)
MIN_WAIT_S = 0.01


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SIDECAR_", extra="ignore")

    token: str = Field(default="", repr=False)  # per-launch secret (env SIDECAR_TOKEN)
    token_file: Path | None = None  # alternatively a file holding it
    host: str = Field(default="127.0.0.1",  # never anything but loopback (DESIGN §3)
                      description="loopback address to bind: 127.0.0.1 (default), localhost or ::1")
    port: int = Field(default=0, ge=0, le=65535)  # 0 = a free port, reported in the ready line
    data_dir: Path = Field(default_factory=default_data_dir)
    clock: Literal["wall", "virtual"] = "wall"
    time_scale: float | None = Field(default=None, gt=0)  # K: real time K× faster (live demos)
    stack_url: str | None = None  # Stack base URL; None = no Stack (local only)
    stack_startup_timeout_s: float = Field(default=3.0, ge=MIN_WAIT_S,  # login's wait for startup data
                                           description="login's wait for Stack's startup data, s (default 3)")
    # a Stack request's seconds per phase (connect, read, write, pool wait); a whole request 2x
    stack_timeout_s: float = Field(default=5.0, ge=MIN_WAIT_S, description="a Stack request's wait per phase "
                                   "(connect, read, write, pool), s; a whole request twice that (default 5)")
    stack_concurrency: int = Field(default=4, ge=1, le=64,  # Stack writes in flight (distinct pairs)
                                   description="Stack writes in flight, 1-64 (default 4)")
    # virtual clock: Stack's new writes are flushed at most every N s of virtual time, all in
    # one request (sidecar.router.cadence); 0 = at once.  The wall clock always sends at once.
    stack_flush_interval_s: float = Field(default=10.0, ge=0, le=3600)
    seed: str = "0"  # deployment seed of the keyed randomness (DESIGN §5)
    durability: Literal["normal", "full"] = "normal"  # SQLite synchronous mode (docs/decisions.md)
    max_frame: int = Field(default=1 << 20, ge=1024,  # bytes per websocket frame
                           description="bytes per websocket frame, at least 1024 (default 1048576)")
    # exact Origin values accepted (browsers send Origin; Electron main does not): the flag
    # --allow-origin repeats, the environment SIDECAR_ALLOW_ORIGIN is a comma-separated list
    allow_origin: Annotated[tuple[str, ...], NoDecode] = ()
    request_timeout_s: float = Field(default=15.0, ge=MIN_WAIT_S,  # platform.request answer timeout (real s)
                                     description="wait for Electron's answer to a platform request, s (default 15)")
    handshake_timeout_s: float = Field(default=10.0, ge=MIN_WAIT_S, description="a new bridge connection's wait "
                                       "for its opening handshake, and again for its auth frame, s (default 10)")
    log_level: str = "INFO"

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, v: str) -> str:
        name = v.strip().upper()
        if name not in LOG_LEVELS:
            # no {v!r} here: pydantic's error carries the input, and the one line shows it as "(got …)"
            raise ValueError(f"unknown log level; use one of {', '.join(LOG_LEVELS)}")
        return name

    @field_validator("time_scale", "stack_startup_timeout_s", "stack_timeout_s", "request_timeout_s",
                     "handshake_timeout_s", "stack_flush_interval_s")
    @classmethod
    def _finite(cls, v: float | None) -> float | None:
        if v is not None and not math.isfinite(v):
            raise ValueError("must be a finite number")
        return v

    @field_validator("stack_url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is not None and not (v.startswith("http://") or v.startswith("https://")):
            raise ValueError(f"{v!r} is not an http:// or https:// URL")
        return v

    @field_validator("host")
    @classmethod
    def _loopback_only(cls, v: str) -> str:
        if v not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError("the sidecar binds loopback only (127.0.0.1, localhost or ::1)")
        return v

    @field_validator("allow_origin", mode="before")
    @classmethod
    def _origins(cls, v: object) -> object:
        """A comma-separated string (the environment) becomes the list; each item must be an
        origin as a browser sends it — ``scheme://host[:port]``, nothing after — or it could
        never match (a newcomer's ``--allow-origin notanorigin`` was accepted and did nothing)."""
        items = [p.strip() for p in v.split(",") if p.strip()] if isinstance(v, str) else v
        if not isinstance(items, (list, tuple)):
            return items  # pydantic says what is wrong with it
        for item in items:
            if not isinstance(item, str):
                continue
            parts = urlsplit(item)
            if not (parts.scheme and parts.hostname) or parts.path or parts.query or parts.fragment \
                    or "@" in parts.netloc or item != f"{parts.scheme}://{parts.netloc}":
                raise ValueError(f"{item!r} is not an origin (scheme://host[:port], e.g. app://operator)")
        return tuple(items)

    def resolved_token(self) -> str:
        """The per-launch token: from ``--token-file`` when one is given (flags win, README; the
        file must then be readable and non-empty, even if SIDECAR_TOKEN is set), else from
        SIDECAR_TOKEN.  Raises OSError (the file cannot be read) or ValueError (no token)."""
        if self.token_file is not None:
            tok = self.token_file.read_text().strip()
            if not tok:
                raise ValueError(f"{self.token_file} is empty")
            return tok
        if self.token:
            return self.token
        raise ValueError("no token: set SIDECAR_TOKEN or --token-file (Electron passes a per-launch secret)")
