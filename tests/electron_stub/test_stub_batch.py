"""The bookkeeping of a batched frame (:mod:`electron_stub.batch`): world changes applied when
the sidecar begins their event, items not taken put back, held notifications handed on in
stream order with each item's follow-up after its event's notifications."""
from __future__ import annotations

from electron_stub.batch import Frame, Item


def _frame(log: list) -> Frame:
    def item(t: float, event: bool, name: str) -> Item:
        return Item((t, 0, int(t), name), {"name": name} if event else None,
                    apply=lambda: log.append(("apply", name)), after=lambda: log.append(("after", name)))
    return Frame([item(1.0, True, "a"), item(2.0, False, "online"), item(3.0, True, "b"),
                  item(4.0, True, "c")])


def test_world_changes_wait_until_the_sidecar_begins_their_event():
    log: list = []
    f = _frame(log)
    assert [e["name"] for e in f.events] == ["a", "b", "c"]
    assert f.seen(0) is None and log == []  # timers before the first event: the world as before
    assert f.seen(1) == 1.0 and log == [("apply", "a")]
    assert f.seen(1) == 1.0 and log == [("apply", "a")]  # once
    # the world-only item between a and b goes with b: one by one applies it before b's advance
    assert f.seen(2) == 3.0 and log == [("apply", "a"), ("apply", "online"), ("apply", "b")]


def test_items_not_taken_go_back_with_the_world_only_ones_before_them():
    f = _frame([])
    done, rest = f.taken_items(1)
    assert [it.entry[3] for it in done] == ["a"] and [it.entry[3] for it in rest] == ["online", "b", "c"]
    done, rest = f.taken_items(3)
    assert rest == [] and len(done) == 4


def test_held_notifications_are_handed_on_in_order_with_each_follow_up_after_its_events_notes():
    log: list = []
    f = _frame(log)
    f.held = [(None, "task.created", {"seq": 1}), (None, "task.created", {"seq": 2}),
              (None, "task.closed", {"seq": 3}), (None, "chain.attempt", {"seq": 4})]
    done, _ = f.taken_items(3)
    f.hand_on(done, [{"ok": True, "seq": 2}, {"ok": True, "seq": 2}, {"ok": True, "seq": 3}],
              lambda m, method, params: log.append((method, params["seq"])))
    assert log == [("task.created", 1), ("task.created", 2), ("after", "a"), ("after", "b"),
                   ("task.closed", 3), ("after", "c"), ("chain.attempt", 4)]
    assert f.held == []


def test_a_world_only_items_settle_runs_once_every_note_of_the_frame_is_through():
    log: list = []
    f = Frame([Item((1.0, 0, 1, "a"), {"name": "a"}, after=lambda: log.append(("after", "a"))),
               Item((2.0, 1, 2, "pass"), None, settle=lambda: log.append(("settle", "pass"))),
               Item((3.0, 0, 3, "b"), {"name": "b"}, after=lambda: log.append(("after", "b")))])
    # a timer's close between a and b (seq 2) may lie before or after the pass's instant: the
    # pass settles after every note, reading the notes' own instants
    f.held = [(None, "task.created", {"seq": 1}), (None, "task.closed", {"seq": 2}),
              (None, "task.created", {"seq": 3})]
    done, _ = f.taken_items(2)
    f.hand_on(done, [{"ok": True, "seq": 1}, {"ok": True, "seq": 3}],
              lambda m, method, params: log.append((method, params["seq"])))
    assert log == [("task.created", 1), ("after", "a"), ("task.closed", 2), ("task.created", 3),
                   ("after", "b"), ("settle", "pass")]
    # an item not taken settles nothing: it goes back to the queue and is played again
    log.clear()
    f.held = []
    done, rest = f.taken_items(1)
    f.hand_on(done, [{"ok": True, "seq": 1}], lambda *a: None)
    assert log == [("after", "a")] and [it.entry[3] for it in rest] == ["pass", "b"]
