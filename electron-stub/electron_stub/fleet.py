"""``sidecar-stub senders simulate``: the fleet simulator's tables for a shift lead (seed 000 §5).

Runs :func:`sidecar.senders.simulate.simulate` (the health machine alone on virtual time) and
prints, with ``rich``, the tables of seed 000 §5 and a check of the seed's own claims.  A shift lead
tries a group recipe with ``--group "cooldown_delay_from=15,cooldown_delay_to=45"`` before applying
it through ``groups.create``.
"""
from __future__ import annotations

import statistics

from rich.console import Console
from rich.table import Table

from electron_stub.report_view import PipeConsole

from sidecar.senders.groups import Group, GroupError, validate_group
from sidecar.senders.simulate import Stats, planned_five, simulate



class InputError(ValueError):
    """Bad command-line input for the simulator (the CLI prints it and exits 2)."""

RECIPE = Group(id="recipe", name="recipe 15–45 min", priority=1, cooldown_delay_from=15, cooldown_delay_to=45)


def parse_group(text: str) -> Group:
    """``key=value,…`` of the group fields (seed 000 §6) → a validated :class:`Group`.
    Raises :class:`InputError` naming the field."""
    body: dict = {"name": "cli", "priority": 1}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep:
            raise InputError(f"--group: {part!r} is not key=value")
        key = key.strip()
        v = value.strip()
        body[key] = v if key in ("from_time", "to_time", "name") else _num(key, v)
    try:
        return validate_group(body, id="cli", others=[])
    except GroupError as exc:
        raise InputError(f"--group: {exc}") from None


def _num(key: str, v: str) -> float | int:
    try:
        return int(v) if v.lstrip("-").isdigit() else float(v)
    except ValueError:
        raise InputError(f"--group: {key}: {v!r} is not a number") from None


def _pct(n: int, total: int) -> str:
    return f"{100 * n / total:.1f} %" if total else "—"


def _h(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h"


def render(st: Stats, group: Group | None, console: Console) -> None:
    title = f"{st.senders} senders × {st.days:g} days" + (f", every sender in group {group.name!r}" if group else "")
    console.print(f"[bold]Fleet simulation[/]: {title} — {st.sends} customer sends")
    t = Table(title="Cooldown starts by ladder number (seed 000 §5)")
    t.add_column("#"), t.add_column("starts", justify="right"), t.add_column("share", justify="right")
    total = sum(st.starts.values())
    for n in sorted(st.starts):
        t.add_row(str(n), str(st.starts[n]), _pct(st.starts[n], total))
    t.add_row("all", str(total), "")
    console.print(t)
    buckets = [("< 15 min", 0, 900), ("15–60 min", 900, 3600), ("60–120 min", 3600, 7201),
               ("2–12 h", 7201, 43200), ("12–14 h", 43200, 50401)]
    t = Table(title="Planned duration, all starts")
    t.add_column("duration"), t.add_column("starts", justify="right"), t.add_column("share", justify="right")
    for name, lo, hi in buckets:
        n = sum(lo <= d < hi for d in st.planned)
        t.add_row(name, str(n), _pct(n, len(st.planned)))
    console.print(t)
    exits = sum(st.verdicts.values())
    t = Table(title="Verdicts at exit (EVENT 100)")
    t.add_column("verdict"), t.add_column("exits", justify="right"), t.add_column("share", justify="right"),
    t.add_column("seed §5", justify="right")
    for v, seed in (("proven", "~86 %"), ("fail-open", "~10 %"), ("neutral", "~4 %")):
        t.add_row(v, str(st.verdicts[v]), _pct(st.verdicts[v], exits), seed)
    console.print(t)
    t = Table(title="Warm-up and Need Check")
    t.add_column("what"), t.add_column("count", justify="right"), t.add_column("seed §5 (660 × 7 d)", justify="right")
    t.add_row("warm-up sent (104)", str(st.warmup_sent), "13 060")
    t.add_row("warm-up confirmed (105)", str(st.warmup_confirmed), "9 230")
    t.add_row("extensions (102)", str(st.extensions), "3 252")
    t.add_row("Need Check path A (103)", str(st.need_check["A"]), "")
    t.add_row("Need Check path B (103)", str(st.need_check["B"]), "")
    t.add_row("need_check facts while cycling (never-parking groups)", str(st.cycling_need_check), "")
    console.print(t)
    t = Table(title="The seed's claims")
    t.add_column("claim"), t.add_column("seed"), t.add_column("here", justify="right")
    ladder, recipe = planned_five(None), planned_five(group or RECIPE)
    t.add_row("five cooldowns, default ladder (planned + rest)", "~34 h",
              f"median {_h(statistics.median(ladder))} (min {_h(min(ladder))}, max {_h(max(ladder))})")
    t.add_row(f"five cooldowns, group {(group or RECIPE).name!r}", "3–5 h (15–45 min)",
              f"median {_h(statistics.median(recipe))} (min {_h(min(recipe))}, max {_h(max(recipe))})")
    if st.first_total:
        t.add_row("worst cooldown #1, start → release", "≈ 2 h + ≈ 2 h extensions",
                  f"{_h(max(st.first_total))} (planned max {_h(max(st.planned_first))})")
    if st.first_fail_to_need_check:
        t.add_row("first failure → Need Check (simulated, extensions included)", "", f"median {_h(statistics.median(st.first_fail_to_need_check))}")
    console.print(t)


def run(senders: int, days: float, group_text: str | None, seed: int, console: Console | None = None) -> int:
    if senders < 1 or days <= 0:
        raise InputError("--senders must be ≥ 1 and --days > 0")
    group = parse_group(group_text) if group_text else None
    st = simulate(senders, days, group=group, seed=seed)
    render(st, group, console or PipeConsole())
    return 0
