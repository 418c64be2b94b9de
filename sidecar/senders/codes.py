"""What each sender-history code means, in plain words for a shift lead.

The codes are seed 000's EVENT numbers (the production history rows the seed describes); the
sidecar writes them from :mod:`sidecar.senders.health` (constants in
:mod:`sidecar.senders.table`).  :data:`CODE_MEANING` is the one table every printer uses
(``sidecar senders history``, the HTML report); an unknown code reads "unknown code" rather
than failing, so an older CLI can show a newer sidecar's history.
"""
from __future__ import annotations

from .table import (EXTENDED, FAILED, FINISHED, NEED_CHECK_CODE, RECOVERED, STARTED, WARMUP_OK,
                    WARMUP_SENT)

#: code → (short name, one sentence); the source of each rule in the comment beside it
CODE_MEANING: dict[int, tuple[str, str]] = {
    # seed 000 §3: «Cooldown finished 💧» (EVENT 100), the verdict in the note
    FINISHED: ("cooldown finished", "the sender is back in service; the note says why it was let out"),
    # seed 000 §1-§2: failed_in_row reached the limit, the ladder picks the length
    STARTED: ("cooldown started", "too many failed sends in a row: the sender rests, no customer sends"),
    # seed 000 §2: an unconfirmed warm-up extends the cooldown, up to 2 times by 55–70 min
    EXTENDED: ("cooldown extended", "its test message was not confirmed: the rest is made longer"),
    # seed 000 §4: the two paths into Need Check (A: the ladder ran out, B: warm-ups never confirmed)
    NEED_CHECK_CODE: ("Need Check", "the sender stopped until a person checks it and recovers it"),
    # seed 000 §3: EVENT 104 🧊📨, a p2p test message in the last 75 min of the cooldown
    WARMUP_SENT: ("warm-up sent", "a test message was sent to see whether the sender delivers again"),
    # seed 000 §3: EVENT 105 🧊✅, a delivery confirmed within 3 h
    WARMUP_OK: ("warm-up confirmed", "the test message was delivered: the sender may come back"),
    # seed 000 §2 «Вручну: адмін-дії recovery / mark as active»; §6's manage API
    RECOVERED: ("manual recovery", "a person put the sender back in service by hand"),
    # seed 000 §1: EVENT 109 📉, every failed customer send counts +1 in failed_in_row
    FAILED: ("failed send", "a customer send failed; enough of them in a row start a cooldown"),
}


def meaning(code: int) -> tuple[str, str]:
    """``(short name, sentence)`` of ``code``; an unknown code says so instead of failing."""
    return CODE_MEANING.get(code, ("unknown code", f"code {code} is not one this sidecar knows"))
