"""The routing world of a scenario (README "Routing world"; DESIGN §10): targets with their
loopback receivers, rules, Electron's own events, target faults, management calls and the
``delivery`` expectation.

Rules / theory of operation
---------------------------
* ``target`` lines: ``webhook`` and ``telegram`` targets get a loopback receiver
  (:class:`~electron_stub.receivers.Receivers`: a Standard Webhooks verifier, a fake Bot API);
  ``journal`` targets write into the sidecar's data dir.  Every sidecar the replay starts gets the
  targets in its environment (``SIDECAR_ROUTER_TARGETS``, secrets included — env is where the
  sidecar takes secrets from) and the header's ``routing`` as ``SIDECAR_ROUTER_MATCH_MODE`` /
  ``SIDECAR_ROUTER_DEDUP_WINDOW_S``; a scenario never names a URL or a secret.
* ``rule`` lines are created (``rules.create``) on every new sidecar data dir, together with the
  rule changes ``manage`` lines made since (the harness's view of the rule set), so a fresh
  machine after a shift change routes like the one before.  A restarted one keeps its own.
* ``group`` lines are stored here; :mod:`electron_stub.senders_lines` creates them on each machine.
* ``emit``: ``events.emit`` to the current machine.  ``target_fault``: the receiver misbehaves.
* ``manage``: ``rules.*`` / ``deliveries.list`` / ``events.emit`` are called on the current
  machine; with ``error`` the call must fail with that JSON-RPC code (and change nothing — the
  rule set is compared before and after); without it, it must succeed.  ``groups.*`` /
  ``senders.*`` are sender health's: the replay plays them with :mod:`electron_stub.senders_lines`.
* ``delivery`` expectation: the rows of every machine of the run (``deliveries.list`` from the
  running ones, the SQLite file read-only from the retired ones) to that target whose event was
  accepted inside the window (1 s tolerance), counted by status, source, subject and action.
"""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from electron_stub import expect as ex
from electron_stub import scenario as sc
from electron_stub.receivers import Receivers

HEALTH_METHODS = ("groups.", "senders.")  # sender health's: electron_stub.senders_lines
ROUTER_METHODS = ("rules.", "deliveries.", "events.")


class RoutingWorld:
    """The routing part of one replay (see module rules)."""

    def __init__(self, scenario: sc.Scenario, now_fn: Any) -> None:
        self.targets = [x for x in scenario.world if isinstance(x, sc.Target)]
        self.rules: dict[str, dict[str, Any]] = {}
        for r in scenario.world:
            if isinstance(r, sc.Rule):
                self.rules[r.name] = _rule_params(r)
        self.groups = [x for x in scenario.world if isinstance(x, sc.Group)]
        self.routing = scenario.header.routing or {}
        self.receivers: Receivers | None = None
        hosted = [t for t in self.targets if t.channel in ("webhook", "telegram")]
        if hosted:
            self.receivers = Receivers(seed=scenario.header.seed, now_fn=now_fn)
            for t in hosted:
                self.receivers.add_target(t.name, t.channel, t.config)

    @property
    def active(self) -> bool:
        return bool(self.targets or self.rules or self.groups)

    def start(self) -> None:
        if self.receivers is not None:
            self.receivers.start()

    def stop(self) -> None:
        if self.receivers is not None:
            self.receivers.stop()

    def env(self) -> dict[str, str]:
        """The sidecar's router configuration (environment)."""
        targets: dict[str, Any] = {}
        for t in self.targets:
            if t.channel == "journal":
                targets[t.name] = {"channel": "journal", **{k: v for k, v in t.config.items()
                                                            if k in ("max_bytes", "backups")}}
            else:
                assert self.receivers is not None
                targets[t.name] = self.receivers.target_config(t.name)
        out = {"SIDECAR_ROUTER_TARGETS": json.dumps(targets)}
        if self.routing.get("match_mode"):
            out["SIDECAR_ROUTER_MATCH_MODE"] = str(self.routing["match_mode"])
        if self.routing.get("dedup_window_s"):
            out["SIDECAR_ROUTER_DEDUP_WINDOW_S"] = str(self.routing["dedup_window_s"])
        return out

    async def seed_rules(self, call: Any) -> list[str]:
        """Create the rule set on a new machine; returns the warnings (a refused rule)."""
        warnings = []
        for name, params in self.rules.items():
            try:
                await call("rules.create", params)
            except Exception as exc:  # noqa: BLE001 - a refused rule is the scenario's mistake
                warnings.append(f"rule {name!r} refused by the sidecar: {exc}")
        return warnings

    def fault(self, line: sc.TargetFault) -> str | None:
        """Apply a ``target_fault``; an error text for a target with no receiver."""
        if self.receivers is None or line.target not in self.receivers.channels:
            return f"line {line.lineno}: target_fault for {line.target!r}, which has no loopback receiver"
        self.receivers.set_fault(line.target, line.mode, line.value)
        return None

    async def manage(self, line: sc.Manage, call: Any) -> ex.Result:
        """Play a ``manage`` line against the current machine (``call(method, params)``)."""
        what = f"manage {line.method}"
        if line.method.startswith(HEALTH_METHODS):  # the replay hands these to senders_lines
            return ex.Result(lineno=line.lineno, what="manage", ok=False,
                             detail=f"{what}: sender health's, played by electron_stub.senders_lines")
        if not line.method.startswith(ROUTER_METHODS):
            return ex.Result(lineno=line.lineno, what="manage", ok=False,
                             detail=f"{what}: not a management method")
        before = await call("rules.list", {})
        try:
            answer = await call(line.method, line.params)
            code = None
        except Exception as exc:  # noqa: BLE001 - the bridge's RemoteError carries the code
            answer, code = None, getattr(exc, "code", None)
            err = str(exc)
        if line.error is not None:
            after = await call("rules.list", {})
            same = (before or {}).get("rules") == (after or {}).get("rules")
            ok = code == line.error and same
            return ex.Result(lineno=line.lineno, what="manage", ok=ok,
                             detail=f"{what}: expected error {line.error}, got "
                                    f"{code if code is not None else 'success'}"
                                    + ("" if same else "; the rules changed"))
        if code is not None:
            return ex.Result(lineno=line.lineno, what="manage", ok=False,
                             detail=f"{what}: failed with {code}: {err}")
        self._learn(line.method, line.params, answer)
        return ex.Result(lineno=line.lineno, what="manage", ok=True, detail=f"{what}: ok")

    def _learn(self, method: str, params: dict[str, Any], answer: Any) -> None:
        """Keep the harness's rule set in step with a successful change (for new machines)."""
        rule = (answer or {}).get("rule") if isinstance(answer, dict) else None
        if method == "rules.delete":
            self.rules.pop(str(params.get("name")), None)
        elif method in ("rules.create", "rules.patch") and isinstance(rule, dict):
            self.rules[rule["name"]] = {k: v for k, v in rule.items() if v is not None}

    def trace_lines(self) -> list[dict[str, Any]]:
        """``webhook.received`` records (``at`` unix seconds)."""
        return [] if self.receivers is None else self.receivers.records("webhook.received")


def _rule_params(r: sc.Rule) -> dict[str, Any]:
    out: dict[str, Any] = {"name": r.name, "conditions": r.conditions,
                           "actions": [{"target": a.target, **({"template": a.template} if a.template else {})}
                                       for a in r.actions],
                           "enabled": r.enabled}
    if r.throttle_seconds is not None:
        out["throttle_seconds"] = r.throttle_seconds
    if r.weight is not None:
        out["weight"] = r.weight
    return out


def read_deliveries(data_dir: Path) -> list[dict[str, Any]]:
    """A retired machine's delivery rows, read-only (the file may be absent: no rows)."""
    db = Path(data_dir) / "sidecar.db"
    if not db.exists():
        return []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        cur = conn.execute("SELECT id, target, status, source, subject, action, event_at FROM deliveries")
        # a dict display, not dict(zip(names, row)): a shift's rows number in the 100,000s (issue 24)
        return [{"id": i, "target": t, "status": st, "source": so, "subject": su, "action": a, "event_at": e}
                for i, t, st, so, su, a, e in cur]
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


def evaluate_delivery(e: sc.Expect, rows: list[dict[str, Any]], start: float) -> ex.Result:
    """The ``delivery`` expectation over every machine's rows (see module rules)."""
    lo, hi = (e.between or (0.0, float("inf")))[0], (e.between or (0.0, float("inf")))[1]
    lo, hi = start + lo - ex.TOLERANCE_S, start + hi + ex.TOLERANCE_S
    hits = [r for r in rows if r["target"] == e.target and lo <= r["event_at"] <= hi
            and (e.status is None or r["status"] == e.status)
            and (e.source is None or r["source"] == e.source)
            and (e.subject is None or r["subject"] == e.subject)
            and (e.action is None or r["action"] == e.action)]
    lo_n = e.min if e.min is not None else 1
    hi_n = e.max if e.max is not None else float("inf")
    ok = lo_n <= len(hits) <= hi_n
    seen: dict[str, int] = {}
    for r in rows:
        if r["target"] == e.target:
            seen[r["status"]] = seen.get(r["status"], 0) + 1
    want = f"[{lo_n}, {hi_n if hi_n != float('inf') else '∞'}]"
    return ex.Result(lineno=e.lineno, what="delivery", ok=ok,
                     detail=f"delivery to {e.target} status {e.status or 'any'} in {list(e.between or [])}: "
                            f"{len(hits)}, expected {want} (all rows to {e.target} by status: {seen})")


def evaluate_received(e: sc.Expect, received: list[dict[str, Any]], rows: list[dict[str, Any]],
                      start: float) -> ex.Result:
    """The ``received`` expectation (scenarios README revision 2): the DISTINCT deliveries (by
    ``webhook-id``, which is the delivery id) the webhook ``e.target``'s receiver accepted
    (verified), of events emitted in ``e.between`` (seconds from ``start``, the rows' ``event_at``
    of every machine, ``rows``) — within [``e.min``, ``e.max``].  Probes (``ping-…``) are no
    delivery."""
    lo, hi = start + e.between[0] - ex.TOLERANCE_S, start + e.between[1] + ex.TOLERANCE_S
    emitted = {r["id"] for r in rows if r["target"] == e.target and lo <= r["event_at"] <= hi}
    accepted = [r["webhook_id"] for r in received if r.get("target") == e.target and r.get("verified")]
    distinct = {i for i in accepted if i in emitted}
    dup = sum(1 for i in accepted if i in emitted) - len(distinct)
    ok = e.min <= len(distinct) <= e.max
    return ex.Result(lineno=e.lineno, what="received", ok=ok,
                     detail=f"received by {e.target} of events in {list(e.between)}: {len(distinct)} distinct "
                            f"(+{dup} repeated), expected [{e.min}, {e.max}]; {len(emitted)} rows emitted in the window")
