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


class _Sender:
    __slots__ = ("state", "group", "dead", "spell_end", "next_spell", "spells", "first_fail", "started", "number")

    def __init__(self, name: str, group: Group | None, dead: bool) -> None:
        self.state = h.SenderState(sender=name)
        self.group, self.dead = group, dead
        self.spell_end, self.next_spell, self.spells = -1.0, 0.0, 0
        self.first_fail: float | None = None
        self.started: float | None = None
        self.number = 0


def simulate(senders: int = 660, days: float = 7.0, *, group: Group | None = None, seed: int = 0,
             model: Model = Model(), t0: float = 1_780_000_000.0) -> Stats:
    """Run ``senders`` senders for ``days`` virtual days.  ``group`` puts every sender in that one
    group (a shift lead's recipe) instead of the model's prod-like mix.  Returns :class:`Stats`."""
    rng = KeyedRandom(seed)
    machine = h.HealthMachine(KeyedRandom(f"{seed}-health"))
    st = Stats(senders=senders, days=days)
    fleet: list[_Sender] = []
    for i in range(senders):
        name = f"s{i:04d}"
        g = group
        if g is None and rng.chance(model.grouped, name, "grouped"):
            g = FAST if rng.chance(0.5, name, "which") else TINY
        fleet.append(_Sender(name, g, rng.chance(model.dead, name, "dead")))
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
                dur = (sd.state.cooldown_end or t) - t
                st.planned.append(dur)
                if n == 1:
                    st.planned_first.append(dur)
                sd.started, sd.number = t, n
                if "cycling" in row.note:
                    st.cycling_need_check += 1
            elif row.code == h.FINISHED:
                st.verdicts[row.note] += 1
                if sd.started is not None:
                    st.cooldown_total.append(t - sd.started)
                    if sd.number == 1 and (sd.group is None or not sd.group.has_delay()):
                        st.first_total.append(t - sd.started)
            elif row.code == h.WARMUP_SENT:
                st.warmup_sent += 1
            elif row.code == h.WARMUP_OK:
                st.warmup_confirmed += 1
            elif row.code == h.EXTENDED:
                st.extensions += 1
            elif row.code == h.NEED_CHECK_CODE:
                st.need_check[sd.state.need_check_path] += 1
                if sd.first_fail is not None:
                    st.first_fail_to_need_check.append(t - sd.first_fail)
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

    for i, sd in enumerate(fleet):
        push(t0 + rng.uniform(0, model.send_every[1], sd.state.sender, "first"), i, "send")
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
        g = active_group([sd.group], t) if sd.group is not None else None  # its window, read now
        sd.state = machine.handle(sd.state, h.Sent(t, g)).state
        st.sends += 1
        n = sd.state.sent
        bad = in_spell(sd, t) or rng.chance(model.background, sd.state.sender, "bg", n)
        if bad:
            terminal = not sd.dead and rng.chance(model.terminal, sd.state.sender, "term", n)
            if sd.first_fail is None and sd.state.cooldown_times == 0 and not terminal:
                sd.first_fail = t
            apply(i, machine.handle(sd.state, h.Failed(t + 1, t, retryable=not terminal, group=g)), t + 1)
        else:
            apply(i, machine.handle(sd.state, h.Delivered(t + 1, t)), t + 1)
            if sd.state.cooldown_times == 0:
                sd.first_fail = None
        gap = rng.uniform(*model.send_every, sd.state.sender, "every", n)
        push(max(t + gap, sd.state.next_send_at), i, "send")
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
