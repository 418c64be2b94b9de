"""bridge.stream: sequencing, acks, the cap, and one connection's delivery order (no sockets)."""
import logging

import msgspec
import pytest

from bridge import jsonrpc
from bridge.stream import Delivery, OutboundStream, SeqBeyond


class Created(msgspec.Struct, kw_only=True):
    seq: int = 0
    task_id: str


class NoSeq(msgspec.Struct):
    a: int


def params_of(data: bytes) -> dict:
    return jsonrpc.decode(data).params


def test_seq_starts_at_one_and_is_stamped_into_params():
    stream = OutboundStream()
    assert stream.append("task.created", Created(task_id="t1")) == 1
    assert stream.append("sender.state", {"sender": "s"}) == 2
    assert stream.append("x", NoSeq(5)) == 3
    assert stream.append("y") == 4
    frames = stream.unacked()
    assert [f.seq for f in frames] == [1, 2, 3, 4]
    assert frames[0].data == b'{"jsonrpc":"2.0","method":"task.created","params":{"seq":1,"task_id":"t1"}}'
    assert params_of(frames[1].data) == {"sender": "s", "seq": 2}
    assert params_of(frames[2].data) == {"a": 5, "seq": 3}
    assert params_of(frames[3].data) == {"seq": 4}


def test_callers_params_are_not_modified():
    given = {"k": 1}
    task = Created(task_id="t")
    stream = OutboundStream()
    stream.append("a", given)
    stream.append("b", task)
    assert given == {"k": 1}
    assert task.seq == 0


def test_non_object_params_are_refused_without_consuming_a_seq():
    stream = OutboundStream()
    with pytest.raises(TypeError):
        stream.append("a", [1, 2])
    with pytest.raises(TypeError):
        stream.append("a", {"x": object()})
    assert stream.last_seq == 0
    assert stream.append("a", {}) == 1


def test_ack_releases_up_to_seq_and_is_idempotent():
    stream = OutboundStream()
    for i in range(10):
        stream.append("n", {"i": i})
    assert stream.ack(4) == 4
    assert [f.seq for f in stream.unacked()] == [5, 6, 7, 8, 9, 10]
    assert stream.ack(4) == 0
    assert stream.ack(2) == 0
    assert stream.acked_seq == 4
    assert stream.get(4) is None
    assert stream.get(5).seq == 5
    assert stream.get(11) is None


def test_ack_beyond_last_seq_is_refused_and_changes_nothing():
    """A seq the stream never issued is the client's bug (an ack of another stream, a counter
    gone wrong): refused, nothing released — clamping it once released frames never shown."""
    stream = OutboundStream()
    stream.append("n")
    stream.append("n")
    with pytest.raises(SeqBeyond, match="beyond the last issued seq 2"):
        stream.ack(3)
    assert stream.acked_seq == 0 and [f.seq for f in stream.unacked()] == [1, 2]
    assert stream.ack(1) == 1 and stream.ack(0) == 0  # an old seq stays harmless
    assert stream.acked_seq == 1 and stream.append("n") == 3


def test_cap_drops_oldest_counts_and_warns(caplog):
    stream = OutboundStream(limit=3)
    with caplog.at_level(logging.WARNING, "bridge.stream"):
        for i in range(5):
            stream.append("n", {"i": i})
    assert [f.seq for f in stream.unacked()] == [3, 4, 5]
    assert stream.dropped == 2
    assert stream.released_seq == 2
    assert stream.acked_seq == 0
    assert len(caplog.records) == 1
    assert "dropped the oldest (seq 1)" in caplog.text


def test_delivery_replays_unacked_then_new():
    stream = OutboundStream()
    for _ in range(5):
        stream.append("n")
    stream.ack(2)
    delivery = Delivery(stream)
    delivery.push(b"HELLO", first=True)
    out = [delivery.next() for _ in range(5)]
    assert out[0] == b"HELLO"
    assert [params_of(d)["seq"] for d in out[1:4]] == [3, 4, 5]
    assert out[4] is None
    stream.append("n")
    assert params_of(delivery.next())["seq"] == 6
    assert delivery.next() is None


def test_delivery_keeps_control_frames_after_the_stream_frames_before_them():
    stream = OutboundStream()
    delivery = Delivery(stream)
    stream.append("n")
    stream.append("n")
    delivery.push(b"R1")  # queued after seq 2
    stream.append("n")
    delivery.push(b"R2")  # queued after seq 3
    out = []
    while (data := delivery.next()) is not None:
        out.append(data if data.startswith(b"R") else params_of(data)["seq"])
    assert out == [1, 2, b"R1", 3, b"R2"]
    assert delivery.pending() == 0


def test_delivery_skips_frames_released_while_waiting():
    stream = OutboundStream(limit=2)
    delivery = Delivery(stream)
    for _ in range(3):
        stream.append("n")  # seq 1 dropped by the cap
    delivery.push(b"R")
    assert delivery.pending() == 3
    stream.ack(2)
    assert [params_of(delivery.next())["seq"]] == [3]
    assert delivery.next() == b"R"
    assert delivery.next() is None
