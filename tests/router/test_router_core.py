"""The router's pure core on a virtual clock: matching, payload any-of and missing keys, match
modes, dedup and throttle windows at their edges, the built-in Stack route, templates
(DESIGN §10; seed 002)."""
from __future__ import annotations

import pytest

from sidecar.router.matching import matching, payload_matches, rule_matches
from sidecar.router.model import (RoutingEvent, RouterInputError, StackWrite, parse_event, parse_rule)
from sidecar.router.render import TemplateFailure, render
from sidecar.router.state import Ahead, RouterState
from sidecar.router.route import route

T0 = 1_764_489_600.0  # 2025-11-30T08:00:00Z
TARGETS = {"stack": "stack", "audit": "journal", "ops-telegram": "telegram", "crm-hook": "webhook"}


def ev(source="electron", subject="alert", action="fired", priority="normal", payload=None, **kw) -> RoutingEvent:
    return RoutingEvent(source=source, subject=subject, action=action, priority=priority,
                 payload=payload or {}, **kw)


def rule(name="r", conditions=None, actions=None, **kw):
    return parse_rule({"name": name, "conditions": conditions or {},
                       "actions": actions or [{"target": "audit"}], **kw}, TARGETS)


def state(*rules, mode="all", window=86400.0) -> RouterState:
    return RouterState(prefix="ev-", rules={r.name: r for r in rules}, match_mode=mode,
                       dedup_window_s=window)


def step(st: RouterState, events, now):
    """One step: route, then (as after a successful commit) evolve the state."""
    r = route(st, events if isinstance(events, list) else [events], now, TARGETS)
    st.apply(r)
    return r


def statuses(routing, target=None):
    return [d.status for d in routing.deliveries if target is None or d.target == target]


# ---- matching ---------------------------------------------------------------------------------

def test_payload_any_of_and_missing_keys():
    wanted = {"host": ["melody", "pilar"]}
    assert payload_matches({"host": "melody"}, wanted)
    assert payload_matches({"host": "pilar", "extra": 1}, wanted)
    assert not payload_matches({"host": "other"}, wanted)
    assert not payload_matches({}, wanted)  # a missing key does not match a value …
    assert payload_matches({}, {"host": None})  # … but reads as null (seed 002 actual.get(key))
    assert payload_matches({}, {"host": ["melody", None]})  # … also in a list holding null
    assert not payload_matches({"host": "melody"}, {"host": None})
    assert payload_matches({"host": None}, {"host": None})
    assert payload_matches({"n": 1.0}, {"n": 1}) and not payload_matches({"n": True}, {"n": 1})
    assert payload_matches({"tags": ["a"]}, {"tags": [["a"]]})  # a list value is matched by any-of of lists


def test_conditions_each_narrow():
    r = rule(conditions={"source": "electron", "subjects": ["alert"], "actions": ["fired", "cleared"],
                         "priority_min": "high"})
    assert rule_matches(r, ev(priority="high")) and rule_matches(r, ev(priority="critical"))
    assert not rule_matches(r, ev(priority="normal"))
    assert not rule_matches(r, ev(priority="high", source="sidecar"))
    assert not rule_matches(r, ev(priority="high", subject="disk"))
    assert not rule_matches(r, ev(priority="high", action="muted"))
    assert rule_matches(rule(), ev(source="anything"))  # no condition: every event
    assert not rule_matches(rule(enabled=False), ev())


def test_match_mode_all_and_first_by_weight_then_name():
    a = rule("all to audit", {"source": "electron"}, [{"target": "audit"}], weight=1)
    b = rule("high to telegram", {"priority_min": "high"}, [{"target": "ops-telegram"}], weight=2)
    c = rule("aaa same weight", {}, [{"target": "crm-hook"}], weight=2)
    e = ev(priority="high")
    assert [r.name for r in matching([b, c, a], e, "all")] == ["all to audit", "aaa same weight", "high to telegram"]
    assert [r.name for r in matching([b, c, a], e, "first")] == ["all to audit"]
    with pytest.raises(ValueError):
        matching([a], e, "some")
    # r01: all → both targets, first → only the audit journal
    assert sorted(d.target for d in route(state(a, b), [e], T0, TARGETS).deliveries) == ["audit", "ops-telegram"]
    assert [d.target for d in route(state(a, b, mode="first"), [e], T0, TARGETS).deliveries] == ["audit"]


def test_r02_payload_any_of_fan_out():
    st = state(rule("hosts", {"source": "electron", "payload": {"host": ["melody", "pilar"]}}))
    payloads = [{"host": "melody"}, {"host": "pilar", "extra": 1}, {"host": "other"}, {}]
    got = [statuses(step(st, ev(payload=p), T0 + i)) for i, p in enumerate(payloads)]
    assert got == [["pending"], ["pending"], [], []]


# ---- dedup --------------------------------------------------------------------------------------

def test_dedup_window_edges_and_duplicates_do_not_extend_it():
    st = state(rule("all", {"source": "electron"}), window=100.0)
    assert statuses(step(st, ev(dedup_key="k"), T0)) == ["pending"]
    assert statuses(step(st, ev(dedup_key="k"), T0 + 99.999)) == ["duplicate"]
    assert statuses(step(st, ev(dedup_key="other"), T0 + 50)) == ["pending"]
    assert statuses(step(st, ev(dedup_key="k", source="electron2"), T0 + 50)) == []  # another source: no rule
    assert statuses(step(st, ev(dedup_key="k"), T0 + 100.0)) == ["pending"]  # window ends: accepted again
    assert statuses(step(st, ev(dedup_key="k"), T0 + 199.9)) == ["duplicate"]  # counted from T0+100
    r = step(st, ev(dedup_key="k"), T0 + 200.0)
    assert statuses(r) == ["pending"]


def test_r03_default_window_24h():
    st = state(rule("all", {"source": "electron"}))
    for t, key in ((10, "pilar"), (11, "pilar"), (12, "pilar"), (13, "melody"), (5000, "pilar")):
        step(st, ev(dedup_key=key), T0 + t)
    assert statuses(step(st, ev(dedup_key="pilar"), T0 + 86420)) == ["pending"]


def test_concurrent_duplicates_yield_one_delivery():
    st = state(rule("all", {"source": "electron"}))
    r = step(st, [ev(dedup_key="disk-full")] * 10, T0)
    assert statuses(r) == ["pending"] + ["duplicate"] * 9
    assert len(set(r.event_ids)) == 10  # every event has its own id


def test_state_changes_only_on_apply():
    """Decide / evolve: a routing whose commit failed leaves the state untouched."""
    st = state(rule("t", {}, throttle_seconds=60))
    r = route(st, [ev(dedup_key="k")], T0, TARGETS)
    assert st.dedup == {} and st.last_real == {} and st.seq == 1
    assert statuses(route(st, [ev(dedup_key="k")], T0 + 1, TARGETS)) == ["pending"]  # r never applied
    st.apply(r)
    assert statuses(route(st, [ev(dedup_key="k")], T0 + 1, TARGETS)) == ["duplicate"]


# ---- throttle -----------------------------------------------------------------------------------

def test_throttle_edges_skipped_rows_do_not_extend_the_window():
    st = state(rule("t", {}, [{"target": "ops-telegram"}], throttle_seconds=300))
    assert statuses(step(st, ev(), T0)) == ["pending"]
    assert statuses(step(st, ev(), T0 + 299.999)) == ["skipped"]
    assert statuses(step(st, ev(), T0 + 300.0)) == ["pending"]  # at the edge it passes
    r = step(st, ev(), T0 + 400)
    assert statuses(r) == ["skipped"] and r.deliveries[0].message  # what it would have sent
    assert "throttled" in (r.deliveries[0].note or "")
    assert statuses(step(st, ev(), T0 + 600)) == ["pending"]  # 300 after T0+300, not after the skip


def test_r04_throttle_with_critical_bypass():
    st = state(rule("throttled", {"source": "electron"}, [{"target": "ops-telegram"}], throttle_seconds=300))
    got = []
    for t, prio in ((10, "normal"), (100, "normal"), (200, "critical"), (305, "normal"), (320, "normal"),
                    (520, "normal")):
        (d,) = step(st, ev(priority=prio), T0 + t).deliveries
        got.append((t, d.status, d.note))
    assert [s for _, s, _ in got].count("pending") == 3 and [s for _, s, _ in got].count("skipped") == 3
    assert got[2][1] == "pending" and "critical" in got[2][2]  # the row says it bypassed
    assert got[0][2] is None


def test_throttle_is_per_target_and_counts_any_rules_real_delivery():
    a = rule("a", {}, [{"target": "ops-telegram"}], throttle_seconds=100)
    b = rule("b", {"subjects": ["other"]}, [{"target": "ops-telegram"}, {"target": "audit"}])
    st = state(a, b)
    step(st, ev(subject="other"), T0)  # b delivers to telegram (unthrottled rule)
    assert statuses(step(st, ev(), T0 + 50), "ops-telegram") == ["skipped"]
    assert statuses(step(st, ev(subject="other"), T0 + 60)) == ["skipped", "pending", "pending"]


def test_the_journal_is_never_throttled():
    # seed 002 _throttled returns early when target_id is None: its target-less internal_log (our
    # journal) is never cut, so a throttled rule keeps the audit row a shift lead looks for
    st = state(rule("t", {}, [{"target": "audit"}, {"target": "ops-telegram"}], throttle_seconds=300))
    assert statuses(step(st, ev(), T0)) == ["pending", "pending"]
    r = step(st, ev(), T0 + 10)
    assert statuses(r, "audit") == ["pending"] and statuses(r, "ops-telegram") == ["skipped"]
    assert [d.note for d in r.deliveries if d.target == "audit"] == [None]


# ---- the built-in Stack route -------------------------------------------------------------------

def test_stack_route_no_rule_mode_or_throttle_removes_it():
    w = StackWrite(pair="g/r", idem_key="k1", method="PUT", path="/v1/tus/g/favorites/r/markers/followUpChat",
                   body=b'{"value":null}')
    marker = ev(source="markers", subject="followUpChat", action="clear", priority="high", write=w)
    st = state(rule("everything", {}, [{"target": "ops-telegram"}], throttle_seconds=3600), mode="first")
    r1 = step(st, marker, T0)
    assert [(d.target, d.status) for d in r1.deliveries] == [("stack", "pending"), ("ops-telegram", "pending")]
    stack = r1.deliveries[0]
    assert (stack.rule, stack.channel, stack.idem_key, stack.pair, stack.message) == (None, "stack", "k1", "g/r", w.body)
    r2 = step(st, marker, T0 + 1)
    assert [(d.target, d.status) for d in r2.deliveries] == [("stack", "pending"), ("ops-telegram", "skipped")]
    assert statuses(step(state(), marker, T0)) == ["pending"]  # no rules at all


def test_rules_cannot_target_stack_and_events_emit_cannot_impersonate():
    with pytest.raises(RouterInputError) as ei:
        parse_rule({"name": "x", "actions": [{"target": "stack"}]})
    assert ei.value.field == "actions[0].target"
    with pytest.raises(RouterInputError) as ei:
        parse_rule({"name": "x", "actions": [{"target": "nope"}]}, TARGETS)
    assert ei.value.field == "actions[0].target"
    for bad, field in (({"source": "markers", "subject": "s", "action": "a"}, "source"),
                       ({"source": "e", "subject": "s", "action": "a", "priority": "urgent"}, "priority"),
                       ({"source": "e", "subject": "s", "action": "a", "ttl_s": -1}, "ttl_s"),
                       ({"source": "e", "subject": "", "action": "a"}, "subject"),
                       ({"source": "e", "subject": "s", "action": "a", "write": {}}, "write"),
                       ({"source": "e\x00f", "subject": "s", "action": "a"}, "source"),  # control characters
                       ({"source": "e", "subject": "s", "action": "a\n", "dedup_key": "k"}, "action"),
                       ({"source": "e", "subject": "s", "action": "a", "dedup_key": "k\x1b[2J"}, "dedup_key")):
        with pytest.raises(RouterInputError) as ei:
            parse_event(bad)
        assert ei.value.field == field
    for bad, field in (({"name": "x", "actions": []}, "actions"),
                       ({"name": "x", "actions": [{"target": "audit"}], "throttle_seconds": -5}, "throttle_seconds"),
                       ({"name": "x", "actions": [{"target": "audit"}], "conditions": {"priority_min": "x"}},
                        "conditions.priority_min"),
                       ({"name": "x", "actions": [{"target": "audit"}], "conditions": {"tags": []}},
                        "conditions.tags"),
                       ({"name": "x\x00y", "actions": [{"target": "audit"}]}, "name")):
        with pytest.raises(RouterInputError) as ei:
            parse_rule(bad, TARGETS)
        assert ei.value.field == field


# ---- templates, TTL, bad targets ----------------------------------------------------------------

def test_templates_missing_fields_render_empty():
    e = ev(payload={"n": 1})
    assert render("host={{ payload.host }} !", e) == "host= !"
    assert render("{{ payload.a.b.c }}|{{ subject }} {{ action }}|{{ priority }}", e) == "|alert fired|normal"
    assert render("{{ payload.n + 1 }}", e) == "2"
    assert render("{{ missing }}{{ payload['x'] }}", e) == ""


def test_templates_are_sandboxed_and_broken_ones_fail_only_their_delivery():
    with pytest.raises(TemplateFailure):
        render("{{ ''.__class__.__mro__[1].__subclasses__() }}", ev())
    with pytest.raises(TemplateFailure):
        render("{% for %}", ev())
    st = state(rule("r", {}, [{"target": "ops-telegram", "template": "{{ oops"}, {"target": "audit"}]))
    r = step(st, ev(), T0)
    assert statuses(r) == ["failed", "pending"]
    assert r.deliveries[0].last_error.startswith("terminal: template")
    tg = step(state(rule("r", {}, [{"target": "ops-telegram", "template": "host={{ payload.host }} !"}])),
              ev(payload={"n": 1}), T0)
    assert tg.deliveries[0].message == b"host= !"


def test_unknown_target_fails_terminally_and_ttl_is_stamped():
    st = state(rule("r", {}, [{"target": "audit"}]))
    r = route(st, [ev(ttl_s=60)], T0, {"stack": "stack"})  # audit removed from the config
    assert statuses(r) == ["failed"] and "bad target" in r.deliveries[0].last_error
    r = route(st, [ev(ttl_s=60)], T0, TARGETS)
    assert r.deliveries[0].expires_at == T0 + 60 and r.deliveries[0].next_attempt_at == T0


def test_ids_are_stable_and_sequence_survives_in_ops():
    st = state(rule("r", {}, [{"target": "audit"}, {"target": "crm-hook"}]))
    r = step(st, [ev(), ev()], T0)
    assert [d.id for d in r.deliveries] == ["ev-1.0", "ev-1.1", "ev-2.0", "ev-2.1"]
    assert st.seq == 3
    metas = [o for o in r.ops() if type(o).__name__ == "PutMeta"]
    assert [(m.key, m.value) for m in metas] == [("router.next_seq", "3")]


def test_prefixes_are_keyed_and_an_empty_step_writes_nothing():
    from sidecar.core.rng import KeyedRandom
    from sidecar.router.state import make_prefix
    a = make_prefix(KeyedRandom(7), T0)
    assert a == make_prefix(KeyedRandom(7), T0) and a.startswith("ev-") and len(a) == 12
    assert a != make_prefix(KeyedRandom(7), T0 + 1) and a != make_prefix(KeyedRandom(8), T0)
    assert route(state(), [], T0, TARGETS).ops() == []


def test_a_missing_rule_name_or_change_is_named_not_printed_as_none():
    """A breaker's find: ``rules.patch {changes}`` without ``name`` answered "no rule named None"."""
    from sidecar.router.core import Router

    r = Router.in_memory(targets=TARGETS)
    for call in (lambda: r.patch_rule(None, {"weight": 1}, T0), lambda: r.delete_rule(None)):
        with pytest.raises(RouterInputError) as ei:
            call()
        assert ei.value.field == "name" and "None" not in str(ei.value) and "required" in str(ei.value)
    with pytest.raises(RouterInputError) as ei:
        r.delete_rule(7)
    assert ei.value.field == "name" and "a string" in str(ei.value)
    r.apply_rule(r.create_rule({"name": "x", "actions": [{"target": "audit"}]}, T0)[1])
    with pytest.raises(RouterInputError) as ei:
        r.patch_rule("x", None, T0)
    assert ei.value.field == "changes" and "None" not in str(ei.value)
    for data, field in (({"source": "electron", "subject": "s", "action": "a", "priority": None}, "priority"),
                        ({"name": "y", "actions": [{"template": "t"}]}, "actions[0].target")):
        with pytest.raises(RouterInputError) as ei:
            (parse_event if "source" in data else lambda d: parse_rule(d, TARGETS))(data)
        assert ei.value.field == field and "None" not in str(ei.value)


# ---- ahead of the state (group commit) ----------------------------------------------------------

class _NoRereads(Ahead):
    """An :class:`Ahead` that fails if ``route`` walks the routings it already merged."""

    def __iter__(self):
        raise AssertionError("route re-read the group's earlier routings")

    def __getitem__(self, i):
        raise AssertionError("route re-read the group's earlier routings")


def test_a_group_routed_over_ahead_equals_one_over_the_list_and_reads_each_routing_once():
    """Every step of a group routes on the merged view of the ones before it: dedup keys,
    throttle windows and event numbers as if applied — the same rows as the per-call merge over
    a plain list, which cost the k-th step O(k) (issue 11: a wall-clock group of hundreds)."""
    throttled = rule("t", {"source": "electron"}, [{"target": "ops-telegram"}], throttle_seconds=60)
    events = [[ev(dedup_key="k")], [ev()], [ev(dedup_key="k"), ev(dedup_key="j")], [ev(priority="critical")],
              [ev(dedup_key="j")], [ev()]]
    plain_st, fast_st = state(throttled), state(throttled)
    plain: list = []
    fast = _NoRereads()
    for i, evs in enumerate(events):
        a = route(plain_st, evs, T0 + i, TARGETS, plain)
        b = route(fast_st, evs, T0 + i, TARGETS, fast)
        assert a == b
        plain.append(a)
        fast.append(b)
    assert [statuses(r) for r in plain] == [["pending"], ["skipped"], ["duplicate", "skipped"],
                                            ["pending"], ["duplicate"], ["skipped"]]
    assert fast.next_seq == 8 and fast.dedup == {("electron", "k"): T0, ("electron", "j"): T0 + 2}
    assert len(fast) == 6 and plain_st.seq == fast_st.seq == 1  # nothing applied


def test_stack_pass_counts_refusals_apart_and_raises_refused_high():
    """DESIGN §10 as revised: a refused write (failed: Stack answered a 4xx) raises
    ``sidecar/stack/refused`` (high) naming key, path and status; only unanswered attempts feed
    the ``unreachable`` watch."""
    from sidecar.router.attempt import Next
    from sidecar.router.core import StackWatch, stack_pass
    from sidecar.router.model import Delivery

    def row(i, **kw):
        return Delivery(f"e{i}.0", f"e{i}", 1.0, "markers", "followUpChat", "set", "high", None, "stack",
                        "stack", "pending", b"{}", pair="tu/A", idem_key=f"k{i}", method="PUT",
                        path="/v1/tus/tu/favorites/A/markers/followUpChat", tu="tu", ru="A", **kw)
    refused = Next(status="failed", attempts=1, next_attempt_at=None, last_error="terminal: HTTP 422: no",
                   final=True, status_code=422)
    unanswered = Next(status="pending", attempts=1, next_attempt_at=6.0, last_error="retryable: ConnectError")
    held = Next(status="pending", attempts=0, next_attempt_at=6.0, last_error="held: …")
    acked, failed, events = stack_pass([(row(1), refused), (row(2), unanswered), (row(3), held)], 5.0)
    assert (acked, failed) == (0, 1)
    [ev] = events
    assert (ev.source, ev.subject, ev.action, ev.priority) == ("sidecar", "stack", "refused", "high")
    assert ev.payload["key"] == "k1" and ev.payload["status"] == 422
    assert ev.payload["path"] == "/v1/tus/tu/favorites/A/markers/followUpChat" and ev.payload["tu"] == "tu"
    w = StackWatch()
    for t in range(0, 1000, 10):  # Stack answers every write with a refusal: never "unreachable"
        a, f, _ = stack_pass([(row(t), refused)], float(t))
        assert w.observe(float(t), acked=a, failed=f) is None
