"""The seed's claims for a fleet-simulator recipe: only what seed 000 states for *that* recipe.

Seed 000 §6 "Рецепти" names four recipes, each with its own claim; §5 gives the prod picture of
the default mix (660 senders × 7 days, 132 of them in groups); §2 gives the ladder's worst
cooldown #1.  A claim's row appears only when the recipe is the one the seed states it for
(:func:`recipes` recognises them from the groups' fields), so the 15–45 min figure is shown for a
15–45 min group and nowhere else:

* ``fast`` — «Швидко виявляти мертві девайси»: a group (no window) with ``cooldown_delay`` 15–45 min: "five
  cooldowns pass in 3–5 h instead of ~34, path A fires within a working shift; the price: less
  time to rest for a live but unstable account".
* ``long`` — «Дати когорті довшу повідь»: (no window) ``failed_in_row`` 3–4 with ``cooldown_delay``
  120–240 min: "enters less often, sits longer, the warm-up always fits".
* ``day_night`` — «Різна поведінка вдень і вночі»: two groups on the same senders, 08:00–20:00
  and 20:00–08:00: "nothing jumps over the window's edge: parameters are read only at the failure".
* ``short`` — «Уникати затримок < 15 хв»: a group delay under 15 min "saves nothing substantial
  but takes away the only proof of delivery" (the warm-up, §3: the neutral exits).
* ``prod`` — no recipe (the simulator's prod-like mix): §5's verdict shares and warm-up counts.

Rows are dicts ``{"claim", "source", "seed", "recipe", "baseline"}`` (text cells; "—" where a
column does not apply).
"""
from __future__ import annotations

import statistics
from typing import Any

from sidecar.senders.groups import Group, parse_time
from sidecar.senders.simulate import planned_five

DAY_WINDOW, NIGHT_WINDOW = (8 * 3600, 20 * 3600), (20 * 3600, 8 * 3600)


def _window(g: Group) -> tuple[int, int] | None:
    if g.from_time is None or g.to_time is None:
        return None
    return parse_time(g.from_time, "from_time"), parse_time(g.to_time, "to_time")


def _fast(g: Group) -> bool:
    return g.from_time is None and (g.cooldown_delay_from, g.cooldown_delay_to) == (15, 45)


def recipes(groups: list[Group]) -> list[str]:
    """Which of seed 000 §6's recipes ``groups`` (a recipe's groups, on the same senders) is;
    ``["prod"]`` for no groups given (the prod-like mix of §5)."""
    if not groups:
        return ["prod"]
    out = []
    # the fast and the long recipes name no window: their figures assume the group always applies
    if any(_fast(g) for g in groups):
        out.append("fast")
    if any(g.from_time is None and 3 <= g.failed_in_row <= 4
           and (g.cooldown_delay_from, g.cooldown_delay_to) == (120, 240) for g in groups):
        out.append("long")
    windows = {_window(g) for g in groups}
    if DAY_WINDOW in windows and NIGHT_WINDOW in windows:
        out.append("day_night")
    if any(g.has_delay() and g.cooldown_delay_from < 15 for g in groups):
        out.append("short")
    return out


def _h(s: float | None) -> str:
    return "—" if s is None else f"{s / 3600:.2f} h"


def _med(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _nc(xs: list[float]) -> str:
    return f"{_h(_med(xs))} (n={len(xs)})"


def _share(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "—"


def claims(groups: list[Group], recipe: dict[str, Any], baseline: dict[str, Any]) -> list[dict[str, str]]:
    """The claim rows for ``groups`` given the two runs' summaries (:func:`electron_stub.fleet.summary`)."""
    rows: list[dict[str, str]] = []
    rc, bc = recipe["cohort"], baseline["cohort"]

    def row(claim: str, source: str, seed: str, r: str, b: str) -> None:
        rows.append({"claim": claim, "source": source, "seed": seed, "recipe": r, "baseline": b})

    kinds = recipes(groups)
    if "prod" in kinds:
        ex = sum(recipe["verdicts"].values())
        for v, seed in (("proven", "~86 %"), ("fail-open", "~10 %"), ("neutral", "~4 %")):
            row(f"exits {v}", "seed 000 §5", seed, _share(recipe["verdicts"].get(v, 0), ex), "—")
        if recipe["senders"] == 660 and recipe["days"] == 7:  # §5's counts are for 660 × 7 days
            for k, seed in (("warmup_sent", "13 060"), ("warmup_confirmed", "9 230"), ("extensions", "3 252")):
                row(k.replace("_", " "), "seed 000 §5 (660 × 7 d)", seed, str(recipe[k]), "—")
    if "fast" in kinds:
        g = next(g for g in groups if _fast(g))
        five, ladder = planned_five(g), planned_five(None)
        row("five cooldowns pass in (planned + rest, median)", "seed 000 §6 recipe «Швидко виявляти»",
            "3–5 h instead of ~34 h", f"{_h(_med(five))} ({_h(min(five))}–{_h(max(five))})", _h(_med(ladder)))
        row("first failure → Need Check (extensions and pacing included), cohort median (n)",
            "seed 000 §6 recipe «Швидко виявляти»", "within a working shift",
            _nc(rc["fail_to_need_check"]), _nc(bc["fail_to_need_check"]))
        row("price: time a live account rests (cohort mean cooldown)", "seed 000 §6 recipe «Швидко виявляти»",
            "less", _h(rc["mean_cooldown_s"]), _h(bc["mean_cooldown_s"]))
    if "long" in kinds:
        row("enters less often (cohort cooldown starts per sender)", "seed 000 §6 recipe «Дати довшу повідь»", "fewer",
            f"{rc['starts_per_sender']:.2f}", f"{bc['starts_per_sender']:.2f}")
        row("sits longer (cohort mean cooldown)", "seed 000 §6 recipe «Дати довшу повідь»", "longer",
            _h(rc["mean_cooldown_s"]), _h(bc["mean_cooldown_s"]))
        row("the warm-up always fits (cohort neutral exits)", "seed 000 §6 recipe «Дати довшу повідь»", "0",
            str(rc["verdicts"].get("neutral", 0)), str(bc["verdicts"].get("neutral", 0)))
    if "day_night" in kinds:
        w = recipe["window"]
        row("nothing jumps the window edge: cooldowns that end in the other window and keep the "
            "failure-time group's delay", "seed 000 §6 recipe «Вдень і вночі»", "all",
            f"{w.get('kept', 0)} of {w.get('crossing', 0)}", "—")
    if "short" in kinds:
        row("delays < 15 min save nothing substantial (cohort held-back, total)", "seed 000 §6 «Уникати затримок < 15 хв»",
            # the seed compares with delays of 15 min and more, the baseline here is the ladder: the
            # row shows the held-back time for a lead to weigh, it cannot confirm "nothing"
            "nothing vs ≥ 15 min delays (baseline: ladder)", _h(rc["held"]["total_s"]), _h(bc["held"]["total_s"]))
        row("… but lose the only proof of delivery (cohort neutral exits)", "seed 000 §6, §3 (slot +5–10 min)",
            "more", _share(rc["verdicts"].get("neutral", 0), sum(rc["verdicts"].values())),
            _share(bc["verdicts"].get("neutral", 0), sum(bc["verdicts"].values())))
    if not kinds:
        row("seed 000 states no figure for this recipe (§6 names 15–45 min, 3–4 × 120–240 min, "
            "08:00–20:00 + 20:00–08:00, < 15 min)", "seed 000 §6", "—", "—", "—")
    ladder_first = baseline["worst_first_s"]
    if ladder_first is not None:
        row("worst cooldown #1 on the default ladder, start → release", "seed 000 §2",
            "≈ 2 h + ≈ 2 h extensions", "—", _h(ladder_first))
    return rows
