"""``sidecar groups …`` and ``sidecar senders …``: the manage API of seed 000 §6 (DESIGN §10
"Management") from the command line, on a sidecar's data dir, with readable tables.

Rules / theory of operation
---------------------------
* Reads (``groups list|get``, ``senders list|get|history``) open ``<data dir>/sidecar.db``
  read-only, so they work beside a running sidecar.
* Changes (``groups create|patch|delete|assign|unassign``, ``senders recover``) take the data
  dir's lock like the sidecar does: while a sidecar runs on it they are refused (exit 3) — use
  the bridge methods then (the running process owns the state).  Each change is the same pure
  manage function the bridge calls, committed in ONE transaction; bad input is one line naming
  the field and exit 2, and nothing is written.
* Senders known here: ``stack``, the targets of ``<data dir>/router.toml`` / the environment,
  and every sender with stored state.  ``--json`` prints the bridge's answer shapes.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sidecar.core.clock import WallClock
from sidecar.core.rng import KeyedRandom
from sidecar.store.integrity import open_checked

from sidecar.cli.when import add_window
from sidecar.senders import manage
from sidecar.senders.codes import meaning
from sidecar.senders.health import HealthMachine
from sidecar.senders.manage import ManageError, Registry, with_senders
from sidecar.senders.store import registry_ops
from sidecar.senders.io.storage import load_history, load_registry

DB_NAME = "sidecar.db"
EXIT_BAD, EXIT_LOCKED = 2, 3
_FIELDS = ("failed_in_row", "cooldown_delay_from", "cooldown_delay_to", "send_from_message_interval",
           "send_to_message_interval", "from_time", "to_time")


#: ``groups create/patch --help`` (seed 000 §6's fields; units as the bridge's groups.create takes them)
_FIELD_HELP = {
    "failed_in_row": "failures in a row that start a cooldown",
    "cooldown_delay_from": "a cooldown's shortest length, minutes",
    "cooldown_delay_to": "a cooldown's longest length, minutes",
    "send_from_message_interval": "shortest pause between two sends, minutes (fractions allowed)",
    "send_to_message_interval": "longest pause between two sends, minutes (fractions allowed)",
    "from_time": "the group's window starts, HH:MM[:SS] UTC",
    "to_time": "the group's window ends, HH:MM[:SS] UTC",
}


def add_parsers(sub: argparse._SubParsersAction) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--data-dir", help="the sidecar's data dir (default: the per-user one)")
    common.add_argument("--json", action="store_true", help="JSON lines (the bridge's answer shapes)")
    g = sub.add_parser("groups", help="sender groups (docs/senders.md): list, create, patch, assign …")
    gs = g.add_subparsers(dest="op", required=True)
    for name, hlp in (("list", "every group, highest priority first"), ("get", "one group")):
        p = gs.add_parser(name, help=hlp, parents=[common])
        if name == "get":
            p.add_argument("id", help="the group's id (groups list shows it)")
    for name in ("create", "patch"):
        p = gs.add_parser(name, parents=[common], help=f"{name} a group (fields in docs/senders.md; delays in "
                                                      "minutes, send intervals in minutes (fractions allowed), HH:MM[:SS] UTC windows)")
        if name == "patch":
            p.add_argument("id", help="the group's id (groups list shows it)")
        p.add_argument("--name", required=name == "create", help="the group's name" + (" (required)" if name == "create" else ""))
        p.add_argument("--priority", type=int, required=name == "create",
                       help="unique; of a sender's groups whose window covers now, the highest applies" + (" (required)" if name == "create" else ""))
        for f in _FIELDS:
            p.add_argument("--" + f.replace("_", "-"), dest=f, help=_FIELD_HELP[f],
                           type=str if f.endswith("_time") else float)
    p = gs.add_parser("delete", help="delete a group (its assignments go with it)", parents=[common])
    p.add_argument("id", help="the group's id (groups list shows it)")
    for name, hlp in (("assign", "put a sender in groups (it keeps the groups it is in)"),
                      ("unassign", "take a sender out of groups")):
        p = gs.add_parser(name, help=hlp, description=hlp[0].upper() + hlp[1:] + ".", parents=[common])
        p.add_argument("sender", help="the sender's id")
        p.add_argument("groups", nargs="+", metavar="GROUP_ID", help="one or more group ids")
    s = sub.add_parser("senders", help="sender health (docs/senders.md): list, get, history, recover")
    ss = s.add_subparsers(dest="op", required=True)
    ss.add_parser("list", help="every sender with its state", parents=[common])
    for name in ("get", "history", "recover"):
        p = ss.add_parser(name, help={"get": "one sender", "history": "its transitions (codes 100–109, each with its meaning)",
                                      "recover": "manual recovery from cooldown or Need Check (106)"}[name],
                           parents=[common])
        p.add_argument("sender", help="the sender's id (senders list shows it)")
        if name == "history":  # the one time syntax of every --since/--until
            add_window(p, WallClock().now, "transitions")
        if name == "recover":
            p.add_argument("--by", default="cli", help="who recovers it, kept in its history (default: cli)")


def run(args: argparse.Namespace) -> int:
    from sidecar.config import default_data_dir

    data_dir = Path(args.data_dir or default_data_dir())
    try:
        if args.op in ("list", "get", "history"):
            return _show(args, data_dir)
        return asyncio.run(_change(args, data_dir))
    except ManageError as exc:
        print(f"sidecar {args.cmd} {args.op}: bad input: {exc}", file=sys.stderr)
        return EXIT_BAD


def _senders(data_dir: Path) -> list[str]:
    from sidecar.router.config import ConfigError, load_config

    try:
        return ["stack", *load_config(data_dir).targets]
    except ConfigError:
        return ["stack"]


def _read(data_dir: Path, fn: Any, *a: Any) -> Any:
    path = data_dir / DB_NAME
    if not path.is_file():
        raise ManageError("--data-dir", f"no sidecar database at {path}")
    try:
        conn = open_checked(path)  # DatabaseDamaged: one line and exit 7 (sidecar.cli)
    except sqlite3.Error as exc:
        raise ManageError("--data-dir", f"cannot read {path}: {exc}") from None
    try:
        return fn(conn, *a)
    except sqlite3.Error as exc:
        raise ManageError("--data-dir", f"cannot read {path}: {exc}") from None
    finally:
        conn.close()


def _show(args: argparse.Namespace, data_dir: Path) -> int:
    reg = with_senders(_read(data_dir, load_registry), _senders(data_dir))
    if args.cmd == "groups":
        out: Any = manage.groups_list(reg) if args.op == "list" else [manage.groups_get(reg, args.id)]
        return _print(args, out, _group_table)
    if args.op == "history":
        manage.sender_view(reg, args.sender)
        rows = _read(data_dir, load_history, args.sender, args.since or 0.0, 5000)
        until = args.until if args.until is not None else float("inf")
        return _print(args, [{"at": r.at, "code": r.code, "what": meaning(r.code)[0], "meaning": meaning(r.code)[1],
                              "note": r.note} for r in rows if r.at < until], _history_table)
    out = manage.senders_list(reg) if args.op == "list" else [manage.sender_view(reg, args.sender)]
    return _print(args, out, _sender_table)


async def _change(args: argparse.Namespace, data_dir: Path) -> int:
    from sidecar.store import DataDirLocked, Store

    try:
        store = await Store.open(data_dir / DB_NAME)
    except DataDirLocked as exc:
        print(f"sidecar {args.cmd} {args.op}: {exc} — a running sidecar owns this data dir: use its "
              f"bridge methods ({args.cmd}.*) instead, or stop it first", file=sys.stderr)
        return EXIT_LOCKED
    async with store:
        before: Registry = with_senders(await store.read(load_registry), _senders(data_dir))
        now = WallClock().now()
        history: list = []
        if args.cmd == "senders":  # recover
            after, history = manage.senders_recover(before, HealthMachine(KeyedRandom("cli")), args.sender,
                                                    now, by=args.by)
        elif args.op == "create":
            gid = f"grp-{int(KeyedRandom('cli').unit('group-id', args.name, now) * 2**48):012x}"
            after = manage.groups_create(before, gid, _body(args))
            args.id = gid
        elif args.op == "patch":
            after = manage.groups_patch(before, args.id, _body(args))
        elif args.op == "delete":
            after = manage.groups_delete(before, args.id)
        else:
            mode = "add" if args.op == "assign" else "remove"
            after = manage.assignments(before, mode, [{"sender": args.sender, "groups": args.groups}])
        await store.commit(registry_ops(before, after, history))
    if args.cmd == "senders":
        if not history and not args.json:  # recover on an active sender: a no-op
            print(f"{args.sender} is active: nothing to recover")
        return _print(args, [manage.sender_view(after, args.sender)], _sender_table)
    if args.op in ("create", "patch"):
        return _print(args, [manage.groups_get(after, args.id)], _group_table)
    if args.op in ("assign", "unassign"):
        return _print(args, [manage.sender_view(after, args.sender)], _sender_table)
    print(f"deleted group {args.id}")
    return 0


def _body(args: argparse.Namespace) -> dict:
    body = {k: getattr(args, k) for k in ("name", "priority", *_FIELDS) if getattr(args, k, None) is not None}
    for k in ("failed_in_row", "priority"):
        if isinstance(body.get(k), float) and float(body[k]).is_integer():
            body[k] = int(body[k])
    return body


def _utc(t: float | None) -> str:
    return "—" if t is None else datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _print(args: argparse.Namespace, rows: list[dict], table: Any) -> int:
    if args.json:
        for row in rows:
            sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")
        return 0
    from sidecar.cli.why import pipe_console_class

    console = pipe_console_class()(width=None if sys.stdout.isatty() else 200)
    console.print(table(rows))
    return 0


def _group_table(rows: list[dict]) -> Any:
    from rich.table import Table

    t = Table(title="Sender groups (the highest priority covering group applies at a failure)",
              title_justify="left")
    for col in ("id", "name", "priority", "failed in row", "cooldown delay (min)", "send interval (min)",
                "window (UTC)", "senders"):
        t.add_column(col, overflow="fold")
    for g in rows:
        delay = f"{g['cooldown_delay_from']:g}–{g['cooldown_delay_to']:g}" if g["cooldown_delay_to"] else "ladder"
        pace = (f"{g['send_from_message_interval']:g}–{g['send_to_message_interval']:g}"
                if g["send_to_message_interval"] else "—")
        window = f"{g['from_time']} → {g['to_time']}" if g["from_time"] else "always"
        t.add_row(g["id"], g["name"], str(g["priority"]), str(g["failed_in_row"] or "2 (default)"), delay,
                  pace, window, ", ".join(g["senders"]) or "—")
    return t


def _sender_table(rows: list[dict]) -> Any:
    from rich.table import Table

    t = Table(title="Senders", title_justify="left")
    for col in ("sender", "state", "failed in row", "cooldowns since reset", "cooldown end (UTC)",
                "next send (UTC)", "groups"):
        t.add_column(col, overflow="fold")
    style = {"cooldown": "yellow", "need_check": "bold red"}
    for s in rows:
        state = s["state"] + (f" (path {s['need_check_path']})" if s["need_check_path"] else "")
        t.add_row(s["sender"], state, str(s["failed_in_row"]), str(s["cooldown_times"]), _utc(s["cooldown_end"]),
                  _utc(s["next_send_at"] or None), ", ".join(s["groups"]) or "—", style=style.get(s["state"]))
    return t


def _history_table(rows: list[dict]) -> Any:
    from rich.table import Table

    t = Table(title="Sender history", title_justify="left")
    for col in ("time (UTC)", "code", "what", "meaning", "note"):
        t.add_column(col, overflow="fold")
    for r in rows:
        t.add_row(_utc(r["at"]), str(r["code"]), r["what"], r["meaning"], r["note"])
    return t
