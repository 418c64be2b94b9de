"""Trace checks of the Follow-up message rules (issue: seeds 003/004, DESIGN §7) over a replay of
a whole shift: scenario lines (dicts, as in the file) + trace lines (README format, ``at`` in
seconds from start).  Each check returns a list of human-readable violations (empty = holds)."""
from __future__ import annotations

import math
from collections import defaultdict

PASS_LAG = {"golden": 15.0, "chathouse": 60.0, "prime": 60.0}  # RU Online pass periods (seed 003)
FU = "follow_up_message"


def created(trace: list[dict], type_: str = FU) -> list[dict]:
    return [r for r in trace if r["event"] == "task.created" and r["type"] == type_]


def hit_rates(trace: list[dict]) -> dict[int, tuple[int, int]]:
    """step -> (rolls, hits) over ``chain.attempt`` lines; a refusal re-checks the same keyed
    roll, so only its final outcome (created / miss) is counted."""
    out: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for r in trace:
        if r["event"] == "chain.attempt" and not r["outcome"].startswith("refused"):
            out[r["step"]][0] += 1
            out[r["step"]][1] += bool(r["hit"])
    return {k: (v[0], v[1]) for k, v in out.items()}


def within_noise(rolls: int, hits: int, p: float, z: float = 4.0) -> bool:
    """|hits/rolls − p| ≤ z·σ, σ = sqrt(p(1−p)/rolls): with a fixed seed the run is deterministic;
    z = 4 would fail a correct implementation with probability ≈ 6·10⁻⁵ over fresh seeds, while a
    wrong chance (say 0.70 for 0.75 over ~1,500 rolls, 4.5σ) fails."""
    return rolls > 0 and abs(hits / rolls - p) <= z * math.sqrt(p * (1 - p) / rolls)


def online_violations(scenario: list[dict], trace: list[dict]) -> list[str]:
    """No Follow-up message for an RU the world had offline (post-chat mail is the only
    online-exempt type and is not a chat task).  RU Online lags the world by one pass, so the RU
    must have been online at some instant in [created − pass period − 1 s, created]."""
    spans: dict[tuple[str, str], list[tuple[float, bool]]] = defaultdict(list)
    for ln in scenario:
        if ln.get("kind") == "online":
            spans[(ln["project"], ln["ru"])].append((ln["t"], ln["online"]))
    bad = []
    for r in created(trace):
        lo, hi = r["at"] - PASS_LAG[r["project"]] - 1.0, r["at"]
        at_lo, online_in_window = False, False
        for t, on in spans.get((r["project"], r["ru"]), []):
            if t <= lo:
                at_lo = on
            elif t <= hi:
                online_in_window = online_in_window or on
        if not (at_lo or online_in_window):
            bad.append(f"{r['task_id']} {r['tu']}/{r['ru']} at {r['at']}: RU offline")
    return bad


def attribute_violations(scenario: list[dict], trace: list[dict], type_: str = FU) -> list[str]:
    """No ``type_`` task for a pair after a block either way, or while the favorite is inactive
    or white."""
    closed_after: dict[tuple[str, str], list[tuple[float, str]]] = defaultdict(list)
    for ln in scenario:
        kind, t = ln.get("kind"), ln.get("t")
        if kind == "favorite":
            pair = (ln["tu"], ln["ru"])
            start = -math.inf if t is None else t
            if ln.get("active") is False:
                closed_after[pair].append((start, "inactive"))
            if ln.get("is_white") is True:
                closed_after[pair].append((start, "white"))
        elif kind == "block":
            closed_after[(ln["tu"], ln["ru"])].append((t, f"blocked by {ln['by']}"))
    bad = []
    for r in created(trace, type_):
        for since, why in closed_after.get((r["tu"], r["ru"]), ()):
            if r["at"] > since:
                bad.append(f"{r['task_id']} {r['tu']}/{r['ru']} at {r['at']}: {why} since {since}")
    return bad


def chain_violations(scenario: list[dict], trace: list[dict]) -> list[str]:
    """A chain Follow-up comes ≥ 60 s after its anchor (the close of the Unanswered message or of
    the previous attempt's task, or the previous miss) and no chain makes more than three."""
    events: dict[tuple[str, str], list[tuple[float, str]]] = defaultdict(list)
    types = {}
    for ln in scenario:
        if ln.get("kind") == "history":
            task = ln["task"]
            if task["type"] == "unanswered_message" and task.get("closed_at") is not None:
                events[(ln["tu"], ln["ru"])].append((task["closed_at"], "anchor"))
                events[(ln["tu"], ln["ru"])].append((task["created_at"], "new_chain"))
    for r in trace:
        ev = r["event"]
        if ev == "task.created":
            types[r["task_id"]] = (r["type"], r["source"])
            pair = (r["tu"], r["ru"])
            if r["type"] == "unanswered_message":
                events[pair].append((r["at"], "new_chain"))
            elif r["type"] == FU and r["source"] == "chain":
                events[pair].append((r["at"], "chain_task"))
        elif ev == "task.closed":
            type_, source = types.get(r["task_id"], (None, None))
            pair = (r["tu"], r["ru"])
            if type_ == "unanswered_message" and r["reason"] == "answered":
                events[pair].append((r["at"], "anchor"))
            elif type_ == FU and source == "chain":
                events[pair].append((r["at"], "anchor"))
        elif ev == "chain.attempt" and r["outcome"] == "miss":
            events[(r["tu"], r["ru"])].append((r["at"], "anchor"))
    bad = []
    order = {"new_chain": 0, "anchor": 1, "chain_task": 2}
    for pair, evs in events.items():
        evs.sort(key=lambda e: (e[0], order[e[1]]))
        anchor, count = None, 0
        for t, what in evs:
            if what == "new_chain":
                count = 0
            elif what == "anchor":
                anchor = t
            else:
                count += 1
                if anchor is None or t - anchor < 60.0 - 1e-3:
                    bad.append(f"{pair} chain task at {t}: {t - (anchor or -math.inf):.3f} s after anchor")
                if count > 3:
                    bad.append(f"{pair} chain task at {t}: attempt #{count}")
    return bad


def crash_divergence(with_crash: list[dict], without: list[dict], crashes: list[float],
                     window: float = 61.0, types: tuple[str, ...] | None = (FU,)) -> tuple[set, list[str], int]:
    """Compare the two runs' tasks of ``types`` (None: every type) by (type, pair, source,
    created_at).

    Returns (explained pairs, unexplained differences, follow-up tasks that differ).  A pair is
    explained when the first task of ANY type that differs between the runs lies within
    ``window`` s after a crash: the restarted sidecar's login pass and check chat see the world
    at the crash instant instead of at the next pass slot (seed 004 and DESIGN §7: online state is
    never stored, after a restart it comes from the login pass), and the operator's keyed answers
    then follow different tasks on that pair only."""
    def key(r):
        return (r["type"], r["tu"], r["ru"], r["source"], round(r["at"], 3))

    def tasks(trace):
        return {key(r) for r in trace if r["event"] == "task.created"}
    a, b = tasks(with_crash), tasks(without)
    first: dict[tuple[str, str], float] = {}
    for k in a ^ b:
        pair = (k[1], k[2])
        first[pair] = min(first.get(pair, math.inf), k[4])
    fu_diff = [k for k in a ^ b if types is None or k[0] in types]
    explained, bad = set(), []
    for k in fu_diff:
        pair = (k[1], k[2])
        t = first[pair]
        if any(c <= t <= c + window for c in crashes):
            explained.add(pair)
        else:
            bad.append(f"{pair} follow-up {k} differs; first difference of the pair at {t}")
    return explained, bad, len(fu_diff)


def divergence_table(with_crash: list[dict], without: list[dict], crashes: list[float]) -> list[str]:
    """Every task that differs between the runs, one line each: which run has it, type, source,
    pair, instant, and the crash it follows (seconds after it) — so a report can say what the
    differences are, not only how many."""
    def key(r):
        return (r["type"], r["tu"], r["ru"], r["source"], round(r["at"], 3))
    a = {key(r) for r in with_crash if r["event"] == "task.created"}
    b = {key(r) for r in without if r["event"] == "task.created"}
    out = []
    for k in sorted(a ^ b, key=lambda k: (k[4], k)):
        after = [k[4] - c for c in crashes if c <= k[4]]
        since = f"{min(after):.1f} s after a crash" if after else "before any crash"
        out.append(f"{'crash-only ' if k in a else 'nocrash-only'} {k[0]}/{k[3]} {k[1]}/{k[2]} "
                   f"at {k[4]} ({since})")
    return out


FUM = "follow_up_mail"
MAIL_TYPES = ("unanswered_mail", FUM)


def mail_violations(scenario: list[dict], trace: list[dict]) -> list[str]:
    """Follow-up mail over a whole shift (seed 001, DESIGN §8):

    * a post-chat mail (its ``meta.ref`` names the source Unanswered message) comes ≥ 600 s after
      that task's answered close, and the TU sent no letter between the close and the mail — a
      scenario ``mail`` line from the TU, or a mail task closed ``answered`` (the operator's
      letter);
    * no Follow-up mail for a freeloader (the project client's rule on the favorite line in force
      then), nor — :func:`attribute_violations` — a white, inactive or blocked favorite;
    * at most one Follow-up mail per pair and instant (one candidate per check)."""
    from platform_clients import client_for
    from sidecar.domain.favorites import ATTRIBUTES, Favorite

    favs: dict[tuple[str, str], list[tuple[float, Favorite]]] = defaultdict(list)
    tu_mail: dict[tuple[str, str], list[float]] = defaultdict(list)
    for ln in scenario:
        if ln.get("kind") == "favorite":  # a later line updates the attributes it names
            pair = (ln["tu"], ln["ru"])
            changes = {k: v for k, v in ln.items() if k in ATTRIBUTES}
            prev = favs[pair][-1][1] if favs[pair] else Favorite(ru=ln["ru"])
            fav = prev.updated(changes) or prev
            favs[pair].append((-math.inf if ln.get("t") is None else ln["t"], fav))
        elif ln.get("kind") == "mail" and ln.get("from") == "tu":
            tu_mail[(ln["tu"], ln["ru"])].append(ln["t"])
        elif ln.get("kind") == "mail_log" and ln.get("from") == "tu":
            tu_mail[(ln["tu"], ln["ru"])].append(ln["at"])
    info: dict[str, tuple[str, str]] = {}
    closed: dict[str, tuple[float, str]] = {}
    for ln in scenario:  # Stack's prior task history (a post-chat timer restored from a close)
        task = ln.get("task") if ln.get("kind") == "history" else None
        if task and task.get("closed_at") is not None:
            closed[task["task_id"]] = (task["closed_at"], task.get("reason") or "")
    for r in trace:
        if r["event"] == "task.created":
            info[r["task_id"]] = (r["type"], r["source"])
        elif r["event"] == "task.closed" and r["task_id"] not in closed:
            closed[r["task_id"]] = (r["at"], r["reason"])
            if info.get(r["task_id"], ("",))[0] in MAIL_TYPES and r["reason"] == "answered":
                tu_mail[(r["tu"], r["ru"])].append(r["at"])
    bad = attribute_violations(scenario, trace, FUM)
    seen: set[tuple[str, str, float]] = set()
    for r in created(trace, FUM):
        pair, at = (r["tu"], r["ru"]), r["at"]
        if (pair[0], pair[1], at) in seen:
            bad.append(f"{pair} two Follow-up mails at {at}")
        seen.add((pair[0], pair[1], at))
        rows = [f for t, f in favs.get(pair, ()) if t <= at]
        if rows and client_for(r["project"]).is_freeloader(rows[-1]):
            bad.append(f"{r['task_id']} {pair} at {at}: a freeloader")
        if r["source"] != "post_chat":
            continue
        ref = (r.get("meta") or {}).get("ref")
        close = closed.get(ref) if ref else None
        if close is None or close[1] != "answered":
            bad.append(f"{r['task_id']} {pair} post-chat at {at}: source {ref} not closed answered")
            continue
        if at - close[0] < 600.0 - 1e-3:
            bad.append(f"{r['task_id']} {pair} post-chat at {at}: {at - close[0]:.3f} s after its close")
        if any(close[0] < m < at for m in tu_mail.get(pair, ())):
            bad.append(f"{r['task_id']} {pair} post-chat at {at}: the TU mailed since {close[0]}")
    return bad
