"""``sidecar`` command line: ``serve`` (the process Electron launches) and ``schema``.

``sidecar serve`` prints exactly one JSON line on stdout when it is ready:
``{"event":"ready","port":N,"pid":P,"version":"…","protocol":1}``; logs go to stderr and the
data dir.  Exit codes: 0 clean shutdown (SIGTERM/SIGINT, stdin EOF, parent death), 2 bad
configuration, 3 the data dir is locked by another sidecar, 4 the database cannot be opened
(corrupted or unreadable: it is left untouched for support), 5 a step failed to commit (or
crashed): nothing of it was kept, and a restart restores from SQLite and Stack (DESIGN §13).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sqlite3
import sys
from pathlib import Path

from sidecar import PROTOCOL_VERSION, __version__

log = logging.getLogger("sidecar")


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="sidecar", description="Operator workspace sidecar")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="run the sidecar (Electron launches this)")
    s.add_argument("--port", type=int, help="websocket port on 127.0.0.1 (0 = free port)")
    s.add_argument("--data-dir", type=Path, help="SQLite and logs (default: per-OS app data)")
    s.add_argument("--clock", choices=["wall", "virtual"], help="virtual: moved by clock.advance_to")
    s.add_argument("--time-scale", type=float, help="run real time K times faster (demos)")
    s.add_argument("--stack-url", help="Stack base URL, e.g. http://127.0.0.1:8080")
    s.add_argument("--seed", help="deployment seed of the keyed randomness")
    s.add_argument("--token-file", type=Path, help="file with the per-launch token (else SIDECAR_TOKEN)")
    s.add_argument("--durability", choices=["normal", "full"], help="SQLite synchronous mode")
    s.add_argument("--allow-origin", action="append", dest="allowed_origins",
                   help="an Origin allowed to connect (repeatable; default none)")
    s.add_argument("--log-level", help="DEBUG, INFO, WARNING …")
    sub.add_parser("schema", help="print the bridge protocol's JSON Schema")
    sub.add_parser("version", help="print the version")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.cmd == "schema":
        from sidecar.protocol import json_schema
        json.dump(json_schema(), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    if args.cmd == "version":
        print(__version__)
        return 0
    return serve(args)


def serve(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from sidecar.config import Settings

    overrides = {k: v for k, v in vars(args).items() if k != "cmd" and v is not None}
    if "allowed_origins" in overrides:
        overrides["allowed_origins"] = tuple(overrides["allowed_origins"])
    try:
        settings = Settings(**overrides)
        settings.resolved_token()
    except (ValidationError, ValueError, OSError) as exc:
        print(f"sidecar: bad configuration: {exc}", file=sys.stderr)
        return 2
    from sidecar import logs
    if settings.data_dir.exists() and not settings.data_dir.is_dir():
        print(f"sidecar: bad configuration: data dir {settings.data_dir} is not a folder", file=sys.stderr)
        return 2
    try:
        logs.setup(settings.data_dir, settings.log_level)
    except OSError as exc:
        print(f"sidecar: bad configuration: data dir {settings.data_dir}: {exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_serve(settings))
    except KeyboardInterrupt:
        return 0


async def _serve(settings) -> int:
    from bridge.lifecycle import wait_for_shutdown
    from sidecar.app import EXIT_STEP_FAILED, SidecarApp
    from sidecar.store.db import Store
    from sidecar.store.errors import DataDirLocked, StoreError

    db = settings.data_dir / "sidecar.db"
    try:
        store = await Store.open(db, durability=settings.durability)
    except DataDirLocked as exc:
        print(f"sidecar: {exc} — another sidecar uses this data dir", file=sys.stderr)
        return 3
    except (StoreError, sqlite3.DatabaseError, OSError) as exc:
        # never start on a database we cannot read: its unsent outbox may hold the only copy of
        # marker writes.  The operator's support moves the file aside; Stack restores the rest.
        print(f"sidecar: cannot open the database {db}: {exc}. Move it aside (it may hold unsent "
              f"Stack writes) and start again to restore from Stack.", file=sys.stderr)
        log.error("cannot open %s: %r", db, exc)
        return 4
    app = SidecarApp(settings, store)
    try:
        port = await app.start()
        ready = {"event": "ready", "port": port, "pid": os.getpid(), "version": __version__,
                 "protocol": PROTOCOL_VERSION}
        sys.stdout.write(json.dumps(ready, separators=(",", ":")) + "\n")
        sys.stdout.flush()
        shutdown = asyncio.ensure_future(wait_for_shutdown())
        fatal = asyncio.ensure_future(app.fatal.wait())
        await asyncio.wait({shutdown, fatal}, return_when=asyncio.FIRST_COMPLETED)
        for f in (shutdown, fatal):
            f.cancel()
        reason = shutdown.result() if shutdown.done() and not shutdown.cancelled() else "a step failed"
        log.info("shutting down: %s", reason)
    finally:
        await app.close()
        await store.close()
    if app.failed is not None:
        print(f"sidecar: a step failed and nothing of it was kept ({app.failed!r}); exiting "
              f"{EXIT_STEP_FAILED} so that a restart restores from SQLite and Stack", file=sys.stderr)
        return EXIT_STEP_FAILED
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
