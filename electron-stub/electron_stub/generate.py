"""The project's own scenario generator (format: ``shared/scenarios/README.md``).

Rules / theory of operation
---------------------------
* Deterministic for a seed: every pair (TU, RU) draws from its own ``random.Random`` seeded with
  ``"{seed}:{tu}:{ru}"`` (string seeds hash with SHA-512 in CPython, stable across runs), so
  changing ``--favorites`` or adding a TU does not change what the other pairs do.  Global events
  (crash, shift change, Stack faults) draw from ``"{seed}:global"``.
* The world: per project ``tus_per_project`` TUs with ``favorites`` favorites each, with realistic
  spend (log-normal), paid actions, bonus-only payers, whitelisted and inactive favorites, limits
  (none on Golden), prior chat/mail logs, prior task history and a few live ``followUpChat``
  markers.
* RU behaviour per pair: online sessions (exponential gaps, log-normal lengths); while online,
  message bursts, likes of the project's kinds, letters, reads of the TU's letters (not on Prime),
  Chathouse notifications and icebreakers, Prime system messages and dialog-created events, chat
  requests, e-mails, limits changes; rarely a block either way (sometimes lifted), a deactivation
  or a whitelisting; now and then a manual TU message or letter.
* Options: a shift change (every TU logs out around the middle; operator ``op-2`` logs them in
  with ``"fresh": true``), crashes, Stack faults (an error-rate window and a down window).
* ``large``: the ``shift`` preset at 60 TUs (20 per project) — the scale benchmark (issue 11);
  the shift's 12 TUs are the first four of each project here, with the same pairs.
* ``demo``: 1 h, 1 TU per project, 30 favorites, a crash, a shift change and a Stack fault, plus
  scripted pairs (RU ids ``*-x01`` …) that nothing random touches, with ``expect`` lines that must
  hold for a correct sidecar whatever the operator model draws.
"""
from __future__ import annotations

import json
import math
import random
from typing import Any

PROJECTS = ("golden", "chathouse", "prime")
PREFIX = {"golden": "g", "chathouse": "c", "prime": "p"}
LIKES = {"golden": ["rose"], "chathouse": ["like"], "prime": ["likephoto", "wink", "like_newsfeed_post"]}
START = "2026-11-30T08:00:00Z"
OPERATOR = {"chat_answer_p": 0.85, "chat_delay_s": [15, 90], "mail_answer_p": 0.6, "mail_delay_s": [60, 400]}

PRESETS: dict[str, dict[str, Any]] = {
    "demo": dict(seed=5, hours=1.0, tus_per_project=1, favorites=30, shift_change=True, crash=1,
                 stack_faults=True, scripted=True),
    "smoke": dict(seed=1, hours=1.0, tus_per_project=1, favorites=40, shift_change=False, crash=0,
                  stack_faults=False, scripted=False),
    "shift": dict(seed=7, hours=8.0, tus_per_project=4, favorites=150, shift_change=True, crash=2,
                  stack_faults=True, scripted=False),
    # issue 11 item 6: the scale test — the shift's world at 60 TUs (20 per project, 9,000
    # favorites); measure its first hour with ``--hours 1``
    "large": dict(seed=7, hours=8.0, tus_per_project=20, favorites=150, shift_change=True, crash=2,
                  stack_faults=True, scripted=False),
}


def _r(x: float) -> float:
    return round(x, 3)


def _lognormal(rng: random.Random, median: float, sigma: float) -> float:
    return median * math.exp(rng.gauss(0.0, sigma))


def _favorite(rng: random.Random, project: str, tu: str, ru: str) -> dict[str, Any]:
    spend30 = _r(max(0.0, _lognormal(rng, 60, 1.3) - 15))
    total = 0.0 if project == "golden" and rng.random() < 0.08 else _r(spend30 * rng.uniform(1, 10) + rng.uniform(0, 50))
    return {"kind": "favorite", "project": project, "tu": tu, "ru": ru, "active": rng.random() < 0.9,
            "is_white": rng.random() < 0.03, "spend_30d_usd": spend30, "spend_total_usd": total,
            "paid_actions": int(rng.expovariate(1 / 30)),
            "paid_with_bonuses_only": project == "chathouse" and rng.random() < 0.15,
            "chat_limit": None if project == "golden" else rng.choice([0, 1, 2, 3, 5]),
            "mail_limit": None if project == "golden" else rng.choice([0, 1, 1, 2]), "markers": {}}


def _prior(rng: random.Random, project: str, tu: str, ru: str, tag: str, world: list) -> list[str]:
    """Chat/mail logs and task history before start; returns the TU's letter ids."""
    base = {"project": project, "tu": tu, "ru": ru}
    letters: list[str] = []
    for i in range(rng.choice([0, 0, 1, 1, 2, 3])):
        letters.append(f"ml-{tag}-p{i}")
        world.append({"kind": "mail_log", **base, "from": "tu", "at": _r(-rng.uniform(900, 6 * 86400)), "id": letters[-1]})
    if rng.random() < 0.2:
        world.append({"kind": "mail_log", **base, "from": "ru", "at": _r(-rng.uniform(3600, 3 * 86400)), "id": f"ml-{tag}-r"})
    if rng.random() < 0.3:
        at = -rng.uniform(4000, 5 * 86400)
        world.append({"kind": "chat_log", **base, "from": "ru", "at": _r(at), "id": f"m-{tag}-p0"})
        world.append({"kind": "chat_log", **base, "from": "tu", "at": _r(at + rng.uniform(20, 100)), "id": f"m-{tag}-p1"})
    if rng.random() < 0.05:  # talked just before the shift: a chain may be restored
        closed = -rng.uniform(30, 3000)
        created = closed - rng.uniform(10, 110)
        world.append({"kind": "history", **base, "task": {"task_id": f"h-{tag}", "type": "unanswered_message",
                      "source": "socket", "created_at": _r(created), "closed_at": _r(closed), "reason": "answered"}})
        world.append({"kind": "chat_log", **base, "from": "ru", "at": _r(created), "id": f"m-{tag}-h0"})
        world.append({"kind": "chat_log", **base, "from": "tu", "at": _r(closed), "id": f"m-{tag}-h1"})
    return letters


def _sessions(rng: random.Random, project: str, tu: str, ru: str, tag: str, duration: float,
              letters: list[str], tl: list) -> None:
    """The RU's behaviour over the run (see the module docstring)."""
    base = {"project": project, "tu": tu, "ru": ru}
    n = 0

    def nid(p: str) -> str:
        nonlocal n
        n += 1
        return f"{p}-{tag}-{n}"

    t = rng.expovariate(1 / 2400)
    blocked = False
    while t < duration:
        length = min(_lognormal(rng, 900, 0.8), 3 * 3600)
        end = min(t + length, duration)
        tl.append({"t": t, "kind": "online", "project": project, "ru": ru, "online": True})
        at = lambda: rng.uniform(t, end)  # noqa: E731 - an instant inside this session
        if project == "chathouse" and rng.random() < 0.2:
            tl.append({"t": t + rng.uniform(1, 30), "kind": "notification", **base,
                       "type": "ONLINE_NOW" if rng.random() < 0.8 else "RECENT_PURCHASE"})
        if rng.random() < 0.5:  # a conversation: bursts of messages
            mt = t + rng.uniform(5, 90)
            while mt < end:
                for _ in range(1 if rng.random() < 0.75 else rng.randint(2, 4)):
                    tl.append({"t": mt, "kind": "message", **base, "from": "ru", "id": nid("m"), "body": "…"})
                    mt += rng.uniform(2, 20)
                mt += rng.expovariate(1 / 200)
                if rng.random() < 0.2:
                    break
        if rng.random() < 0.1:
            tl.append({"t": at(), "kind": "like", **base, "like": rng.choice(LIKES[project])})
        if rng.random() < 0.12:
            tl.append({"t": at(), "kind": "mail", **base, "from": "ru", "id": nid("ml")})
        if rng.random() < 0.04:
            letters.append(nid("ml"))
            tl.append({"t": at(), "kind": "mail", **base, "from": "tu", "id": letters[-1]})
        if rng.random() < 0.05:
            tl.append({"t": at(), "kind": "message", **base, "from": "tu", "id": nid("m"), "body": "manual"})
        if project != "prime" and letters and rng.random() < 0.15:
            tl.append({"t": at(), "kind": "mail_read", **base, "mail_id": rng.choice(letters), "event_key": nid("rd")})
        if project != "golden" and rng.random() < 0.06:
            tl.append({"t": at(), "kind": "limits", **base, "chat": rng.choice([0, 1, 3, 5]), "mail": rng.choice([0, 1, 2])})
        if project == "prime" and rng.random() < 0.03:
            tl.append({"t": at(), "kind": "system", **base, "text": "limits opened"})
        if project == "prime" and rng.random() < 0.01:
            tl.append({"t": at(), "kind": "dialog_created", **base})
        if project == "chathouse" and rng.random() < 0.03:
            tl.append({"t": at(), "kind": "icebreaker", **base})
        if rng.random() < 0.01:
            tl.append({"t": at(), "kind": "chat_request", **base})
        if rng.random() < 0.01:
            tl.append({"t": at(), "kind": "email", **base, "id": nid("em"), "received_at": _r(t)})
        if rng.random() < 0.004 and not blocked:
            blocked, by, tb = True, rng.choice(["tu", "ru"]), at()
            tl.append({"t": tb, "kind": "block", **base, "by": by})
            if rng.random() < 0.3:
                tl.append({"t": min(duration, tb + rng.uniform(300, 1800)), "kind": "unblock", **base, "by": by})
        if rng.random() < 0.004:
            tl.append({"t": at(), "kind": "favorite", **base, "active": False})
        elif rng.random() < 0.002:
            tl.append({"t": at(), "kind": "favorite", **base, "is_white": True})
        if end < duration:
            tl.append({"t": end, "kind": "online", "project": project, "ru": ru, "online": False})
        t = end + rng.expovariate(1 / 3600)


#: a scripted block starts this long after its TU's login at the earliest (the login's own step,
#: the favorites' bootstrap) and ends this long before its logout
SESSION_MARGIN_S = 5.0


def _fit(want: float, lead: float, span: float, sessions: list[tuple[float, float]],
         crashes: list[float]) -> float | None:
    """The earliest instant ``t >= want`` (seconds from the start) such that the block
    ``[t - lead, t + span]`` lies inside one logged-in session of the TU (``SESSION_MARGIN_S``
    from either end) and holds no crash; ``None`` when no such instant exists.  Candidates are
    ``want`` and each later session start / crash plus the margin and the lead."""
    cands = sorted({want, *(x + SESSION_MARGIN_S + lead for x in (*(a for a, _ in sessions), *crashes)
                            if x + SESSION_MARGIN_S + lead > want)})
    for t in cands:
        inside = any(a + SESSION_MARGIN_S <= t - lead and t + span <= b - SESSION_MARGIN_S for a, b in sessions)
        if inside and not any(t - lead - 1.0 <= c <= t + span for c in crashes):
            return _r(t)
    return None


def _scripted(project: str, tu: str, world: list, tl: list, crash_t: float | None, login2_t: float | None,
              sessions: list[tuple[float, float]], crashes: list[float], duration: float) -> None:
    """Pairs only this script touches, with expectations that hold whatever the operator draws.

    Each block is placed where its TU is logged in and no crash falls inside it (``_fit``): at
    310 s and 610 s of a 1-hour demo (scaled down for a shorter one), at crash + 60 s and at the
    shift change's re-login + 400 s, or at the first later instant that fits; a block that fits
    nowhere before the end is left out.  ``sessions``: the TU's logged-in ``(login, logout)``
    intervals, seconds from the start (the last one ends at ``duration``)."""
    p = PREFIX[project]
    fav = lambda ru: {"kind": "favorite", "project": project, "tu": tu, "ru": ru, "active": True, "is_white": False,  # noqa: E731
                      "spend_30d_usd": 120.0, "spend_total_usd": 800.0, "paid_actions": 40,
                      "paid_with_bonuses_only": False, "chat_limit": None if project == "golden" else 3,
                      "mail_limit": None if project == "golden" else 2, "markers": {}}
    a, b, c = f"{p}-ru-x01", f"{p}-ru-x02", f"{p}-ru-x03"
    world += [fav(a), fav(b), fav(c)]
    base = lambda ru: {"project": project, "tu": tu, "ru": ru}  # noqa: E731
    scale = min(1.0, duration / 3600.0)
    # x01: a burst of three messages is one Unanswered message
    if (t0 := _fit(_r(310.0 * scale), 10.0, 10.0, sessions, crashes)) is not None:
        tl.append({"t": t0 - 10, "kind": "online", "project": project, "ru": a, "online": True})
        for i, dt in enumerate((0.0, 3.0, 6.0)):
            tl.append({"t": t0 + dt, "kind": "message", **base(a), "from": "ru", "id": f"m-{a}-{i}", "body": "hi"})
        tl.append({"t": t0 + 10, "kind": "expect", "what": "count", "type": "unanswered_message", "tu": tu, "ru": a,
                   "between": [t0, t0 + 10], "min": 1, "max": 1})
    # x02: a like makes a Like task at once
    if (t0 := _fit(_r(610.0 * scale), 10.0, 2.0, sessions, crashes)) is not None:
        tl.append({"t": t0 - 10, "kind": "online", "project": project, "ru": b, "online": True})
        tl.append({"t": t0, "kind": "like", **base(b), "like": LIKES[project][0]})
        tl.append({"t": t0 + 2, "kind": "expect", "what": "task_created", "type": "like", "tu": tu, "ru": b,
                   "between": [t0, t0 + 1]})
    # x03: after the crash and after the shift change an RU message still makes a task at once
    free_from = 0.0  # the RU's previous block has gone offline by then
    for k, (t0, dt) in enumerate(x for x in ((crash_t, 60.0), (login2_t, 400.0)) if x[0] is not None):
        t1 = _fit(max(round(t0 + dt, 3), free_from), 5.0, 1.0, sessions, crashes)
        if t1 is None:
            continue
        tl.append({"t": t1 - 5, "kind": "online", "project": project, "ru": c, "online": True})
        tl.append({"t": t1, "kind": "message", **base(c), "from": "ru", "id": f"m-{c}-{k}", "body": "still there?"})
        tl.append({"t": t1 + 1, "kind": "expect", "what": "task_created", "type": "unanswered_message", "tu": tu,
                   "ru": c, "between": [t1, t1 + 1], "source": "socket"})
        tl.append({"t": t1 + 200, "kind": "online", "project": project, "ru": c, "online": False})
        free_from = t1 + 206


def generate(preset: str = "demo", *, seed: int | None = None, hours: float | None = None,
             tus_per_project: int | None = None, favorites: int | None = None) -> list[dict[str, Any]]:
    """The scenario as a list of line objects (header first, then world, then the sorted timeline)."""
    cfg = dict(PRESETS[preset])
    for k, v in (("seed", seed), ("hours", hours), ("tus_per_project", tus_per_project), ("favorites", favorites)):
        if v is not None:
            cfg[k] = v
    seed, duration = int(cfg["seed"]), float(cfg["hours"]) * 3600.0
    g = random.Random(f"{seed}:global")
    world: list[dict] = []
    tl: list[dict] = []
    crashes = sorted(_r(g.uniform(0.25, 0.45) * duration) if i == 0 else _r(g.uniform(0.65, 0.9) * duration)
                     for i in range(int(cfg["crash"])))
    logout_t = _r(duration * 0.5) if cfg["shift_change"] else None
    for project in PROJECTS:
        for ti in range(1, int(cfg["tus_per_project"]) + 1):
            tu = f"{PREFIX[project]}-tu-{ti:02d}"
            world.append({"kind": "tu", "project": project, "tu": tu, "operator": "op-1"})
            login_t = _r(g.uniform(0, 20))
            tl.append({"t": login_t, "kind": "login", "project": project, "tu": tu, "operator": "op-1"})
            sessions = [(login_t, duration)]
            if logout_t is not None:
                out = _r(logout_t + g.uniform(-90, 90))
                tl.append({"t": out, "kind": "logout", "project": project, "tu": tu, "operator": "op-1"})
                back = _r(logout_t + 120 + g.uniform(0, 180))
                tl.append({"t": back, "kind": "login", "project": project,
                           "tu": tu, "operator": "op-2", "fresh": True})
                sessions = [(login_t, out), (back, duration)]
            for fi in range(1, int(cfg["favorites"]) + 1):
                ru = f"{PREFIX[project]}-ru-{ti:02d}-{fi:04d}"
                tag = f"{PREFIX[project]}{ti}-{fi}"
                rng = random.Random(f"{seed}:{tu}:{ru}")
                fav = _favorite(rng, project, tu, ru)
                world.append(fav)
                letters = _prior(rng, project, tu, ru, tag, world)
                _sessions(rng, project, tu, ru, tag, duration, letters, tl)
            if cfg["scripted"]:
                _scripted(project, tu, world, tl, crashes[0] if crashes else None,
                          _r(logout_t + 300) if logout_t is not None else None, sessions, crashes, duration)
    tl += [{"t": t, "kind": "crash"} for t in crashes]
    if cfg["stack_faults"]:
        t0 = _r(g.uniform(0.1, 0.2) * duration)
        tl += [{"t": t0, "kind": "stack", "mode": "error_rate", "value": 0.3},
               {"t": _r(t0 + min(600.0, duration * 0.1)), "kind": "stack", "mode": "error_rate", "value": 0.0}]
        t1 = _r(g.uniform(0.55, 0.7) * duration)
        tl += [{"t": t1, "kind": "stack", "mode": "down"}, {"t": _r(t1 + min(300.0, duration * 0.05)), "kind": "stack", "mode": "up"}]
    tl = [x for x in tl if x["t"] <= duration]
    for x in tl:
        x["t"] = _r(x["t"])
    order = {id(x): i for i, x in enumerate(tl)}
    tl.sort(key=lambda x: (x["t"], order[id(x)]))
    header = {"kind": "header", "format": 1, "name": preset, "start": START, "seed": seed,
              "duration_s": duration, "operator": dict(OPERATOR)}
    return [header] + world + tl


def first(lines: list[dict[str, Any]], seconds: float) -> list[dict[str, Any]]:
    """The scenario's first ``seconds``: the same header (``duration_s`` = ``seconds``) and world,
    the timeline lines with ``t <= seconds`` — e.g. the first hour of ``large`` for the scale
    benchmark (issue 11 item 6), which a shorter ``hours`` would not give (the shift change and
    the crashes are placed as fractions of the duration)."""
    header, rest = lines[0], lines[1:]
    return ([{**header, "duration_s": float(seconds)}]
            + [x for x in rest if "t" not in x or x["t"] <= seconds])


def dumps(lines: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(x, ensure_ascii=False, separators=(",", ":")) + "\n" for x in lines)
