"""Group windows, validation and the manage operations (seed 000 §6, DESIGN §10)."""
from __future__ import annotations

import calendar
import os
import time

import pytest

from sidecar.core.rng import KeyedRandom
from sidecar.senders import health as h
from sidecar.senders import manage as m
from sidecar.senders.groups import STACK_GROUP, Group, GroupError, active_group, covers, validate_group

DAY0 = calendar.timegm((2026, 12, 1, 0, 0, 0))


def at(hms: str, day: int = 0) -> float:
    hh, mm, ss = map(int, hms.split(":"))
    return DAY0 + day * 86400 + hh * 3600 + mm * 60 + ss


@pytest.fixture(params=["Asia/Tokyo", "America/Los_Angeles"])
def non_utc_tz(request, monkeypatch):
    monkeypatch.setenv("TZ", request.param)
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize("hms,inside", [("21:59:59", False), ("22:00:00", True), ("05:59:59", True),
                                        ("06:00:00", False), ("00:00:00", True), ("12:00:00", False)])
def test_window_crossing_midnight_edges(non_utc_tz, hms, inside):
    assert os.environ["TZ"] != "UTC"
    night = Group(id="n", name="night", priority=1, from_time="22:00", to_time="06:00:00")
    assert covers(night, at(hms)) is inside
    assert covers(night, at(hms, day=40)) is inside


def test_window_same_day_start_inclusive_end_exclusive(non_utc_tz):
    day = Group(id="d", name="day", priority=1, from_time="08:00", to_time="20:00")
    assert covers(day, at("08:00:00")) and covers(day, at("19:59:59")) and not covers(day, at("20:00:00"))


def test_highest_priority_covering_group_wins():
    night = Group(id="n", name="night", priority=5, from_time="22:00", to_time="06:00")
    always = Group(id="a", name="always", priority=1)
    assert active_group([always, night], at("23:00:00")) is night
    assert active_group([always, night], at("12:00:00")) is always
    assert active_group([night], at("12:00:00")) is None


@pytest.mark.parametrize("body,field", [
    ({"name": "x", "priority": 1, "from_time": "24:00", "to_time": "06:00"}, "from_time"),
    ({"name": "x", "priority": 1, "from_time": "22:00", "to_time": "6pm"}, "to_time"),
    ({"name": "x", "priority": 1, "from_time": "22:00"}, "to_time"),
    ({"name": "x", "priority": 7}, "priority"),
    ({"name": "", "priority": 2}, "name"),
    ({"name": "x", "priority": 2, "failed_in_row": -1}, "failed_in_row"),
    ({"name": "x", "priority": 2, "cooldown_delay_from": 45, "cooldown_delay_to": 15}, "cooldown_delay_to"),
    ({"name": "x", "priority": 2, "colour": "red"}, "colour"),
    # a breaker's finds: values SQLite or a datetime cannot hold stopped the sidecar or bricked the dir
    ({"name": "x", "priority": 2**63}, "priority"),
    ({"name": "x", "priority": -(2**63) - 1}, "priority"),
    ({"name": "x", "priority": 2, "cooldown_delay_from": 1e308, "cooldown_delay_to": float("inf")}, "cooldown_delay_from"),
    ({"name": "x", "priority": 2, "cooldown_delay_from": 1, "cooldown_delay_to": float("inf")}, "cooldown_delay_to"),
    ({"name": "x", "priority": 2, "cooldown_delay_from": 1e300, "cooldown_delay_to": 1e301}, "cooldown_delay_from"),
    ({"name": "x", "priority": 2, "send_to_message_interval": 24 * 60 + 1}, "send_to_message_interval"),
    ({"name": "x", "priority": 2, "failed_in_row": float("nan")}, "failed_in_row"),
    ({"name": "a\u0000b\n\u001b[31m", "priority": 2}, "name"),
    ({"name": "n" * 201, "priority": 2}, "name"),
    # a breaker's find: an empty window (start == end) meant "always" silently; omit the window
    ({"name": "x", "priority": 2, "from_time": "08:00", "to_time": "08:00"}, "from_time"),
    ({"name": "x", "priority": 2, "from_time": "08:00", "to_time": "08:00:00"}, "from_time"),
])
def test_validation_names_the_field(body, field):
    other = Group(id="o", name="o", priority=7)
    with pytest.raises(GroupError) as e:
        validate_group(body, id="g", others=[other])
    assert e.value.field == field


def reg() -> m.Registry:
    r = m.with_senders(m.Registry(), ["stack", "hook", "tg"])
    r = m.groups_create(r, "g1", {"name": "fast", "priority": 10, "cooldown_delay_from": 15, "cooldown_delay_to": 45})
    return m.groups_create(r, "g2", {"name": "night", "priority": 20, "from_time": "22:00", "to_time": "06:00"})


def test_manage_errors_change_nothing():
    r = reg()
    cases = [
        (lambda: m.groups_create(r, "g3", {"name": "dup", "priority": 10}), "priority"),
        (lambda: m.groups_patch(r, "g2", {"to_time": "25:00"}), "to_time"),
        (lambda: m.assignments(r, "set", [{"sender": "hook", "groups": ["g1"]}] * 501), "items"),
        (lambda: m.assignments(r, "add", [{"sender": "nope", "groups": ["g1"]}]), "items[0].sender"),
        (lambda: m.assignments(r, "add", [{"sender": "hook", "groups": ["g1", "zz"]}]), "items[0].groups[1]"),
        (lambda: m.group_senders(r, "g1", "add", ["hook", "ghost"]), "senders[1]"),
        (lambda: m.groups_get(r, "zz"), "id"),
        # a breaker's finds: a sender twice in one call counted twice (and the last item won);
        # the stack sender has its own built-in group; a missing sender read "unknown sender None"
        (lambda: m.assignments(r, "set", [{"sender": "hook", "groups": ["g1"]},
                                          {"sender": "hook", "groups": ["g2"]}]), "items[1].sender"),
        (lambda: m.assignments(r, "add", [{"sender": "stack", "groups": ["g1"]}]), "items[0].sender"),
        (lambda: m.assignments(r, "set", [{"sender": "stack", "groups": ["g1"]}]), "items[0].sender"),
        (lambda: m.group_senders(r, "g1", "add", ["hook", "stack"]), "senders[1]"),
        (lambda: m.group_senders(r, "g1", "set", ["stack"]), "senders[0]"),
        (lambda: m.assignments(r, "add", [{"groups": ["g1"]}]), "items[0].sender"),
        (lambda: m.groups_patch(r, "g2", {"from_time": "06:00"}), "from_time"),  # = its to_time
    ]
    for call, field in cases:
        with pytest.raises(m.ManageError) as e:
            call()
        assert e.value.field == field
    assert r == reg()


def test_assignments_both_ways():
    r = m.assignments(reg(), "set", [{"sender": "hook", "groups": ["g1", "g2"]}])
    assert [g.id for g in r.groups_of("hook")] == ["g1", "g2"]
    r = m.group_senders(r, "g1", "set", ["tg"])
    assert r.assignments["hook"] == ("g2",) and r.assignments["tg"] == ("g1",)
    r = m.assignments(r, "remove", [{"sender": "tg", "groups": ["g1"]}])
    assert "tg" not in r.assignments
    r = m.groups_delete(m.group_senders(r, "g2", "add", ["tg"]), "g2")
    assert all("g2" not in gs for gs in r.assignments.values())
    assert m.groups_list(r)[0]["id"] == "g1"
    assert r.groups_of("stack")[0] is STACK_GROUP


def test_group_change_never_touches_running_cooldown():
    machine = h.HealthMachine(KeyedRandom(1))
    r = m.assignments(reg(), "set", [{"sender": "hook", "groups": ["g1"]}])
    s = r.senders["hook"]
    t = at("12:00:00")
    for i in range(2):
        s = machine.handle(s, h.Failed(t + i, t + i - 1, group=r.active_group("hook", t + i))).state
    end = s.cooldown_end
    assert s.state == h.COOLDOWN and end - s.cooldown_start <= 45 * 60
    r = m.groups_patch(r, "g1", {"cooldown_delay_from": 300, "cooldown_delay_to": 400})
    step = machine.handle(s, h.Tick(s.probe_at))
    assert step.state.cooldown_end == end


def test_recover_writes_106():
    machine = h.HealthMachine(KeyedRandom(1))
    r = reg()
    r = m.with_senders(r, [])
    s = h.SenderState(sender="hook", state=h.NEED_CHECK, cooldown_times=5, need_check_path="A")
    r = m.Registry(r.groups, r.assignments, {**r.senders, "hook": s})
    r2, rows = m.senders_recover(r, machine, "hook", at("10:00:00"))
    assert r2.senders["hook"].state == h.ACTIVE and r2.senders["hook"].cooldown_times == 0
    assert [x.code for x in rows] == [106]
    assert m.sender_view(r2, "hook")["state"] == "active"
    with pytest.raises(m.ManageError):
        m.senders_recover(r, machine, "ghost", 0)


def test_stack_keeps_its_own_group():
    """The ``stack`` sender is in the built-in Stack group only (DESIGN §10): it cannot join a
    user group and an assignment stored by an older sidecar is ignored.  Naming it in an assignment
    is refused in every mode (a breaker's F11/F12: ``set []`` and ``remove`` answered ok and changed
    nothing, which read as if they had)."""
    r = m.groups_create(reg(), "g9", {"name": "top", "priority": 2_000_000, "failed_in_row": 1})
    with pytest.raises(m.ManageError) as e:
        m.assignments(r, "add", [{"sender": "stack", "groups": ["g9"]}])
    assert e.value.field == "items[0].sender" and "built-in" in e.value.message
    old = m.Registry(r.groups, {**r.assignments, "stack": ("g9",)}, r.senders)  # an older file
    assert old.groups_of("stack") == [STACK_GROUP]
    assert old.active_group("stack", at("12:00:00")) is STACK_GROUP
    for call, field in ((lambda: m.assignments(r, "remove", [{"sender": "stack", "groups": ["g9"]}]), "items[0].sender"),
                        (lambda: m.assignments(r, "set", [{"sender": "stack", "groups": []}]), "items[0].sender"),
                        (lambda: m.assignments(r, "set", [{"sender": "hook", "groups": ["g9"]},
                                                          {"sender": "stack", "groups": []}]), "items[1].sender"),
                        (lambda: m.group_senders(r, "g9", "remove", ["stack"]), "senders[0]")):
        with pytest.raises(m.ManageError) as e:
            call()
        assert e.value.field == field and "built-in" in e.value.message


def test_assignment_items_refuse_unknown_keys_and_dedupe_group_ids():
    with pytest.raises(m.ManageError) as e:
        m.assignments(reg(), "add", [{"sender": "hook", "groups": ["g1"], "grops": ["g2"]}])
    assert e.value.field == "items[0].grops"
    r = m.assignments(reg(), "set", [{"sender": "hook", "groups": ["g1", "g1", "g2", "g1"]}])
    assert r.assignments["hook"] == ("g1", "g2")  # a group id twice in one item is one assignment


def test_names_are_deduplicated_where_they_are_a_set():
    r = m.group_senders(reg(), "g1", "set", ["hook", "hook", "tg"])
    assert m.groups_get(r, "g1")["senders"] == ["hook", "tg"]


def test_recover_of_an_active_sender_is_a_no_op():
    """Recovery is for a sender in cooldown or Need Check; on an active one it used to write a
    106 and reset its counters — a recovery that never happened.  Now nothing changes."""
    machine = h.HealthMachine(KeyedRandom(1))
    r = reg()
    once = h.SenderState(sender="hook", failed_in_row=1)  # active, one failure counted
    r = m.Registry(r.groups, r.assignments, {**r.senders, "hook": once})
    assert m.senders_recover(r, machine, "hook", at("10:00:00")) == (r, [])
    assert not m.needs_recovery(r, "hook")
    with pytest.raises(m.ManageError) as e:
        m.senders_recover(r, machine, None, at("10:00:00"))  # type: ignore[arg-type]
    assert e.value.field == "sender" and "None" not in str(e.value)


def test_the_largest_allowed_values_make_valid_instants():
    """At the bounds every derived instant (cooldown end, pacing) is still a time a shift lead can
    read: nothing overflows ``datetime`` or SQLite."""
    g = validate_group({"name": "x", "priority": 10**12, "cooldown_delay_from": 7 * 24 * 60,
                        "cooldown_delay_to": 7 * 24 * 60, "send_from_message_interval": 24 * 60,
                        "send_to_message_interval": 24 * 60, "failed_in_row": 1000}, id="g", others=[])
    assert h.utc_text(2_000_000_000 + g.cooldown_delay_to * 60).endswith(" UTC")
