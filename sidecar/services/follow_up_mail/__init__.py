"""Follow-up Mail service: the pure decision core (seed 001; seed 003 "Follow-up mail"; DESIGN §8).

* :mod:`.marker` — the ``favorite.followUpMail`` value, its JSON codec and idempotency keys;
* :mod:`.sources` — the five sources as pure functions of (pair state, event, now, keyed rng);
* :mod:`.check` — the per-pair lock: one mail-history read, the final check, at most one candidate.

Nothing here reads a clock, awaits, or touches a store: every function returns facts
(candidates, marker changes, timers, requests, notes) that the runtime applies
(``docs/follow_up_mail.md`` lists them).
"""
