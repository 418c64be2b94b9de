"""``sidecar-stub senders simulate``: the fleet simulator's answer to a shift lead (seed 000 §5–§6).

Runs :func:`sidecar.senders.simulate.simulate` (the health machine alone on virtual time) twice —
the *recipe* (the lead's groups on a subset of senders) and the *baseline* (the same fleet, the
same seed, no groups) — and prints them side by side in one table: cooldowns, verdicts, Need
Check, failed customer sends and the **held-back time** of customer sends (the cost a lead trades:
seconds a send waited for group pacing, a cooldown, its rest, Need Check), for the fleet and for
the *cohort* (the senders in groups), then the claims seed 000 states for that recipe
(:mod:`electron_stub.fleet_claims`).

Who is in groups: ``--group`` (repeatable: several groups on the same senders, seed 000 §6 "Сендер
може бути в кількох групах"; the day/night recipe is two) on a ``--group-share`` of the senders
(default 1: all; seed 000 §6 "Що є в prod": 132 of 660 = 0.2), or ``--senders-from DATA_DIR``:
the senders and their groups from a sidecar data dir's ``sidecar.db`` (``sender_state``,
``sender_groups``, ``sender_assignments``).  No groups at all: the model's prod-like mix (§5).
``--json`` prints the result as one JSON object; ``--html FILE`` writes the tables as one
self-contained page (rich's HTML export).  Bad input: :class:`InputError` (one line, exit 2).
"""
from __future__ import annotations

import io
import json
import sqlite3
import statistics
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from electron_stub.report_view import PipeConsole

from sidecar.senders.groups import Group, GroupError, validate_group
from sidecar.senders.io.storage import load_registry
from sidecar.senders.manage import STACK
from sidecar.senders.simulate import Cohort, Stats, sender_names, share_cohort, simulate

from .fleet_claims import claims


class InputError(ValueError):
    """Bad command-line input for the simulator (the CLI prints it and exits 2)."""


def parse_group(text: str, index: int = 1, count: int = 1, others: list[Group] | None = None) -> Group:
    """``key=value,…`` of the group fields (seed 000 §6; delays and send intervals in minutes,
    windows ``HH:MM[:SS]`` UTC) → a validated :class:`Group`, the ``index``-th of ``count``
    ``--group``s: name ``group <index>`` and priority ``count − index + 1`` unless given (the
    first given wins an overlap); priorities unique among ``others``.  Raises
    :class:`InputError` naming the field."""
    body: dict = {"name": f"group {index}", "priority": count - index + 1}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep:
            raise InputError(f"--group: {part!r} is not key=value")
        key = key.strip()
        v = value.strip()
        body[key] = v if key in ("from_time", "to_time", "name") else _num(key, v)
    try:
        return validate_group(body, id=f"g{index}", others=others or [])
    except GroupError as exc:
        raise InputError(f"--group: {exc}") from None


def _num(key: str, v: str) -> float | int:
    try:
        return int(v) if v.lstrip("-").isdigit() else float(v)
    except ValueError:
        raise InputError(f"--group: {key}: {v!r} is not a number") from None



def load_fleet(data_dir: str) -> tuple[list[str], list[tuple[Group, ...]]]:
    """The senders of a sidecar data dir (``DATA_DIR/sidecar.db``: every sender with a state or an
    assignment, but the built-in ``stack``, which is the sidecar's own backend, DESIGN §10) and
    each one's groups, read-only.  Raises :class:`InputError` for a missing or unreadable
    database or one without senders."""
    db = Path(data_dir) / "sidecar.db"
    if not db.is_file():
        raise InputError(f"--senders-from: {db} does not exist (give a sidecar's data dir)")
    try:
        conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
        try:
            reg = load_registry(conn)
        finally:
            conn.close()
    except (sqlite3.Error, ValueError) as exc:
        raise InputError(f"--senders-from: {db}: cannot read the sender registry ({exc})") from None
    names = sorted((set(reg.senders) | set(reg.assignments)) - {STACK})
    if not names:
        raise InputError(f"--senders-from: {db} has no senders")
    return names, [tuple(reg.groups_of(n)) for n in names]


def _held(completed: list[float], open_: list[float]) -> dict[str, Any]:
    waits = sorted(completed)
    p95 = statistics.quantiles(waits, n=20, method="inclusive")[-1] if len(waits) >= 2 else (waits[0] if waits else None)
    return {"total_s": sum(completed) + sum(open_), "held_sends": len(completed),
            "median_s": statistics.median(waits) if waits else None, "p95_s": p95,
            "open_sends": len(open_), "open_s": sum(open_)}


def _cohort(c: Cohort) -> dict[str, Any]:
    return {"senders": c.senders, "sends": c.sends, "failed": c.failed, "cooldown_starts": c.starts,
            "starts_per_sender": c.starts / c.senders if c.senders else 0.0,
            "verdicts": dict(c.verdicts), "need_check": c.need_check,
            "mean_cooldown_s": statistics.fmean(c.cooldown_total) if c.cooldown_total else None,
            "held": _held(c.held, c.held_open), "fail_to_need_check": c.fail_to_need_check}


BUCKETS = (("< 15 min", 0, 900), ("15–60 min", 900, 3600), ("60–120 min", 3600, 7201),
           ("2–12 h", 7201, 43200), ("12–14 h", 43200, 50401))  # seed 000 §5 "Планова тривалість"


def summary(st: Stats) -> dict[str, Any]:
    """One run as plain data (seconds, counts): what the table and ``--json`` show."""
    return {"senders": st.senders, "days": st.days, "sends": st.sends, "failed": st.failed,
            "cooldown_starts": sum(st.starts.values()), "starts_by_number": {str(k): v for k, v in sorted(st.starts.items())},
            "verdicts": dict(st.verdicts), "need_check": dict(st.need_check),
            "warmup_sent": st.warmup_sent, "warmup_confirmed": st.warmup_confirmed, "extensions": st.extensions,
            "planned": {name: sum(lo <= d < hi for d in st.planned) for name, lo, hi in BUCKETS},
            "held": _held(st.held, st.held_open), "held_dead_s": st.held_dead,
            "worst_first_s": max(st.first_total) if st.first_total else None,
            "window": dict(st.window), "cohort": _cohort(st.cohort)}


def _h(s: float | None) -> str:
    return "—" if s is None else f"{s / 3600:,.1f} h"


def _m(s: float | None) -> str:
    return "—" if s is None else f"{s / 60:.1f} min"


def _rows(r: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, cell) of one run, in the table's order."""
    ex = sum(r["verdicts"].values()) or 1
    c = r["cohort"]
    rows = [("customer sends", f"{r['sends']:,}"), ("failed sends", f"{r['failed']:,}"),
            ("cooldown starts", f"{r['cooldown_starts']:,}")]
    rows += [(f"exits {v}", f"{r['verdicts'].get(v, 0):,} ({100 * r['verdicts'].get(v, 0) / ex:.1f} %)")
             for v in ("proven", "fail-open", "neutral")]
    starts = r["cooldown_starts"] or 1
    rows += [(f"cooldown #{n} starts (§5)", f"{k:,} ({100 * k / starts:.1f} %)") for n, k in r["starts_by_number"].items()]
    rows += [(f"planned {name} (§5)", f"{k:,} ({100 * k / starts:.1f} %)") for name, k in r["planned"].items()]
    rows += [("warm-ups sent / confirmed, extensions", f"{r['warmup_sent']:,} / {r['warmup_confirmed']:,}, {r['extensions']:,}"),
             ("Need Check path A / B", f"{r['need_check'].get('A', 0):,} / {r['need_check'].get('B', 0):,}"),
             ("held back, live senders: total", _h(r["held"]["total_s"])),
             ("… sends held", f"{r['held']['held_sends']:,}"),
             ("… median / p95 of a held send", f"{_m(r['held']['median_s'])} / {_m(r['held']['p95_s'])}"),
             ("… still waiting at the end", f"{r['held']['open_sends']:,} ({_h(r['held']['open_s'])})"),
             ("held back, dead devices", _h(r["held_dead_s"]))]
    if c["senders"]:
        rows += [(f"cohort ({c['senders']} senders): sends / failed", f"{c['sends']:,} / {c['failed']:,}"),
                 ("cohort: cooldown starts per sender", f"{c['starts_per_sender']:.2f}"),
                 ("cohort: mean cooldown", _h(c["mean_cooldown_s"])),
                 ("cohort: held back total", _h(c["held"]["total_s"])),
                 ("cohort: median / p95 of a held send", f"{_m(c['held']['median_s'])} / {_m(c['held']['p95_s'])}"),
                 ("cohort: Need Check", f"{c['need_check']:,}")]
    return rows


def render(result: dict[str, Any], console: Console) -> None:
    """The comparison table and the claims table of :func:`compute`'s ``result``."""
    r, b = result["recipe"], result["baseline"]
    console.print(f"[bold]Fleet simulation[/]: {r['senders']} senders × {r['days']:g} days, seed {result['seed']} — "
                  f"{result['who']}")
    for g in result["groups"]:
        console.print(f"  group {g['name']!r}: " + ", ".join(f"{k}={v}" for k, v in g.items() if k != "name" and v not in (None, 0, 0.0)))
    t = Table(title="Recipe beside the baseline (same fleet, same seed, no groups)")
    t.add_column("figure")
    t.add_column(result["recipe_label"], justify="right")
    t.add_column("baseline", justify="right")
    rr, br = dict(_rows(r)), dict(_rows(b))
    for label in dict.fromkeys([*rr, *br]):  # ladder numbers one run reached and the other not
        t.add_row(label, rr.get(label, "—"), br.get(label, "—"))
    console.print(t)
    t = Table(title="The seed's claims for this recipe (seed 000)")
    for col in ("claim", "source", "seed", result["recipe_label"], "baseline"):
        t.add_column(col, justify="right" if col in (result["recipe_label"], "baseline") else "left")
    for row in result["claims"]:
        t.add_row(*(row[k] for k in ("claim", "source", "seed", "recipe", "baseline")))
    console.print(t)


def compute(senders: int | None, days: float, group_texts: list[str], share: float | None,
            senders_from: str | None, seed: int) -> dict[str, Any]:
    """Check the arguments, run the recipe and the baseline, return the result (plain data)."""
    if days <= 0 or days > 366:
        raise InputError("--days must be > 0 and ≤ 366")
    if senders is not None and senders < 1:
        raise InputError("--senders must be ≥ 1")
    if share is not None and not 0 <= share <= 1:
        raise InputError("--group-share must be from 0 to 1")
    if senders_from is not None and (group_texts or share is not None or senders is not None):
        raise InputError("--senders-from takes the senders and their groups from the data dir; "
                         "leave out --senders, --group and --group-share")
    if share is not None and not group_texts:
        raise InputError("--group-share needs at least one --group")
    groups: list[Group] = []
    for i, text in enumerate(group_texts, 1):
        groups.append(parse_group(text, i, len(group_texts), others=groups))
    fleet_groups: list[tuple[Group, ...]] | None
    if senders_from is not None:
        names, fleet_groups = load_fleet(senders_from)
        cohort = [bool(gs) for gs in fleet_groups]
        groups = sorted({g.id: g for gs in fleet_groups for g in gs}.values(), key=lambda g: -g.priority)
        who = f"senders and groups from {senders_from}: {sum(cohort)} of {len(names)} senders in groups"
    else:
        names = sender_names(senders if senders is not None else 660)
        if groups:
            cohort = share_cohort(names, 1.0 if share is None else share, seed)
            fleet_groups = [tuple(groups) if c else () for c in cohort]
            who = f"{sum(cohort)} of {len(names)} senders in {len(groups)} group(s)"
        else:
            cohort, fleet_groups = [False] * len(names), None
            who = "no recipe: the model's prod-like mix (seed 000 §5)"
    rec = summary(simulate(days=days, fleet_groups=fleet_groups, cohort=cohort, names=names, seed=seed))
    base = summary(simulate(days=days, fleet_groups=[()] * len(names), cohort=cohort, names=names, seed=seed))
    return {"seed": seed, "who": who, "recipe_label": "recipe" if fleet_groups is not None else "prod-like mix",
            "groups": [{k: getattr(g, k) for k in ("name", "priority", "failed_in_row", "cooldown_delay_from",
                        "cooldown_delay_to", "send_from_message_interval", "send_to_message_interval",
                        "from_time", "to_time")} for g in groups],
            "recipe": rec, "baseline": base, "claims": claims(groups, rec, base)}


def run(senders: int | None, days: float, group_texts: list[str] | None, seed: int, *, share: float | None = None,
        senders_from: str | None = None, as_json: bool = False, html: str | None = None,
        console: Console | None = None) -> int:
    """The CLI's entry: tables (or ``--json``) on stdout, ``--html`` beside them.  Exit 0."""
    result = compute(senders, days, group_texts or [], share, senders_from, seed)
    if as_json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        render(result, console or PipeConsole())
    if html is not None:
        rec = PipeConsole(record=True, width=140, file=io.StringIO())
        render(result, rec)
        Path(html).write_text(rec.export_html(), encoding="utf-8")
    return 0
