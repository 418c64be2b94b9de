"""The fleet simulator: the health machine alone on virtual time against a failure
model, producing the counts of seed 000 §5 ("Картина в prod за 7 днів").

Failure model (calibrated against §5; every draw keyed by (sender, purpose, n), so a run is
reproducible and independent of processing order)
-----------------------------------------------------------------------------------------------
* A sender starts a customer send every U(20, 60) min (and never before the machine allows it),
  so 11 deliveries take 4–11 h: most senders reset ``cooldown_times`` before a second cooldown.
* **Bad spells** start as a Poisson process, on average ``spells_per_day`` (10) a day; most are
  too short to catch two sends.  During a spell every send fails retryably; outside, a send fails
  with ``background`` (0.5 %) probability and 0.2 % of the failures are terminal (never counted).
* **Warm-ups** (seed 000 §3): the warm-up is a p2p message a webhook confirms within 3 h, so a
  device in a spell delivers it when the spell is over — it is confirmed then, if that is before
  the verdict; otherwise it counts as unconfirmed at the verdict and the extension sends a new one.
  The first model failed every probe sent during a spell at once, which turned every spell that
  outlived the first probe (sent +20–45 min into cooldown #1) but not the verdict into an
  extension: 5 846 extensions against §5's 3 252 (0.65 a start vs 0.31).
* Spell lengths are a mixture, read off §5's verdicts: 90 % U(10, 60) min (over before the
  verdict: ``proven``), 6 % U(60, 120) min (some outlast the verdict: one extension, then
  ``proven``), 4 % U(3¼, 6½) h (outlast both extensions: ``fail-open``, then usually a second
  cooldown).
* ``dead`` (1 %) senders are in one endless spell: their probes are never confirmed.
* 10 % of senders sit in groups: half with ``cooldown_delay`` 10–15 min (the §5 minimums), half
  3–8 min — delays under the short slot (+5–10 min) get no warm-up: the ``neutral`` exits.
Calibrated (seed 0, 660 senders, 7 days; README has the tables): per cooldown start 0.34
extensions, 3 312 in all (§5: 3 252 / 10 648 = 0.31), 1.29 warm-ups sent (1.23), 0.85 confirmed
(0.87); exits 86.0 % proven, 9.1 % fail-open, 4.9 % neutral (§5: ~86 / ~10 / ~4); starts #1 → #2
drop 7× (§5: 8 404 → 778, 11×).
A probe's answer arrives U(5, 60) s after it is sent.

Held-back time (the cost a shift lead trades)
----------------------------------------------
A sender *wants* its next customer send U(20, 60) min after the last; a send that goes out later
(group pacing ``send_from/to_message_interval`` in minutes, seed 000 §6; a cooldown and the 10 min
rest after it, §2; Need Check, §4) was *held back* by the difference, seconds.  Holds of live
senders are kept apart from dead devices' (whose sends would fail anyway: holding them is the
point of a fast-detection recipe), and a send still waiting when the run ends counts as an open
hold up to the end.  A *cohort* (the senders a recipe puts in groups) is tabulated apart, in the
recipe's run and in the baseline's (same fleet, same seed, no groups), so the two compare the same
senders.
"""
from __future__ import annotations

import heapq
import math
from collections import Counter
from dataclasses import dataclass, field

from sidecar.core.rng import KeyedRandom

from . import health as h
from .groups import Group, active_group

MIN, HOUR, DAY = 60.0, 3600.0, 86400.0
FAST = Group(id="sim-fast", name="fast (10–15 min)", priority=2, cooldown_delay_from=10, cooldown_delay_to=15)
TINY = Group(id="sim-tiny", name="tiny (3–8 min)", priority=1, cooldown_delay_from=3, cooldown_delay_to=8)


@dataclass(frozen=True)
class Model:
    spells_per_day: float = 10.0
    background: float = 0.005
    terminal: float = 0.002
    dead: float = 0.01
    grouped: float = 0.1
    spell_mix: tuple[tuple[float, float, float], ...] = (
        (0.90, 10 * MIN, 60 * MIN), (0.06, 60 * MIN, 120 * MIN), (0.04, 3.25 * HOUR, 6.5 * HOUR))
    send_every: tuple[float, float] = (20 * MIN, 60 * MIN)


@dataclass
class Stats:
    """What §5 tabulates, plus the time of each sender's path to Need Check."""

    starts: Counter = field(default_factory=Counter)  # ladder number → cooldown starts
    planned: list[float] = field(default_factory=list)  # planned durations, seconds
    planned_first: list[float] = field(default_factory=list)  # cooldown #1 only
    verdicts: Counter = field(default_factory=Counter)
    warmup_sent: int = 0
    warmup_confirmed: int = 0
    extensions: int = 0
    need_check: Counter = field(default_factory=Counter)  # path → count
    cycling_need_check: int = 0
    first_fail_to_need_check: list[float] = field(default_factory=list)
    cooldown_total: list[float] = field(default_factory=list)  # start → release, seconds
    first_total: list[float] = field(default_factory=list)  # the same, ladder cooldowns #1 only
    senders: int = 0
    days: float = 0.0
    sends: int = 0
    failed: int = 0  # customer sends that failed (retryable or terminal)
    held: list[float] = field(default_factory=list)  # live senders: each held send's wait, seconds (> 0)
    held_open: list[float] = field(default_factory=list)  # live senders: a send still waiting at the end
    held_dead: float = 0.0  # dead devices: seconds of holds, open ones included
    cohort: "Cohort" = field(default_factory=lambda: Cohort())
    window: Counter = field(default_factory=Counter)  # "crossing" / "kept": group cooldowns over a window edge


@dataclass
class Cohort:
    """The same figures for the cohort's senders only (those a recipe puts in groups)."""

    senders: int = 0
    sends: int = 0
    failed: int = 0
    starts: int = 0
    verdicts: Counter = field(default_factory=Counter)
    cooldown_total: list[float] = field(default_factory=list)  # start → release, seconds
    held: list[float] = field(default_factory=list)
    held_open: list[float] = field(default_factory=list)
    need_check: int = 0
    fail_to_need_check: list[float] = field(default_factory=list)  # first failure → Need Check, s


class _Sender:
    __slots__ = ("state", "groups", "dead", "spell_end", "next_spell", "spells", "first_fail", "started", "number",
                 "cohort", "wanted", "fail_group", "start_group")

    def __init__(self, name: str, groups: tuple[Group, ...], dead: bool, cohort: bool = False) -> None:
        self.state = h.SenderState(sender=name)
        self.groups, self.dead, self.cohort = groups, dead, cohort
        self.wanted = 0.0  # when it wanted its next customer send (unix s)
        self.fail_group: Group | None = None  # the group read at its last failure (seed 000 §6)
        self.start_group: Group | None = None
        self.spell_end, self.next_spell, self.spells = -1.0, 0.0, 0
        self.first_fail: float | None = None
        self.started: float | None = None
        self.number = 0


def sender_names(senders: int) -> list[str]:
    """The simulator's own sender names ``s0000`` … (keys of the keyed randomness)."""
    return [f"s{i:04d}" for i in range(senders)]


def share_cohort(names: list[str], share: float, seed: int = 0) -> list[bool]:
    """Exactly ``round(share × len(names))`` senders, picked by a keyed draw per name (so the
    same seed picks the same senders): the cohort a recipe puts in groups (seed 000 §6 "Що є в
    prod зараз": 132 of 660 Active senders are in groups, a share of 0.2).  ``share`` in [0, 1]."""
    rng = KeyedRandom(f"{seed}-cohort")
    k = round(share * len(names))
    chosen = set(sorted(names, key=lambda n: (rng.unit(n, "cohort"), n))[:k])
    return [n in chosen for n in names]


def simulate(senders: int = 660, days: float = 7.0, *, group: Group | None = None,
             fleet_groups: list[tuple[Group, ...]] | None = None, cohort: list[bool] | None = None,
             names: list[str] | None = None, seed: int = 0, model: Model = Model(),
             t0: float = 1_780_000_000.0) -> Stats:
    """Run ``senders`` senders for ``days`` virtual days.  Who is in which group:
    ``fleet_groups`` (per sender, its groups — several at once, the active one read at each
    failure and send, seed 000 §6), else ``group`` for every sender (a recipe on all), else the
    model's prod-like mix.  ``cohort`` (per sender) marks the senders tabulated apart in
    :attr:`Stats.cohort` (default: those with groups in ``fleet_groups``); ``names`` the senders'
    names (default :func:`sender_names`).  Returns :class:`Stats`."""
    rng = KeyedRandom(seed)
    machine = h.HealthMachine(KeyedRandom(f"{seed}-health"))
    names = names if names is not None else sender_names(senders)
    senders = len(names)
    st = Stats(senders=senders, days=days)
    fleet: list[_Sender] = []
    for i, name in enumerate(names):
        gs: tuple[Group, ...]
        if fleet_groups is not None:
            gs = tuple(fleet_groups[i])
        elif group is not None:
            gs = (group,)
        else:
            gs = ((FAST if rng.chance(0.5, name, "which") else TINY),) if rng.chance(model.grouped, name, "grouped") else ()
        in_cohort = cohort[i] if cohort is not None else bool(fleet_groups is not None and gs)
        fleet.append(_Sender(name, gs, rng.chance(model.dead, name, "dead"), in_cohort))
        st.cohort.senders += in_cohort
    end = t0 + days * DAY
    heap: list[tuple[float, int, int, str, bool]] = []
    seq = 0

    def push(t: float, i: int, kind: str, ok: bool = False) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(heap, (t, seq, i, kind, ok))

    def in_spell(sd: _Sender, t: float) -> bool:
        if sd.dead:
            return True
        while sd.next_spell <= t:  # advance the keyed Poisson process of spells up to t
            k, name = sd.spells, sd.state.sender
            if k:  # spell k-1 starts at next_spell: draw its length
                u, acc = rng.unit(name, "kind", k - 1), 0.0
                lo, hi = model.spell_mix[-1][1:]
                for p, a, b in model.spell_mix:
                    acc += p
                    if u < acc:
                        lo, hi = a, b
                        break
                sd.spell_end = max(sd.spell_end, sd.next_spell + rng.uniform(lo, hi, name, "len", k - 1))
            gap = -math.log(1 - rng.unit(name, "gap", k)) * DAY / model.spells_per_day
            sd.next_spell, sd.spells = (sd.next_spell if k else t0) + gap, k + 1
        return t < sd.spell_end

    def apply(i: int, result: h.HealthResult, t: float) -> None:
        sd, before = fleet[i], fleet[i].state
        sd.state = result.state
        for row in result.history:
            if row.code == h.STARTED:
                n = sd.state.cooldown_times
                st.starts[n] += 1
                st.cohort.starts += sd.cohort
                dur = (sd.state.cooldown_end or t) - t
                sd.start_group = g = sd.fail_group
                if g is not None and g.has_delay() and g.from_time is not None:
                    # seed 000 §6: "Через межу вікна нічого не «перестрибує»" — a cooldown that
                    # ends in another window keeps the duration of the group read at its failure
                    if active_group(list(sd.groups), t + dur) is not g:
                        st.window["crossing"] += 1
                        st.window["kept"] += 60 * g.cooldown_delay_from <= dur <= 60 * g.cooldown_delay_to
                st.planned.append(dur)
                if n == 1:
                    st.planned_first.append(dur)
                sd.started, sd.number = t, n
                if "cycling" in row.note:
                    st.cycling_need_check += 1
            elif row.code == h.FINISHED:
                st.verdicts[row.note] += 1
                if sd.cohort:
                    st.cohort.verdicts[row.note] += 1
                if sd.started is not None:
                    st.cooldown_total.append(t - sd.started)
                    if sd.cohort:
                        st.cohort.cooldown_total.append(t - sd.started)
                    if sd.number == 1 and (sd.start_group is None or not sd.start_group.has_delay()):
                        st.first_total.append(t - sd.started)
            elif row.code == h.WARMUP_SENT:
                st.warmup_sent += 1
            elif row.code == h.WARMUP_OK:
                st.warmup_confirmed += 1
            elif row.code == h.EXTENDED:
                st.extensions += 1
            elif row.code == h.NEED_CHECK_CODE:
                st.need_check[sd.state.need_check_path] += 1
                st.cohort.need_check += sd.cohort
                if sd.first_fail is not None:
                    st.first_fail_to_need_check.append(t - sd.first_fail)
                    if sd.cohort:
                        st.cohort.fail_to_need_check.append(t - sd.first_fail)
        if result.send_probe:
            # seed 000 §3: the warm-up is a p2p message that a webhook confirms within 3 h — a
            # device in a bad spell delivers it when the spell is over, it does not refuse it.
            # So the answer is "confirmed" U(5, 60) s after the later of "sent" and "spell
            # over", if that is before the verdict; otherwise it counts as unconfirmed at the
            # verdict (failed just before ``exit_at``), and the extension sends a new probe —
            # the seed's "extension through an unconfirmed warm-up".  A dead device never
            # delivers.  (Failing every probe sent during a spell at once — the first model —
            # turned spells that ended before the verdict into extensions: 5 846 vs §5's 3 252.)
            lag = rng.uniform(5, 60, sd.state.sender, "probe", sd.state.cooldown_no, sd.state.extensions)
            verdict = (sd.state.exit_at or t) - 1.0
            if sd.state.end_probe:  # Stack's health probe at the verdict: answered by the spell now
                push(t + lag, i, "probe", not sd.dead and not in_spell(sd, t))
                return
            ready = None if sd.dead else (sd.spell_end if in_spell(sd, t) else t) + lag
            if ready is not None and ready < verdict:
                push(ready, i, "probe", True)
            else:
                push(max(t + lag, verdict), i, "probe", False)
        nt = h.next_timer(sd.state)
        if nt is not None and nt != h.next_timer(before) or (nt is not None and result.history):
            push(nt, i, "tick")

    def hold(sd: _Sender, wait: float, open_: bool) -> None:
        if wait <= 0:
            return
        if sd.dead:
            st.held_dead += wait
            return
        (st.held_open if open_ else st.held).append(wait)
        if sd.cohort:
            (st.cohort.held_open if open_ else st.cohort.held).append(wait)

    for i, sd in enumerate(fleet):
        sd.wanted = t0 + rng.uniform(0, model.send_every[1], sd.state.sender, "first")
        push(sd.wanted, i, "send")
    while heap:
        t, _, i, kind, ok = heapq.heappop(heap)
        if t >= end:
            break
        sd = fleet[i]
        if kind == "tick":
            if h.next_timer(sd.state) == t:
                apply(i, machine.handle(sd.state, h.Tick(t)), t)
            continue
        if kind == "probe":  # a dead device never answers: its probe stays unconfirmed (not pushed)
            apply(i, machine.handle(sd.state, h.ProbeResult(t, ok=ok)), t)
            continue
        may, nxt = h.may_send(sd.state, t)
        if not may:
            if nxt is not None:
                push(max(nxt, t + 1), i, "send")
            continue
        hold(sd, t - sd.wanted, False)
        g = active_group(list(sd.groups), t) if sd.groups else None  # its window, read now
        sd.fail_group = g
        sd.state = machine.handle(sd.state, h.Sent(t, g)).state
        st.sends += 1
        st.cohort.sends += sd.cohort
        n = sd.state.sent
        bad = in_spell(sd, t) or rng.chance(model.background, sd.state.sender, "bg", n)
        if bad:
            st.failed += 1
            st.cohort.failed += sd.cohort
            terminal = not sd.dead and rng.chance(model.terminal, sd.state.sender, "term", n)
            if sd.first_fail is None and sd.state.cooldown_times == 0 and not terminal:
                sd.first_fail = t
            apply(i, machine.handle(sd.state, h.Failed(t + 1, t, retryable=not terminal, group=g)), t + 1)
        else:
            apply(i, machine.handle(sd.state, h.Delivered(t + 1, t)), t + 1)
            if sd.state.cooldown_times == 0:
                sd.first_fail = None
        sd.wanted = t + rng.uniform(*model.send_every, sd.state.sender, "every", n)
        push(max(sd.wanted, sd.state.next_send_at), i, "send")
    for sd in fleet:  # sends still waiting at the end: held up to the end
        hold(sd, end - sd.wanted, True)
    return st


def planned_five(group: Group | None, samples: int = 200, seed: int = 0) -> list[float]:
    """The seed's own arithmetic for "five cooldowns pass in …": the sum of the five planned
    durations (plus the 10 min rest after each of the first four), per sampled sender, seconds."""
    machine = h.HealthMachine(KeyedRandom(seed))
    out = []
    for k in range(samples):
        s, total = h.SenderState(sender=f"p{k}"), 0.0
        t = 0.0
        for n in range(5):
            while s.state == h.ACTIVE:
                s = machine.handle(s, h.Failed(t, t, group=group)).state
                t += 1
            total += (s.cooldown_end or t) - t + (h.REST if n < 4 else 0)
            s = h.SenderState(sender=s.sender, cooldown_times=s.cooldown_times, cooldown_no=s.cooldown_no)
        out.append(total)
    return out
