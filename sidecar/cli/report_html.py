"""The report as one self-contained HTML file a shift lead opens in a browser
(``sidecar-stub replay SCENARIO --html OUT``, ``sidecar-stub report REPORT.json --html OUT``,
``sidecar report --data-dir DIR --html OUT``: one renderer for the harness and a live data dir).

Rules / theory of operation
---------------------------
* Input: the JSON report of ``electron_stub.report.summarize`` or of :mod:`sidecar.cli.report`
  (its ``series`` key holds the plot rows — ``{end_s, tasks, deliveries, senders}``, shapes in
  ``electron_stub.report_series``); times on the axes are hours from the report's start.
* Plots (plotly, its JS inlined once: the file works offline, no CDN): per TU the open and the
  overdue queue over time with the timeline's events (logins, shift changes, crashes, Stack
  faults) as vertical marks; the answer-latency and overdue-age distributions; deliveries per
  target over time by status (cumulative); each sender's states (active, cooldown, Need Check) as
  bars.  The expectations and consistency checks are a table.  A ``fleet`` section is left for
  the fleet simulator's recipe-vs-baseline table (``summary["fleet"]``, rows of dicts).
* Every plot is a ``<div class="plot" data-plot=NAME>`` (the tests find them by it).
* Templates: a sandboxed, autoescaping jinja2 environment; plotly is imported lazily (only the
  harness's report side needs it; the frozen sidecar binary leaves it out, see
  docs/decisions.md).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from jinja2 import BaseLoader
from jinja2.sandbox import SandboxedEnvironment

EVENT_KINDS = ("login", "shift change", "logout", "crash", "Stack down", "Stack errors", "Stack slow")
STATE_COLOURS = {"active": "#4caf50", "cooldown": "#ff9800", "need_check": "#e53935"}

TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sidecar report — {{ s.scenario }}</title>
<style>body{font-family:sans-serif;margin:1.5em;background:#fff}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}.fail{color:#b00}.ok{color:#070}
.plot{width:100%;max-width:1100px;height:380px}</style>
{{ plotlyjs | safe }}</head><body>
<h1>Sidecar report — {{ s.scenario }}</h1>
<p>Started {{ s.start_utc }} · <b>{{ s.verdict }}</b> (exit {{ s.exit_code }})</p>
{% for p in plots %}<h2>{{ p.title }}</h2>{{ p.html | safe }}
{% endfor %}
<h2>Expectations and consistency</h2>
<table><tr><th>check</th><th>verdict</th><th>detail</th></tr>
{% for r in checks %}<tr><td>{{ r.check }}</td><td class="{{ 'ok' if r.ok else 'fail' }}">{{ 'pass' if r.ok else 'FAIL' }}</td>
<td>{{ r.detail }}</td></tr>{% endfor %}</table>
<h2>Fleet: recipe vs baseline</h2>
{% if fleet %}<table><tr>{% for k in fleet[0] %}<th>{{ k }}</th>{% endfor %}</tr>
{% for row in fleet %}<tr>{% for v in row.values() %}<td>{{ v }}</td>{% endfor %}</tr>{% endfor %}</table>
{% else %}<p>(no fleet simulation in this report)</p>{% endif %}
</body></html>
"""


def _hours(t: float) -> float:
    return round(t / 3600.0, 4)


def _queue_figs(s: dict[str, Any], events: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    import plotly.graph_objects as go

    ser = s.get("series") or {}
    end = float(ser.get("end_s") or 0.0)
    out = []
    for tu in sorted({t["tu"] for t in ser.get("tasks", [])}):
        rows = [t for t in ser["tasks"] if t["tu"] == tu]
        fig = go.Figure()
        for name, start_key in (("open", "created_at"), ("overdue", "overdue_at")):
            steps = []
            for t in rows:
                if t[start_key] is None:
                    continue
                steps.append((t[start_key], 1))
                if t["closed_at"] is not None:
                    steps.append((t["closed_at"], -1))
            steps.sort(key=lambda p: (p[0], p[1]))  # a close at a creation's instant counts first
            xs, ys, n = [0.0], [0], 0
            for at, d in steps:
                n += d
                xs.append(_hours(at))
                ys.append(n)
            xs.append(_hours(end))
            ys.append(n)
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line_shape="hv", name=name))
        for e in events:
            if e.get("what") in EVENT_KINDS and e.get("at") is not None:
                fig.add_vline(x=_hours(e["at"]), line_dash="dot", line_color="#888",
                              annotation_text=e["what"], annotation_textangle=-90)
        fig.update_layout(xaxis_title="hours from the start", yaxis_title="tasks")
        out.append((f"Queue of TU {tu}", fig))
    return out


def _figures(s: dict[str, Any]) -> list[tuple[str, str, Any]]:
    import plotly.graph_objects as go

    ser = s.get("series") or {}
    end = float(ser.get("end_s") or 0.0)
    figs: list[tuple[str, str, Any]] = [("queue", t, f) for t, f in _queue_figs(s, s.get("timeline") or [])]
    tasks = ser.get("tasks", [])
    lat = [t["closed_at"] - t["created_at"] for t in tasks if t["reason"] == "answered"]
    ages = [(t["closed_at"] if t["closed_at"] is not None else end) - float(t["deadline"] or t["created_at"])
            for t in tasks if t["overdue_at"] is not None]
    fig = go.Figure([go.Histogram(x=lat, name="answer latency (s)"), go.Histogram(x=ages, name="overdue age (s)")])
    fig.update_layout(barmode="overlay", xaxis_title="seconds", yaxis_title="tasks")
    fig.update_traces(opacity=0.7)
    figs.append(("distributions", "Answer latency and overdue age", fig))
    fig = go.Figure()
    groups: dict[tuple[str, str], list[float]] = {}
    for d in ser.get("deliveries", []):
        groups.setdefault((d["target"], d["status"]), []).append(d["at"])
    for (target, status), ats in sorted(groups.items()):
        ats.sort()
        fig.add_trace(go.Scatter(x=[_hours(a) for a in ats], y=list(range(1, len(ats) + 1)),
                                 mode="lines+markers", line_shape="hv", name=f"{target} {status}"))
    fig.update_layout(xaxis_title="hours from the start", yaxis_title="deliveries (cumulative)", showlegend=True)
    _empty(fig, "deliveries")
    figs.append(("deliveries", "Deliveries per target by status", fig))
    fig = go.Figure()
    state: dict[str, tuple[float, str]] = {}
    bars: list[tuple[str, float, float, str]] = []
    for r in ser.get("senders", []):
        since, st = state.get(r["sender"], (0.0, str(r["from"] or "active")))
        if str(r["to"]) != st:
            bars.append((r["sender"], since, r["at"], st))
            since = r["at"]
        state[r["sender"]] = (since, str(r["to"]))
    bars += [(sender, since, end, st) for sender, (since, st) in state.items()]
    for st in sorted({b[3] for b in bars}):
        mine = [b for b in bars if b[3] == st]
        fig.add_trace(go.Bar(y=[b[0] for b in mine], x=[_hours(b[2] - b[1]) for b in mine],
                             base=[_hours(b[1]) for b in mine], orientation="h", name=st,
                             marker_color=STATE_COLOURS.get(st)))
    fig.update_layout(barmode="overlay", xaxis_title="hours from the start")
    _empty(fig, "sender transitions")
    figs.append(("senders", "Sender states", fig))
    return figs


def _empty(fig: Any, what: str) -> None:
    """A plot without rows says so in its middle (rather than an empty grid)."""
    if not fig.data:
        fig.add_annotation(text=f"no {what} in this run", showarrow=False, xref="paper", yref="paper",
                           x=0.5, y=0.5, font={"size": 18})


def _checks(s: dict[str, Any]) -> list[dict[str, Any]]:
    e, c = s.get("expectations") or {}, s.get("consistency") or {}
    rows = [{"check": kind if kind.startswith("decisions") else f"expectations ({kind})", "ok": True,
             "detail": f"{n} rows" if kind.startswith("decisions") else f"{n} checked"}
            for kind, n in (e.get("by_kind") or {}).items()]
    rows += [{"check": f"expectation line {f.get('line')}", "ok": False, "detail": f.get("detail")}
             for f in e.get("failed") or []]
    rows.append({"check": "consistency", "ok": not c.get("violations"),
                 "detail": "; ".join(c.get("examples") or []) or "no violations"})
    return rows


def render(summary: dict[str, Any]) -> str:
    """The HTML page of one JSON report (a string; see the module docstring)."""
    import plotly.io as pio
    from plotly.offline import get_plotlyjs

    plots = [{"title": title, "html": pio.to_html(fig, full_html=False, include_plotlyjs=False,
                                                  div_id=f"plot-{i}").replace(
                  "<div id=", f'<div class="plot" data-plot="{name}" id=', 1)}
             for i, (name, title, fig) in enumerate(_figures(summary))]
    env = SandboxedEnvironment(loader=BaseLoader(), autoescape=True)
    return env.from_string(TEMPLATE).render(
        s=summary, plots=plots, checks=_checks(summary), fleet=summary.get("fleet") or [],
        plotlyjs=f'<script type="text/javascript">{get_plotlyjs()}</script>')


def write_html(summary: dict[str, Any], path: str | Path) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(render(summary), encoding="utf-8")
