"""``sidecar`` command line: ``serve`` (the process Electron launches), ``schema``, ``version``,
``why TU RU`` (a pair's decision log, :mod:`sidecar.cli.why`) and ``groups …`` / ``senders …``
(sender health's manage API on a data dir, :mod:`sidecar.cli.senders`).

``sidecar serve`` prints exactly one JSON line on stdout when it is ready:
``{"event":"ready","port":N,"pid":P,"version":"…","protocol":1}``; logs go to stderr and the
data dir.  Exit codes: see :data:`EXIT_CODES` (also in ``sidecar serve --help`` and the README).

Shutdown is bounded (DESIGN §3): once SIGTERM, SIGINT, SIGHUP, stdin EOF or the
parent's death asks for it, a watchdog *thread* ends the process with exit code 5 if the orderly
close has not finished within :data:`SHUTDOWN_DEADLINE_S` (a thread, because a stuck event loop
could not run a timer of its own), and a second signal ends it at once with 128 + its number.
Each close stage has its own bound (:meth:`sidecar.app.root.SidecarApp.close`, the database close
here); a stage that overran or failed is *abandoned*: the exit log names it instead of saying
"shut down cleanly", and the process then ends at once (:func:`sidecar.cli.stop_guard.exit_now`)
without closing the event loop or joining threads — whatever was abandoned may still be running
and must neither call back into a closed loop nor hold the process past its 2 s.  The exit code
is still 0 (the shutdown was asked for and ended in time; nothing committed is lost).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import sqlite3
import sys
from typing import NoReturn

from sidecar import PROTOCOL_MAJOR, PROTOCOL_VERSION, __version__
from sidecar.protocol.contract import EXIT_CODES  # noqa: F401 - re-exported (the help's table, in serve_args)
from sidecar.cli.serve_args import add_serve
from sidecar.cli.stop_guard import EXIT_FORCED, SHUTDOWN_DEADLINE_S, StopGuard, exit_now  # noqa: F401 - re-exported

log = logging.getLogger("sidecar")

PARENT_POLL_S = 0.25  # how often the parent's death is looked for (one getppid call)


_ARGUMENT = re.compile(r"argument (?P<flag>[^:]+): (?P<problem>.*)", re.S)


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (bad input gets one line and exit 2),
    worded like every other refusal: ``sidecar: bad setting --clock (SIDECAR_CLOCK): …`` for a
    ``serve`` flag (each has its environment variable, :func:`sidecar.cli.preflight.flag_of`),
    ``sidecar: bad argument --after: …`` for another command's, ``sidecar: bad command line: …``
    for the rest (an unknown flag, a missing argument); each ends with where the help is."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"sidecar: {self._problem(message)} (see {self.prog} --help)\n")

    def _problem(self, message: str) -> str:
        m = _ARGUMENT.match(message)
        if m is None:
            return f"bad command line: {message}"
        flag, problem = m["flag"].split("/")[-1], m["problem"]
        dest = next((a.dest for a in self._actions if flag in a.option_strings), None)
        if self.prog == "sidecar serve" and dest is not None:
            return f"bad setting {flag} (SIDECAR_{dest.upper()}): {problem}"
        return f"bad argument {flag}: {problem}"


class _Version(argparse.Action):
    """``--version``; unlike argparse's own action it lets a broken pipe reach :func:`main` (141)
    instead of swallowing it and exiting 0."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        sys.stdout.write(f"sidecar {__version__} (protocol {PROTOCOL_VERSION})\n")
        sys.stdout.flush()
        parser.exit(0)


def _parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="sidecar", description="Operator workspace sidecar")
    ap.add_argument("--version", action=_Version, nargs=0, help="print the version and exit")
    sub = ap.add_subparsers(dest="cmd", required=True)
    add_serve(sub)
    sub.add_parser("schema", help="print the bridge protocol's JSON Schema (requests, answers, notifications)")
    sub.add_parser("version", help="print the version")
    from sidecar.cli.why import add_parser as add_why
    add_why(sub)
    from sidecar.cli.senders import add_parsers as add_senders
    add_senders(sub)
    from sidecar.cli.router import add_parsers as add_router
    add_router(sub)
    from sidecar.store.repair import add_parser as add_repair
    add_repair(sub)
    from sidecar.cli.report import add_parser as add_report
    add_report(sub)
    return ap


_STARTED_BY = os.getppid()  # our parent at process start: it may die before serve is ready


def main(argv: list[str] | None = None) -> int:
    """The ``sidecar`` command; its exit code.  Output into a pipe whose reader went away
    (``sidecar schema | head -c 1``) ends quietly with 141 (128 + SIGPIPE, as a shell tool does)
    for every command that prints — ``--version``'s own exit included."""
    try:
        try:
            return _main(argv)
        finally:
            sys.stdout.flush()  # inside the try: a buffered rest fails here, not at interpreter exit
    except BrokenPipeError:
        try:  # the interpreter's final flush must not print a traceback either
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except OSError:
            pass
        return 141


def _main(argv: list[str] | None) -> int:
    from sidecar.store.errors import DatabaseDamaged
    from sidecar.store.integrity import EXIT_DAMAGED

    args = _parser().parse_args(argv)
    try:
        return _command(args)
    except DatabaseDamaged as exc:  # a reader's open (why, rules, deliveries, groups, senders)
        print(f"sidecar: {exc}", file=sys.stderr)
        return EXIT_DAMAGED


def _command(args: argparse.Namespace) -> int:
    if args.cmd == "schema":
        from sidecar.cli.schema import json_schema
        json.dump(json_schema(), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    if args.cmd == "version":
        print(__version__)
        return 0
    if args.cmd == "why":
        from sidecar.cli.why import run as why
        return why(args)
    if args.cmd in ("groups", "senders"):
        from sidecar.cli.senders import run as manage
        return manage(args)
    if args.cmd in ("rules", "deliveries"):
        from sidecar.cli.router import run as router_cli
        return router_cli(args)
    if args.cmd == "report":
        from sidecar.cli.report import run as report
        return report(args)
    if args.cmd == "repair":
        from sidecar.store.repair import run as repair
        return repair(args)
    return serve(args)


def serve(args: argparse.Namespace) -> int:
    """Run ``sidecar serve`` to the end; the exit code.  For the process entry point only: it
    takes the stop signals for the rest of the process and runs the shutdown watchdog
    (:class:`sidecar.cli.stop_guard.StopGuard`) before anything is opened or printed."""
    from sidecar import logs
    from sidecar.cli.preflight import BadSetting, check_settings, load_settings

    overrides = {k: v for k, v in vars(args).items() if k != "cmd" and v is not None}
    if "allow_origin" in overrides:
        overrides["allow_origin"] = tuple(overrides["allow_origin"])
    try:
        settings = load_settings(overrides)
        check_settings(settings)
        logs.setup(settings.data_dir, settings.log_level)
    except BadSetting as exc:
        print(f"sidecar: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # the log file could not be made
        print(f"sidecar: bad setting --data-dir: {settings.data_dir}: {exc}", file=sys.stderr)
        return 2
    guard = StopGuard().install()  # from here on no stop signal is ever ignored or fatal
    left: list[str] = []  # the close stages abandoned (sidecar.app.aio "Abandoned is not done")
    try:
        with asyncio.Runner() as runner:
            try:
                code = runner.run(_serve(settings, guard, left))
            except Exception:  # noqa: BLE001 - exit code 1 with the traceback in the logs, not a crash
                log.exception("sidecar stopped by an unexpected error")
                code = 1
            if left:  # never close the loop (or join threads) under what may still run
                exit_now(code)
        return code
    except Exception:  # noqa: BLE001 - the loop's own teardown failed: exit code 1 as well
        log.exception("sidecar stopped by an unexpected error")
        return 1
    finally:
        guard.request("exit")  # whatever follows (interpreter teardown) is bounded too


async def _serve(settings, guard: StopGuard, left: list[str]) -> int:
    """The life of ``sidecar serve`` in the event loop; its exit code.  The close stages that
    were abandoned are added to ``left`` (the caller must not close the loop under them)."""
    from bridge.lifecycle import wait_for_shutdown
    from sidecar.cli import gcpolicy
    from sidecar.app.aio import bounded
    from sidecar.app.root import EXIT_STEP_FAILED, SidecarApp
    from sidecar.router.config import ConfigError
    from sidecar.store.db import Store
    from sidecar.store.errors import DatabaseDamaged, DataDirLocked, StoreError
    from sidecar.store.integrity import EXIT_DAMAGED

    loop = asyncio.get_running_loop()
    stop_signal: asyncio.Future[str] = loop.create_future()

    def on_stop(why: str) -> None:
        if not stop_signal.done():
            stop_signal.set_result(why)

    guard.attach(loop, on_stop)
    db = settings.data_dir / "sidecar.db"
    if db.is_dir():  # SQLite would only say "unable to open database file"
        print(f"sidecar: {db} is a directory, not a database; move it aside and start again",
              file=sys.stderr)
        return 4
    try:
        store = await Store.open(db, durability=settings.durability)
    except DataDirLocked as exc:
        print(f"sidecar: {exc}; stop that sidecar or choose another --data-dir", file=sys.stderr)
        return 3
    except DatabaseDamaged as exc:  # found at open, before anything wrote;
        print(f"sidecar: {exc}", file=sys.stderr)  # one line: not logged too (logs go to stderr)
        return EXIT_DAMAGED
    except (StoreError, sqlite3.DatabaseError, OSError) as exc:
        # never start on a database we cannot read: its unsent outbox may hold the only copy of
        # marker writes.  The operator's support moves the file aside; Stack restores the rest.
        print(f"sidecar: cannot open the database {db}: {exc}. Move it aside (it may hold unsent "
              f"Stack writes) and start again to restore from Stack.", file=sys.stderr)
        return 4  # one line: not logged too (logs go to stderr)
    app = None
    waits: set[asyncio.Future] = set()
    try:
        try:
            app = SidecarApp(settings, store)
        except ConfigError as exc:  # the router's config (env SIDECAR_ROUTER_*, router.toml)
            print(f"sidecar: bad setting: {exc}", file=sys.stderr)
            return 2
        try:
            port = await app.start()
        except OSError as exc:  # the port was taken between the check and the bind
            print(f"sidecar: bad setting --port (SIDECAR_PORT): {settings.host}:{settings.port} "
                  f"is not free: {exc.strerror or exc}", file=sys.stderr)
            return 2
        gcpolicy.apply()  # start-up is done: freeze it, fewer young collections
        # every stop hook is in place before "ready": signals since install(), stdin EOF and the
        # parent (polled 4×/s: its death must end us within the 2 s promise) from here on
        others = asyncio.ensure_future(wait_for_shutdown(
            poll_s=PARENT_POLL_S, original_ppid=_STARTED_BY, signals=False))
        fatal = asyncio.ensure_future(app.fatal.wait())  # a step failed: crash-only (DESIGN §13)
        asked = asyncio.ensure_future(app.shutdown_requested.wait())  # a sidecar.shutdown request
        waits = {stop_signal, others, fatal, asked}
        await asyncio.sleep(0)  # noqa: TID251 - lets wait_for_shutdown install its hooks first
        if not stop_signal.done():
            ready = {"event": "ready", "port": port, "pid": os.getpid(), "version": __version__,
                     "protocol": PROTOCOL_MAJOR}
            sys.stdout.write(json.dumps(ready, separators=(",", ":")) + "\n")
            sys.stdout.flush()
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        if stop_signal.done():
            reason = stop_signal.result()
        elif others.done() and not others.cancelled():
            reason = others.result()
        elif asked.done():
            reason = "sidecar.shutdown request"
        else:
            reason = "a step failed"
        guard.request(reason)
        log.info("shutting down: %s", reason)
    finally:
        guard.request("shutdown")  # an error too: from here the watchdog bounds the close
        for w in waits:
            if w is not stop_signal:
                w.cancel()
        if app is not None:
            left.extend(await app.close(final=False))  # the connection stays for goodbye()
        # releases the data-dir lock; abandoned, it loses nothing committed (SQLite's WAL,
        # sidecar.store.db "Closing") and the OS releases the lock when the process ends
        await bounded(store.close(), 0.3, "database close", left)
        if app is not None:  # sidecar.shutdown is answered once the store is closed, then 1001
            await app.goodbye(left)
    if left:
        log.warning("shut down, abandoned: %s — nothing committed is lost (SQLite WAL); unsent "
                    "Stack writes stay queued for the next start", "; ".join(left))
    if app is not None and app.failed is not None:
        print(f"sidecar: a step failed and nothing of it was kept ({app.failed!r}); exiting "
              f"{EXIT_STEP_FAILED} so that a restart restores from SQLite and Stack", file=sys.stderr)
        return EXIT_STEP_FAILED
    if not left:
        log.info("shut down cleanly")
    return 0


def arm_shutdown_guard(deadline_s: float = SHUTDOWN_DEADLINE_S) -> StopGuard:
    """A started :class:`StopGuard` whose deadline runs from now (for embedding and tests): the
    process ends within ``deadline_s`` seconds (exit 5) and at once on a stop signal (128 + N)."""
    guard = StopGuard(deadline_s).install()
    guard.request("armed")
    return guard


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
