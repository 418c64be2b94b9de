"""Rendering of the replay report (:func:`electron_stub.report.summarize`) with ``rich``.

On a terminal: a verdict panel, the shift's timeline and tables; piped or in a file: the same
content as plain text without colour codes (``rich`` decides by ``isatty``).  ``quiet``: the
verdict, the failures and the unclean exits only.
"""
from __future__ import annotations

import io
import sys
from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from electron_stub.report import whole_s


class PipeConsole(Console):
    """rich's Console, but a closed output pipe (``… | head``) raises :class:`BrokenPipeError`
    for the stub's one handler (exit 141, quietly) — rich's own ``on_broken_pipe`` raises
    ``SystemExit(1)``, which bypassed it.  Every Console of the stub is a PipeConsole."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError("the output pipe was closed")


__all__ = ["print_report", "to_text", "build"]


def _fmt_s(v: float | None) -> str:
    if v is None:
        return "–"
    if v < 120:
        return f"{v:.0f} s"
    if v < 7200:
        return f"{v / 60:.1f} min"
    return f"{v / 3600:.1f} h"


def _table(title: str, *columns: str) -> Table:
    t = Table(title=title, title_justify="left", title_style="bold", show_edge=False, pad_edge=False)
    for i, c in enumerate(columns):
        numeric = ("count", "answered", "p50", "p95", "tasks", "created", "overdue", "still open", "other closes",
                   "expired", "of them went overdue", "open at end", "queue max", "at", "age p50", "age max",
                   "oldest open", "green", "yellow", "red", "none")
        t.add_column(c, justify="right" if i and c in numeric else "left")
    return t


def build(s: dict[str, Any], *, quiet: bool = False) -> Group:
    """The report as ``rich`` renderables, in reading order."""
    ok = s["exit_code"] == 0
    parts: list[Any] = [Panel(Text(s["verdict"], style="bold green" if ok else "bold red"),
                              title=f"replay report: {s['scenario']}", subtitle=f"start {s['start_utc']}",
                              expand=False)]
    exp, cons = s["expectations"], s["consistency"]
    failures = [f"FAIL line {f['line']}: {f['detail']}" for f in exp["failed"]]
    failures += [f"consistency {k}: {n}" for k, n in cons["by_kind"].items()]
    failures += [f"  - {d}" for d in cons["examples"]]
    unclean = [e for e in s["sidecars"]["exits"] if not e["clean"]]
    failures += [f"NOT CLEAN {e['machine']} pid {e['pid']}: {e['how']}, exit {e['returncode']} {e['note']}"
                 for e in unclean]
    if quiet:
        parts += [Text(f, style="red") for f in failures]
        parts.append(Text(_result_line(s)))
        return Group(*parts)

    tl = _table("What happened (virtual time, UTC)", "time", "+s", "event", "detail")
    for x in s["timeline"]:
        tl.add_row(x["clock"], str(whole_s(x["at"])) if x["at"] is not None else "", x["what"], x["detail"])
    if not s["timeline"]:
        tl.add_row("", "", "(no logins, crashes or outages)", "")
    parts.append(tl)

    tk = s["tasks"]
    head = (f"Tasks: {tk['created']} created, {tk['closed']} closed, {tk['open_at_end']} open at the end"
            + (f", {tk['reannounced_ignored']} re-announcements ignored" if tk["reannounced_ignored"] else ""))
    tot = _table(head + " — created = answered + other closes + still open", "type", "created", "answered",
                 "other closes", "still open", "of them went overdue")
    cols = ("created", "answered", "other_closes", "still_open", "overdue")
    for row in tk["totals"]:
        tot.add_row(row["type"], *(str(row[k]) for k in cols))
    if tk["totals"]:
        tot.add_row("total", *(str(sum(r[k] for r in tk["totals"])) for k in cols), style="bold")
    parts.append(tot)
    parts += _queue_tables(s.get("queue"))
    tt = _table("Tasks by source and close reason", "type", "source", "close reason", "count")
    for row in tk["table"]:
        tt.add_row(row["type"], row["source"], str(row["reason"]), str(row["count"]))
    parts.append(tt)

    fm = s["follow_up_mail"]
    ft = _table(f"Follow-up mails by source ({fm['created']} created)", "source", "created", "answered",
                "expired", "other closes", "still open")
    for source, row in fm["by_source"].items():
        ft.add_row(source, *(str(row[k]) for k in ("created", "answered", "expired", "other_closes", "still_open")))
    parts.append(ft)
    br = fm["burst_rolls"]
    if br["rolls"]:
        parts.append(Text(f"Burst rolls (50 %): {br['rolls']} rolled, {br['hit']} hit, {br['miss']} missed "
                          f"({br['hit_rate'] * 100:.1f} % hit)"))

    ad = _table("Answer delay (created → answered)", "type", "answered", "p50", "p95")
    for typ, d in tk["answer_delay_s"].items():
        ad.add_row(typ, str(d["answered"]), _fmt_s(d["p50"]), _fmt_s(d["p95"]))
    if not tk["answer_delay_s"]:
        ad.add_row("(no task was answered)", "", "", "")
    parts.append(ad)
    na = tk["never_answered"]
    if na["tasks"]:
        parts.append(Text(f"Never answered: {na['tasks']} answer-awaiting task(s) — "
                          + ", ".join(f"{n} {fate}" for fate, n in na["by_fate"].items()), style="yellow"))

    od = tk["overdue"]
    line = f"Overdue: {od['tasks']} task(s)"
    if od["tasks"]:
        line += (" — " + ", ".join(f"{t} {n}" for t, n in od["by_type"].items())
                 + f"; {od['still_open']} still open"
                 + ("; closed as " + ", ".join(f"{r} {n}" for r, n in od["closed_as"].items()) if od["closed_as"] else ""))
    parts.append(Text(line, style="yellow" if od["tasks"] else ""))

    mk = s["markers_acked"]
    parts.append(Text(f"Markers acked by Stack: {mk['total']}"
                      + (" (" + ", ".join(f"{k} {v}" for k, v in mk["by_name"].items()) + ")" if mk["by_name"] else "")))
    dl = s["deliveries"]
    if dl is not None:
        dt = _table(f"Deliveries ({dl['lines']} outcomes, {dl['webhooks_received']} webhooks received)",
                    "target", "status", "count")
        for target, statuses in dl["by_target"].items():
            for status, n in sorted(statuses.items()):
                dt.add_row(target, status, str(n))
        parts.append(dt)
    left = s.get("deliveries_left") or {}
    if left:
        parts.append(Text("Deliveries left queued at the end (in each machine's SQLite; each sidecar sends "
                          "them when it next starts): "
                          + "; ".join(f"{m}: " + ", ".join(f"{t} {n}" for t, n in ts.items())
                                      for m, ts in left.items()), style="yellow"))
    op, st = s["operator"], s["stack"]
    bl = op.get("backlog") or {}
    parts.append(Text("Operator sent: " + (", ".join(f"{k} {v}" for k, v in op["sent"].items()) or "nothing")
                      + (f" ({op['late']} late)" if op["late"] else "")
                      + (f"; backlog (worked in the sidecar's order): {bl.get('passed_over', 0)} passed over at "
                         f"first look, {bl.get('looks', 0)} looks, {bl.get('answered', 0)} answered" if bl else "")))
    parts.append(Text(f"Stack: {st.get('acked', 0)} writes acked, {st.get('faulted', 0)} faulted (500), "
                      f"{st.get('refused', 0)} refused (down), {st.get('duplicates', 0)} duplicates, "
                      f"{st.get('bad_requests', 0)} bad requests, {st.get('reads', 0)} startup reads"))
    sr = s.get("stack_requests") or {}
    if sr.get("requests"):
        parts.append(Text(f"Stack write requests: {sr['requests']} ({sr['batches']} batches carrying "
                          f"{sr['batched_writes']} writes, {sr['single_requests']} single); one request "
                          f"per write would have been {sr['one_per_write']}"
                          + (f" — {sr['saving']}x fewer" if sr.get("saving") else "")))
    kinds = ", ".join(f"{n} {w}" for w, n in exp.get("by_kind", {}).items())
    parts.append(Text(f"Expectations: {exp['passed']} passed, {exp['total'] - exp['passed']} failed"
                      + (f" ({kinds})" if kinds else "") + "; "
                      f"consistency: {cons['violations']} violation(s)"))
    parts += [Text(f"  {f}", style="red") for f in failures]
    sc = s["sidecars"]
    parts.append(Text(f"Sidecars: {sc['machines']} machine(s), {sc['crashes']} crash(es)"))
    for e in sc["exits"]:
        flag = "ok" if e["clean"] else "NOT CLEAN"
        parts.append(Text(f"  {e['machine']} pid {e['pid']}: {e['how']}, exit {e['returncode']} [{flag}]"
                          + (f" {e['note']}" if e["note"] else ""), style="" if e["clean"] else "red"))
    parts += [Text(f"warning: {w}", style="yellow") for w in s["warnings"]]
    sp = s["speed"]
    parts.append(Text(
        f"Speed: wall {sp['wall_s']:.2f} s for {sp['virtual_s']:.0f} s virtual"
        + (f" (x{sp['speedup']:.0f})" if sp["speedup"] else "")
        + f"; {sp['frames']} bridge frames" + (f" ({sp['frames_per_s']:.0f}/s)" if sp["frames_per_s"] else "")
        + f"; {sum(sp['platform_requests'].values())} platform requests answered"
        + (f" in {sum(sp['platform_request_frames'].values())} round trips" if sp.get("platform_request_frames") else "")
        + (f", {sp['request_errors']} with an error" if sp["request_errors"] else ""), style="dim"))
    parts.append(Text(_result_line(s), style="bold"))
    return Group(*parts)


def _queue_tables(q: dict[str, Any] | None) -> list[Any]:
    """The operator's queue per TU (:mod:`electron_stub.report_queue`), two tables, total rows."""
    if not q or not q["by_tu"]:
        return []
    marks = " / ".join(f"+{_fmt_s(t)}" for t in q["sample_at"])
    qt = _table(f"Operator queue per TU — open tasks at {marks}", "TU", "created", "answered",
                "other closes", "open at end", "queue max", "at", "queue over time")
    ot = _table("Overdue and VIP per TU (overdue = answered + other closes + still open; VIP tiers add up to created)",
                "TU", "overdue", "answered", "other closes", "still open", "age p50", "age max",
                "oldest open", "green", "yellow", "red", "none")
    rows = list(q["by_tu"].items()) + [("total", q["total"])]
    for tu, r in rows:
        style = "bold" if tu == "total" else ""
        qt.add_row(tu, *(str(r[k]) for k in ("created", "answered", "other_closes", "open_at_end", "max")),
                   f"+{_fmt_s(r['max_at'])}" if r["max_at"] is not None else "–",
                   " ".join(str(n) for n in r["samples"]), style=style)
        ot.add_row(tu, *(str(r[k]) for k in ("overdue", "overdue_answered", "overdue_other", "overdue_open")),
                   _fmt_s(r["overdue_age_p50_s"]), _fmt_s(r["overdue_age_max_s"]), _fmt_s(r["oldest_open_overdue_s"]),
                   *(str(r[f"vip_{k}"]) for k in ("green", "yellow", "red", "none")), style=style)
    return [qt, ot]


def _result_line(s: dict[str, Any]) -> str:
    verdict = s["verdict"]
    if verdict.startswith(("PASS", "FAIL")):
        return f"result: {verdict}"
    return f"result: {'PASS' if s['exit_code'] == 0 else 'FAIL'} — {verdict}"


def print_report(s: dict[str, Any], *, quiet: bool = False, file: Any = None) -> None:
    out = file or sys.stdout
    wide = None if out.isatty() else 120  # piped/logged: no 80-column wrapping of long lines
    PipeConsole(file=out, width=wide, highlight=False).print(build(s, quiet=quiet))


def to_text(s: dict[str, Any], *, quiet: bool = False, width: int = 120) -> str:
    """The report as plain text (no colour codes)."""
    buf = io.StringIO()
    PipeConsole(file=buf, width=width, no_color=True, color_system=None, highlight=False,
            force_terminal=False).print(build(s, quiet=quiet))
    return buf.getvalue()
