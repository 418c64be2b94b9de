"""The log feed's handler (issue 20 item 3, ``sidecar.app.log_feed``): records at or above the
subscribed level only — the rest are never formatted —, the level changed live, no feedback
from a record logged while one is sent, a bounded buffer whose losses the next record counts, and
the subscription ending with its connection.  A real :class:`~bridge.session.Session` without a
socket stands in for the connection: what it would write is read off its delivery."""
from __future__ import annotations

import asyncio
import logging
import threading
from types import SimpleNamespace

import msgspec
import pytest

from bridge.session import Session
from bridge.stream import OutboundStream
from sidecar.app import log_feed
from sidecar.app.log_feed import LogFeed, level_name


def _session() -> Session:
    return Session(None, OutboundStream(), None)  # type: ignore[arg-type]


def _sent(session: Session) -> list[dict]:
    out, d = [], session.delivery
    while (frame := d.next()) is not None:
        out.append(msgspec.json.decode(frame))
    return out


@pytest.fixture
def logger():
    """A private logger tree standing in for the root logger (pytest's own handlers stay out)."""
    lg = logging.getLogger("test.log_feed")
    lg.setLevel(logging.DEBUG)
    lg.propagate = False
    yield lg
    lg.handlers.clear()


def _feed(logger, **kw) -> tuple[LogFeed, SimpleNamespace]:
    bridge = SimpleNamespace(session=_session())
    return LogFeed(bridge, logger, **kw), bridge  # type: ignore[arg-type]


async def test_records_below_the_level_are_never_formatted_and_the_level_changes_live(logger, monkeypatch):
    formatted = []
    monkeypatch.setattr(log_feed, "note_of", lambda r, _f=log_feed.note_of: formatted.append(r.msg) or _f(r))
    feed, bridge = _feed(logger)
    assert feed not in logger.handlers  # cheap when off: not even installed
    assert feed.subscribe("INFO") is True and feed in logger.handlers
    logger.debug("d %s", 1)
    logger.info("i %s", 2)
    assert formatted == ["i %s"]  # the DEBUG record never reached the feed
    [frame] = _sent(bridge.session)
    assert frame["method"] == "log" and "id" not in frame and "seq" not in frame["params"]
    assert {k: frame["params"][k] for k in ("level", "logger", "msg", "dropped")} == {
        "level": "INFO", "logger": "test.log_feed", "msg": "i 2", "dropped": 0}
    assert "exc" not in frame["params"] and isinstance(frame["params"]["ts"], float)
    feed.subscribe("ERROR")  # again: the level changes, the subscription stays
    logger.warning("w %s", 3)
    try:
        raise ValueError("boom")
    except ValueError:
        logger.exception("failed")
    [frame] = _sent(bridge.session)
    assert formatted == ["i %s", "failed"] and frame["params"]["level"] == "ERROR" and frame["params"]["msg"] == "failed"
    assert "ValueError: boom" in frame["params"]["exc"]
    feed.unsubscribe()
    logger.critical("after")
    assert feed not in logger.handlers and _sent(bridge.session) == []


def test_custom_levels_read_as_the_standard_name_below_them():
    assert [level_name(n) for n in (5, 10, 25, 40, 45, 50, 60)] == [
        "DEBUG", "DEBUG", "INFO", "ERROR", "ERROR", "CRITICAL", "CRITICAL"]


async def test_a_record_logged_while_one_is_sent_is_not_sent(logger):
    feed, bridge = _feed(logger)
    session = bridge.session
    tell = session.tell
    calls = []

    def noisy_tell(method, params, room):  # the bridge logging about the very send
        calls.append(params.msg)
        logger.warning("bridge: sending %s", params.msg)
        return tell(method, params, room)

    session.tell = noisy_tell
    feed.subscribe("DEBUG")
    logger.info("one")
    assert calls == ["one"]
    assert [f["params"]["msg"] for f in _sent(session)] == ["one"]
    # the websocket library logs every frame it writes at DEBUG: never sent, or each would beget one
    logger.handle(logging.LogRecord("websockets.server", logging.DEBUG, __file__, 1, "> TEXT", None, None))
    assert _sent(session) == [] and calls == ["one"]


async def test_records_from_other_threads_wait_in_a_bounded_buffer_and_the_next_counts_the_lost(logger):
    feed, bridge = _feed(logger, buffer=3)
    feed.subscribe("INFO")

    def burst():
        for i in range(10):
            logger.info("t%d", i)

    t = threading.Thread(target=burst)
    t.start()
    t.join()  # the loop has not run: everything waits in the buffer, bounded
    assert _sent(bridge.session) == [] and feed.lost == 7
    await asyncio.sleep(0)  # the loop sends the buffer (one call_soon_threadsafe)
    frames = [f["params"] for f in _sent(bridge.session)]
    assert [f["msg"] for f in frames] == ["t7", "t8", "t9"]
    assert [f["dropped"] for f in frames] == [7, 0, 0]


async def test_a_client_that_does_not_read_loses_log_records_not_answers(logger):
    feed, bridge = _feed(logger, room=200)
    session = bridge.session
    feed.subscribe("INFO")
    session.send(b"x" * 300)  # an answer the client has not read yet
    logger.info("lost 1")
    logger.info("lost 2")
    assert feed.lost == 2 and not session.closed  # never cut off for log lines
    assert session.delivery.next() == b"x" * 300  # the writer caught up
    logger.info("back")
    [frame] = _sent(session)
    assert frame["params"]["msg"] == "back" and frame["params"]["dropped"] == 2


async def test_the_subscription_ends_with_its_connection(logger):
    feed, bridge = _feed(logger)
    first = bridge.session
    feed.subscribe("INFO")
    first.shutdown()  # closed (or replaced by a newer client)
    assert feed not in logger.handlers and feed.session is None
    logger.info("nobody")
    bridge.session = _session()  # a reconnecting client subscribes again
    assert feed.subscribe("WARNING") is True
    first.shutdown()  # an old connection's end does not end the new one's subscription
    logger.warning("second")
    assert [f["params"]["msg"] for f in _sent(bridge.session)] == ["second"]
    bridge.session = None
    feed.unsubscribe()
    assert feed.subscribe("INFO") is False and feed not in logger.handlers  # no connection: nothing
