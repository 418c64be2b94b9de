"""The router's direct path for the built-in Stack route (issue 11 item 5) routes exactly as the
general path: the same delivery rows, event ids, dedup keys, throttle windows, event numbers and
store ops, step after step, alone and ahead of the state in a commit group, for any rule set —
including rules that do reach a Stack source, which must send the write back to the general path
(DESIGN §10 "Fan-out"; seed 002 ``ingest``)."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidecar.router.model import RoutingEvent, StackWrite, parse_rule
from sidecar.router.state import Ahead, RouterState
from sidecar.router.route import route, route_general
from sidecar.stack import writes as stack_out

T0 = 1_764_489_600.0
TARGETS = {"stack": "stack", "audit": "journal", "ops-telegram": "telegram", "crm-hook": "webhook"}
SOURCES = ("markers", "tasks", "candidates", "sidecar", "electron")


def write(i: int) -> StackWrite:
    return StackWrite(pair=f"tu/ru{i % 3}", idem_key=f"k{i}", method="POST", path="/v1/tus/tu/tasks",
                      body=b'{"i":%d}' % i, tu="tu", ru=f"ru{i % 3}")


@st.composite
def events(draw) -> RoutingEvent:
    i = draw(st.integers(0, 50))
    source = draw(st.sampled_from(SOURCES))
    with_write = draw(st.booleans()) if source in ("markers", "tasks", "candidates") else False
    return RoutingEvent(source=source, subject=draw(st.sampled_from(("task", "followUpChat", "alert"))),
                 action=draw(st.sampled_from(("created", "set", "fired"))),
                 priority=draw(st.sampled_from(("low", "normal", "high", "critical"))),
                 payload={"n": i % 4},
                 dedup_key=draw(st.none() | st.sampled_from(("a", "b"))),
                 ttl_s=draw(st.none() | st.sampled_from((30.0, 600.0))),
                 write=write(i) if with_write else None)


@st.composite
def rules(draw) -> list:
    out = []
    for n in range(draw(st.integers(0, 3))):
        cond = {}
        source = draw(st.none() | st.sampled_from(SOURCES))
        if source is not None:
            cond["source"] = source
        if draw(st.booleans()):
            cond["payload"] = {"n": draw(st.sampled_from((0, [1, 2])))}
        out.append(parse_rule({
            "name": f"r{n}", "conditions": cond,
            "actions": [{"target": draw(st.sampled_from(("audit", "ops-telegram", "crm-hook")))}],
            "throttle_seconds": draw(st.sampled_from((0, 5, 60))), "weight": draw(st.integers(0, 2)),
            "enabled": draw(st.booleans())}, TARGETS))
    return out


def fresh(rule_list, mode) -> RouterState:
    return RouterState(prefix="ev-", rules={r.name: r for r in rule_list}, match_mode=mode,
                       dedup_window_s=100.0)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rule_list=rules(), mode=st.sampled_from(("all", "first")),
       steps=st.lists(st.tuples(st.lists(events(), max_size=4), st.floats(0, 40),
                                st.integers(1, 3)), max_size=12),
       group=st.sampled_from((Ahead, list)))
def test_direct_path_routes_as_the_general_path(rule_list, mode, steps, group):
    """Step by step (a step's events routed together; groups of ``size`` steps decided ahead of
    the state — an :class:`Ahead` or a plain list — then applied in order), both paths give
    equal routings and equal store ops."""
    direct, general = fresh(rule_list, mode), fresh(rule_list, mode)
    now = T0
    group_d, group_g = group(), group()
    for evs, dt, size in steps:
        now += dt
        a = route(direct, evs, now, TARGETS, group_d)
        b = route_general(general, evs, now, TARGETS, group_g)
        assert a == b
        assert a.pending == b.pending and a.channels == b.channels
        assert a.ops() == b.ops()
        group_d.append(a)
        group_g.append(b)
        if len(group_d) >= size:  # the group commits: its routings are applied in order
            for r in group_d:
                direct.apply(r)
            for r in group_g:
                general.apply(r)
            group_d, group_g = group(), group()
        assert (direct.dedup, direct.last_real, direct.seq) == (general.dedup, general.last_real, general.seq)


def test_the_bench_steps_take_the_direct_path_and_route_as_before():
    """The engine's own writes (a task's history write and its candidate write, as one step of
    the engine bench emits them): with no rule they take the direct path; a rule on ``tasks``
    sends that write (only) through the general path, which adds the rule's delivery."""
    task = stack_out.candidate_event("tu", "ru", "unanswered_message", "socket", T0, outcome="created",
                                     task_id="t1")
    marker = stack_out.marker_event("tu", "ru", "followUpChat", {"step": 1}, "followUpChat:tu:ru:t1:1:set")
    for rule_list, want in (([], [["stack"], ["stack"]]),
                            ([parse_rule({"name": "t", "conditions": {"source": "candidates"},
                                          "actions": [{"target": "audit"}]}, TARGETS)],
                             [["stack", "audit"], ["stack"]]),
                            ([parse_rule({"name": "any", "actions": [{"target": "crm-hook"}]}, TARGETS)],
                             [["stack", "crm-hook"], ["stack", "crm-hook"]])):
        a = route(fresh(rule_list, "all"), [task, marker], T0, TARGETS)
        b = route_general(fresh(rule_list, "all"), [task, marker], T0, TARGETS)
        assert a == b and a.ops() == b.ops()
        assert [[d.target for d in a.deliveries if d.event_id == eid] for eid in a.event_ids] == want
        assert a.channels == frozenset(d.channel for d in a.pending)


def test_the_rule_plan_follows_rule_changes():
    """The ordered rules and the sources they reach are worked out once per rule set, and a rule
    created, patched, disabled or deleted in place is seen by the next routing."""
    state = fresh([], "all")
    ev = stack_out.candidate_event("tu", "ru", "unanswered_message", "socket", T0, outcome="created")
    assert [d.target for d in route(state, [ev], T0, TARGETS).deliveries] == ["stack"]
    on = parse_rule({"name": "c", "conditions": {"source": "candidates"},
                     "actions": [{"target": "audit"}]}, TARGETS)
    state.rules["c"] = on
    assert [d.target for d in route(state, [ev], T0, TARGETS).deliveries] == ["stack", "audit"]
    state.rules["c"] = parse_rule({"name": "c", "conditions": {"source": "candidates"},
                                   "actions": [{"target": "audit"}], "enabled": False}, TARGETS)
    assert [d.target for d in route(state, [ev], T0, TARGETS).deliveries] == ["stack"]
    state.rules["c"] = on
    assert [d.target for d in route(state, [ev], T0, TARGETS).deliveries] == ["stack", "audit"]
    del state.rules["c"]
    assert [d.target for d in route(state, [ev], T0, TARGETS).deliveries] == ["stack"]


def test_positional_rows_equal_keyword_rows():
    """Rows are built positionally where it is hot (the direct path above, the store's reader):
    the store's reader gives the row a keyword construction gives, for every column."""
    from sidecar.router.model import DELIVERY_FIELDS, Delivery
    from sidecar.router.io.storage import _COLS, delivery_from_row
    cols = [c.strip() for c in _COLS.split(",")]
    assert sorted(cols) == sorted(DELIVERY_FIELDS)
    floats = ("event_at", "next_attempt_at", "expires_at", "delivered_at")
    row = tuple(i if c in ("seq", "attempts") else float(i) if c in floats
                else b"msg" if c == "message" else f"{c}-{i}" for i, c in enumerate(cols))
    assert delivery_from_row(row) == Delivery(**dict(zip(cols, row)))


def test_stack_writes_payload_is_made_for_the_rules_that_see_it():
    """A task's and a candidate's routing event keep their payload unmade (``facts``) until a
    rule can reach their source (the general path): then conditions on the payload, templates
    over it, the default webhook / telegram messages and the rows' ``tu`` are exactly those of
    the same events with their payload made beforehand."""
    from sidecar.domain.tasks import Task, TaskType
    from sidecar.router.model import with_payload
    task = Task("t-1", TaskType.UNANSWERED_MESSAGE, "p", "tu", "ru", "socket", T0, T0 + 60,
                vip="red")
    evs = [stack_out.task_routed(task, "created"),
           stack_out.candidate_event("tu", "ru", TaskType.UNANSWERED_MESSAGE, "socket", T0,
                                     outcome="created", task_id="t-1", detail={"n": 1})]
    assert all(e.payload == {} and e.facts is not None for e in evs)
    made = [with_payload(e) for e in evs]
    assert made[0].payload == {"tu": "tu", "ru": "ru", "project": "p", "task_id": "t-1",
                               "type": "unanswered_message", "source": "socket", "reason": None,
                               "vip": "red"}
    assert made[1].payload == {"tu": "tu", "ru": "ru", "type": "unanswered_message",
                               "source": "socket", "outcome": "created", "task_id": "t-1"}
    for conditions, template in (({"source": "tasks", "payload": {"vip": "red"}}, None),
                                 ({"source": "candidates", "payload": {"outcome": "created"}},
                                  "{{ payload.task_id }} for {{ payload.ru }}"),
                                 ({"payload": {"tu": "tu"}}, None),
                                 ({"payload": {"vip": "green"}}, None)):
        for target in ("crm-hook", "ops-telegram", "audit"):
            action = {"target": target} if template is None else {"target": target, "template": template}
            rule_list = [parse_rule({"name": "r", "conditions": conditions, "actions": [action]}, TARGETS)]
            for how in (route, route_general):
                a, b = how(fresh(rule_list, "all"), evs, T0, TARGETS), how(fresh(rule_list, "all"), made, T0, TARGETS)
                assert a == b and a.ops() == b.ops()
            assert len(a.deliveries) > 2 or conditions["payload"] == {"vip": "green"}
