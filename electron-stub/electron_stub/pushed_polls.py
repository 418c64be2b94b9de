"""Poll answers pushed into the frame: the harness's side (the sidecar's is
``sidecar/app/pushed_polls.py``; the wire ``sidecar/protocol/polls.py``).

Rules / theory of operation
---------------------------
* Every ``clock.advance_to`` and ``platform.events`` frame asks for the poll passes ahead
  (``polls_ahead_s`` = the driver's ``tick``: no frame reaches further than that past the
  sidecar's ``next_due``, ``replay_sidecars.Sidecars.next_stop`` and ``replay_frames``' answer
  horizon); the answer lists the ones it has not listed before on this connection (``polls``:
  tu, pass, at, method, params, in time order), kept per machine until a frame reaches them;
  a machine restarted (a crash) starts a new list.
* The next such frame to that machine carries the answer of every listed pass it reaches
  (``at`` ≤ the advance's ``t`` / the frame's last event) **whose answer is known now**: the
  world as of ``at`` for that TU is the world now.  An advance applies no line, so that holds
  for every pass in it.  In a ``platform.events`` frame it holds for a pass of TU X when no item
  of the frame earlier than ``at`` changes what X's answers read: an item naming another TU,
  an RU going on/offline that is neither X's favorite nor in a dialog with X (the world is per
  project, ``world.py``) — one naming X, or a line naming no TU, keeps that pass's round trip.
  X's own RUs going on/offline before ``at`` do not: the answer is computed with them applied to
  the world's online sets for that one answer (then restored; the frame applies them when the
  sidecar reaches them).
  Golden's ``online_ru`` reads only X's favorites and who is online (:data:`ONLINE_ONLY`), so a
  chat item, a letter or an own send of X does not keep its round trip either.
  (A line at the pass's very instant comes after it, as one by one plays it after the advance.)
* Each pushed answer is recorded — its ``platform.request`` trace line at ``at``, the
  ``requests`` counts — when it is computed, before the frame goes, so it precedes the requests
  the pass's answer step makes at the same instant, as the round trip did.  The frame's answer
  names the ones the sidecar used (``poll_answers_used``); the record of any other (a pass that
  did not run, or ran with other params and went by round trip) is taken back.  An error answer
  names none: nothing is taken back then.
* Off with ``push=False`` (``--no-push``): every pass goes by round trip, as before; the traces
  are the same either way (the tests compare them).
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Callable

from electron_stub import answers
from electron_stub import scenario as sc
from electron_stub.batch import Frame, Item
from electron_stub.replay_sidecars import ACTION, VirtualTime
from electron_stub.world import World

# answers that read only the TU's favorites and who is online (Golden's online_ru): a chat item,
# a letter or a dialog change of the TU does not change them
ONLINE_ONLY = frozenset({("golden", "online_ru")})
# lines that change only a pair's dialog (world.World.apply): no favorite, no online state
PAIR_LINES = (sc.Message, sc.Like, sc.Mail, sc.MailReadLine, sc.EmailLine, sc.SystemLine, sc.Icebreaker,
              sc.DialogCreatedLine, sc.ChatRequestLine, sc.EmptyDialog, sc.MutualLike)
Record = Callable[[float, dict], Any]  # (at unix s, platform.request params) -> a handle to take it back


class PollPusher:
    """What each machine said it will poll, and the answers attached to the frame in flight."""

    def __init__(self, clock: VirtualTime, world: World, *, ahead_s: float, enabled: bool,
                 record: Record, unrecord: Callable[[Any], None],
                 frame_of: Callable[[], Frame | None]) -> None:
        self.clock, self.world, self.ahead_s, self.enabled = clock, world, ahead_s, enabled
        self.record, self.unrecord, self.frame_of = record, unrecord, frame_of
        self.listed: dict[str, list[dict]] = {}  # machine name -> the polls its last answer listed
        self.used = 0  # pushed answers the sidecars used
        self.dropped = 0  # pushed answers taken back (their pass did not run)

    def forget(self, name: str) -> None:
        """A machine (re)started: what its previous process listed is not its word."""
        self.listed.pop(name, None)

    def prepare(self, name: str, method: str, params: dict) -> tuple[dict, list[Any]]:
        """``params`` of a frame to machine ``name`` with ``polls_ahead_s`` and the answers it
        can carry (module rules); returns them and the records to settle with the answer."""
        if not self.enabled or method not in ("clock.advance_to", "platform.events"):
            return params, []
        out = {**params, "polls_ahead_s": self.ahead_s}
        polls = self.listed.get(name)
        if not polls:
            return out, []
        if method == "clock.advance_to":
            reach, frame = float(params["t"]), None
        else:
            frame = self.frame_of()
            if frame is None or not frame.items:
                return out, []
            reach = self.clock.start + frame.items[-1].t
        if polls[0]["at"] > reach:
            return out, []  # in time order: none is reached yet (most frames)
        later = [x for x in polls if x["at"] > reach]  # kept for a later frame
        if later:
            self.listed[name] = later
        else:
            del self.listed[name]
        pushed: list[dict] = []
        records: list[Any] = []
        for poll in polls:
            at = poll["at"]
            if at > reach:
                continue
            moves = [] if frame is None else self._online_moves(frame, poll, at)
            if moves is None:
                continue  # an earlier item of the frame changes what the pass reads
            try:
                with self._online_as_of(moves):
                    result = answers.answer(self.world, poll["project"], poll["tu"], poll["method"],
                                            poll.get("params") or {}, at)
            except Exception:  # noqa: BLE001 - a request the world refuses keeps its round trip
                continue
            records.append(self.record(at, {"project": poll["project"], "tu": poll["tu"],
                                            "method": poll["method"], "params": poll.get("params") or {}}))
            pushed.append({"tu": poll["tu"], "pass": poll["pass"], "at": at, "result": result})
        if pushed:
            out["poll_answers"] = pushed
        return out, records

    def settle(self, name: str, result: Any, records: list[Any]) -> None:
        """The frame's answer: remember the polls it lists; take back the record of every
        pushed answer it did not use (none when it names none: an error answer)."""
        polls = result.get("polls") if isinstance(result, dict) else None
        if polls:  # each pass is listed once: kept, in time order, until a frame reaches it
            new = [x for x in polls if isinstance(x, dict) and isinstance(x.get("at"), (int, float))]
            self.listed[name] = sorted(self.listed.get(name, []) + new, key=lambda x: x["at"])
        if not records:
            return
        used = result.get("poll_answers_used") if isinstance(result, dict) else None
        if not isinstance(used, list):
            self.used += len(records)
            return
        keep = {i for i in used if isinstance(i, int)}
        for i, handle in enumerate(records):
            if i in keep:
                self.used += 1
            else:
                self.dropped += 1
                self.unrecord(handle)

    def _online_moves(self, frame: Frame, poll: dict, at: float) -> list[sc.Online] | None:
        """The items of ``frame`` earlier than ``at`` that change what ``poll``'s TU reads: None
        when one is not an RU going on/offline (the pass keeps its round trip), else those
        on/offline lines, in order (:meth:`_online_as_of` applies them for the answer)."""
        start, tu, project = self.clock.start, poll["tu"], poll["project"]
        online_only = (project, poll["method"]) in ONLINE_ONLY
        moves: list[sc.Online] = []
        for it in frame.items:
            if start + it.t >= at:
                break
            if it.apply is not None and self._touches(it, tu, project, online_only):
                line = it.entry[3]
                if it.event is not None or not isinstance(line, sc.Online):
                    return None
                moves.append(line)
        return moves

    @contextmanager
    def _online_as_of(self, moves: list[sc.Online]) -> Iterator[None]:
        """The world's online sets with ``moves`` applied, for one answer; restored after (the
        items themselves are applied when the sidecar reaches them, ``batch.Frame.seen``)."""
        was: dict[tuple[str, str], bool] = {}
        online = self.world.online
        for line in moves:
            was.setdefault((line.project, line.ru), line.ru in online[line.project])
            (online[line.project].add if line.online else online[line.project].discard)(line.ru)
        try:
            yield
        finally:
            for (project, ru), on in was.items():
                (online[project].add if on else online[project].discard)(ru)

    def _touches(self, it: Item, tu: str, project: str, online_only: bool = False) -> bool:
        """Does ``it`` change what ``tu``'s answers read (``online_only``: an answer that reads
        only its favorites and who is online)?"""
        line = it.entry[3]
        if online_only and (it.entry[1] == ACTION or isinstance(line, PAIR_LINES)):
            return False  # an own send, a chat item, a letter: a dialog, not who is online
        if it.event is not None and isinstance(it.event.get("tu"), str):
            return it.event["tu"] == tu  # a platform event (or an own send): its TU's pairs
        if it.entry[1] == ACTION:
            return True  # an own send always travels as an event; be safe otherwise
        named = getattr(line, "tu", None)
        if isinstance(named, str):
            return named == tu
        if isinstance(line, sc.Online):  # the world is per project: X reads it for its pairs
            return line.project == project and (
                self.world.favorite(project, tu, line.ru) is not None
                or (project, tu, line.ru) in self.world.pairs)
        return True
