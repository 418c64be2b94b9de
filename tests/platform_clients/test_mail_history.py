"""Mail-history reads of Follow-up mail per project (seed 001 "Запити"; DESIGN §8): request
shapes, raw answer decoding, bad answers; the read statistics that feed the mail_read source."""
from __future__ import annotations

import pytest

from platform_clients import BadAnswer, ChathouseClient, GoldenClient, PrimeClient
from platform_clients import mail
from platform_clients.mail import Letter, MailHistory
from sidecar.domain import events as ev

T = 1_764_489_600.0  # 2025-11-30T08:00:00Z


def test_requests_per_project():
    assert mail.requests("golden", "r1") == [("get_mail", {"ru": "r1"})]
    assert mail.requests("chathouse", "r1") == [("inmails_chain", {"ru": "r1"})]
    assert mail.requests("prime", "r1") == [("chat_restriction", {"ru": "r1"}),
                                            ("correspondence_get", {"ru": "r1"}),
                                            ("emails_history", {"ru": "r1"})]
    with pytest.raises(KeyError):
        mail.requests("mars", "r1")


def test_golden_and_chathouse_decode_sorted_letters():
    raw = {"mails": [{"id": "b", "from": "ru", "at": T + 5}, {"id": "a", "from": "tu", "at": T}]}
    for project, method in (("golden", "get_mail"), ("chathouse", "inmails_chain")):
        h = mail.decode(project, {method: raw})
        assert h == MailHistory((Letter("a", "tu", T), Letter("b", "ru", T + 5)), None)
        assert h.last_tu_at == T and h.tu_mailed_after(T - 1) and not h.tu_mailed_after(T)


def test_prime_unions_both_histories_and_reads_the_live_limit():
    h = mail.decode("prime", {
        "chat_restriction": {"chatLimit": 0, "mailLimit": 3},
        "correspondence_get": {"mails": [{"id": "a", "from": "tu", "at": T}]},
        "emails_history": {"mails": [{"id": "a", "from": "tu", "at": T}, {"id": "c", "from": "ru", "at": T + 9}]},
    })
    assert [x.id for x in h.letters] == ["a", "c"] and h.mail_limit == 3


def test_bad_rows_are_skipped_bad_answers_fail_the_read():
    h = mail.decode("golden", {"get_mail": {"mails": [
        {"id": "ok", "from": "tu", "at": T}, {"id": "x", "from": "system", "at": T},
        {"id": "ms", "from": "tu", "at": T * 1000}, "junk", {"from": "tu", "at": T}]}})
    assert [x.id for x in h.letters] == ["ok"]
    for answers in ({"get_mail": []}, {"get_mail": {"mails": "no"}}, {}):
        with pytest.raises(BadAnswer):
            mail.decode("golden", answers)
    with pytest.raises(BadAnswer):
        mail.decode("prime", {"chat_restriction": {"mailLimit": "lots"}, "correspondence_get": {},
                              "emails_history": {}})
    with pytest.raises(BadAnswer):  # one of Prime's two history answers missing fails the read
        mail.decode("prime", {"chat_restriction": {}, "correspondence_get": {}})


@pytest.mark.parametrize("client,name,data", [
    (GoldenClient, "statistics", {"type": "EmailRead", "userId": "r", "at": T, "eventKey": "k"}),
    (GoldenClient, "statistics", {"type": "OpenAttachFileSatellite", "userId": "r", "at": T, "eventKey": "k"}),
    (ChathouseClient, "statistic", {"type": "inmail_read", "from": "r", "to": "tu", "at": T, "eventKey": "k"}),
    (ChathouseClient, "statistic", {"type": "inmail_photo_read", "from": "r", "to": "tu", "at": T, "eventKey": "k"}),
    (ChathouseClient, "statistic", {"type": "inmail_video_read", "from": "r", "to": "tu", "at": T, "eventKey": "k"}),
])
def test_read_statistics_become_mail_read(client, name, data):
    assert client.has_read_stats
    assert client.decode_event("tu", name, data) == [
        ev.MailRead(tu="tu", ru="r", at=T, mail_id="", event_key="k")]


def test_prime_has_no_read_statistics():
    assert not PrimeClient.has_read_stats and "statistic" not in PrimeClient.decoders
