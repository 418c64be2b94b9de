"""Durable pending burst / read triggers (sidecar/services/follow_up_mail/pending.py; seed 001
"Ініціалізація", "Збереження"): written with the offer, deleted with the check, restored once."""
from __future__ import annotations

from types import SimpleNamespace

from sidecar.services.follow_up_mail import marker as mk
from sidecar.services.follow_up_mail import sources as src
from sidecar.services.follow_up_mail.pending import SCOPE, PendingTriggers, key_of

T0 = 1_796_025_600.0


class Rt(SimpleNamespace):
    def __init__(self, local_state=None):
        super().__init__(tu="tu-1", local_state=local_state or {}, ops=[])

    def put_state(self, step, scope, key, value):
        self.ops.append(("put", scope, key, value))

    def delete_state(self, step, scope, key):
        self.ops.append(("del", scope, key))


STEP = SimpleNamespace(now=T0)


def test_only_burst_and_read_triggers_are_written_once_and_settled_once():
    rt = Rt()
    p = PendingTriggers(rt)
    p.write(STEP, "ru-1", src.Trigger("burst", "u-6", T0))
    p.write(STEP, "ru-1", src.Trigger("burst", "u-6", T0))  # the same offer again: one row
    p.write(STEP, "ru-1", src.Trigger("post_chat", "u-1", T0, online_required=False))  # the marker is its state
    p.write(STEP, "ru-1", src.Trigger("last_mail_6h", "", T0))  # no state (seed 001)
    key = key_of("ru-1", "burst", "u-6")
    assert rt.ops == [("put", SCOPE, key, {"ru": "ru-1", "source": "burst", "ref": "u-6", "at": T0})]
    p.settle(STEP, "ru-1", "burst", "u-6")
    p.settle(STEP, "ru-1", "burst", "u-6")
    p.settle(STEP, "ru-1", "last_mail_6h", "")
    assert rt.ops[1:] == [("del", SCOPE, key)]


def test_restore_offers_unchecked_rows_and_deletes_checked_foreign_and_unreadable_ones():
    rows = {
        key_of("ru-1", "burst", "u-6"): {"ru": "ru-1", "source": "burst", "ref": "u-6", "at": T0},
        key_of("ru-1", "mail_read", "rd-1"): {"ru": "ru-1", "source": "mail_read", "ref": "rd-1", "at": T0 + 5},
        key_of("ru-2", "burst", "u-9"): {"ru": "ru-2", "source": "burst", "ref": "u-9", "at": T0},  # checked
        key_of("ru-3", "burst", "u-1"): {"ru": "ru-3", "source": "burst", "ref": "u-1", "at": T0},  # not a favorite
        "junk": {"ru": "ru-1", "source": "post_chat", "ref": "x", "at": True},
    }
    rt = Rt({SCOPE: rows})
    p = PendingTriggers(rt)
    out = p.restore(STEP, {"ru-1": mk.MailMarker(), "ru-2": mk.MailMarker(last_burst_source="u-9")})
    assert out == {"ru-1": [src.Trigger("burst", "u-6", T0), src.Trigger("mail_read", "rd-1", T0 + 5)]}
    assert sorted(op[2] for op in rt.ops if op[0] == "del") == sorted(
        ["junk", key_of("ru-2", "burst", "u-9"), key_of("ru-3", "burst", "u-1")])
    p.end(STEP)  # a logout deletes what is still pending
    assert sorted(op[2] for op in rt.ops[3:]) == sorted([key_of("ru-1", "burst", "u-6"),
                                                         key_of("ru-1", "mail_read", "rd-1")])
