"""The harness answers every Follow-up mail history request from its world, and the sidecar's
decoder reads them (seed 001 "Запити"): one read per pair, whatever the number of sources."""
from __future__ import annotations

import json

from stubhelp import HEADER

from electron_stub import answers, encode
from electron_stub import scenario as sc
from electron_stub.world import World
from platform_clients import client_for, mail
from sidecar.core.rng import KeyedRandom
from sidecar.domain.favorites import Favorite
from sidecar.services.follow_up_mail import check as ck
from sidecar.services.follow_up_mail import marker as mk
from sidecar.services.follow_up_mail import sources as src

T0 = sc.parse_lines([HEADER], "x").start


def build(project, *lines):
    fav = {"kind": "favorite", "project": project, "tu": "t", "ru": "r", "active": True, "is_white": False,
           "chat_limit": None if project == "golden" else 0, "mail_limit": None if project == "golden" else 2}
    s = sc.parse_lines([HEADER] + [json.dumps(x) for x in (fav, *lines)], "x.jsonl")
    w = World.from_scenario(s)
    for ln in s.timeline:
        w.apply(ln, s.abs(ln.t))
    return w, s


def read_history(w, project, now):
    reqs = mail.requests(project, "r")
    return len(reqs), mail.decode(project, {m: answers.answer(w, project, "t", m, p, now) for m, p in reqs})


def test_each_project_answers_its_read_and_it_decodes():
    for project in ("golden", "chathouse", "prime"):
        w, _ = build(project,
                     {"kind": "mail_log", "project": project, "tu": "t", "ru": "r", "from": "tu", "at": -30000, "id": "m0"},
                     {"t": 5, "kind": "mail", "project": project, "tu": "t", "ru": "r", "from": "ru", "id": "m1"})
        n, h = read_history(w, project, T0 + 10)
        assert [(x.id, x.side) for x in h.letters] == [("m0", "tu"), ("m1", "ru")]
        assert h.last_tu_at == T0 - 30000
        assert n == (3 if project == "prime" else 1)
        assert h.mail_limit == (2 if project == "prime" else None)  # Prime: the live limit


def test_several_sources_of_one_pair_cost_one_read_and_one_candidate():
    w, _ = build("golden", {"kind": "mail_log", "project": "golden", "tu": "t", "ru": "r", "from": "tu",
                            "at": -30000, "id": "m0"})
    rng = KeyedRandom(3)
    m, _ = src.on_unanswered_answered(rng, "t", "r", mk.MailMarker(), "u-1", T0)
    now = m.post_chat_due_at
    pair = ck.PairState("r", Favorite(ru="r", active=True), False, True, marker=m)
    plan = ck.plan("t", pair, [src.Trigger("last_mail_6h", "", now), src.Trigger("mail_read", "k1", now - 3),
                               src.post_chat_trigger(m, now, T0)])
    reads = 0
    if plan.read:
        reads += 1
        _, history = read_history(w, "golden", now)
    d = ck.decide(rng, "t", pair, plan, history, now)
    assert reads == 1 and d.candidate is not None and d.candidate.source == "post_chat"
    assert sum(n.outcome == "candidate" for n in d.notes) == 1


def test_mail_read_lines_encode_as_read_statistics_and_none_on_prime():
    line = {"t": 1, "kind": "mail_read", "project": "golden", "tu": "t", "ru": "r", "mail_id": "m0", "event_key": "k"}
    for project in ("golden", "chathouse", "prime"):
        _, s = build(project, {**line, "project": project})
        frames = encode.frames_for(s.timeline[0], T0 + 1)
        events = [e for f in frames
                  for e in client_for(project).decode_event("t", f[1]["name"], f[1]["data"])]
        if project == "prime":
            assert frames == []
        else:
            assert [(type(e).__name__, e.event_key, e.mail_id) for e in events] == [("MailRead", "k", "m0")]
