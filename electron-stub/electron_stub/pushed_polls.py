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
  world as of ``at`` for that TU is the world now plus items of the frame the harness can play
  for it.  An advance applies no line, so that holds for every pass in it.  In a
  ``platform.events`` frame the items earlier than ``at`` are played for that one answer
  (``World.as_of``: on copies, restored after; the frame applies them when the sidecar reaches
  them): every RU of X's project going on/offline, and each line that changes only a dialog of
  X (an RU's message, like, letter, … :data:`~electron_stub.world.DIALOG_LINES`).  An earlier
  item that changes X's world otherwise keeps the pass's round trip: an own send of X (the
  sidecar may skip it: ``if_open``), a favorite, limit or block line of X (it changes the
  reference Stack too), a line naming no TU.  Items naming another TU change nothing X reads.
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

from typing import Any, Callable

from electron_stub import answers
from electron_stub import scenario as sc
from electron_stub.batch import Frame, Item
from electron_stub.replay_sidecars import ACTION, VirtualTime
from electron_stub.world import DIALOG_LINES, World

# answers that read only the TU's favorites and who is online (Golden's online_ru): a chat item,
# a letter or a dialog change of the TU does not change them
ONLINE_ONLY = frozenset({("golden", "online_ru")})
NO_WORLD = (sc.NotificationLine,)  # a platform event that changes nothing World.apply keeps
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
            moves = [] if frame is None else self._moves(frame, poll, at)
            if moves is None:
                continue  # an earlier item of the frame changes what the pass reads
            try:
                with self.world.as_of(moves):
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

    def _moves(self, frame: Frame, poll: dict, at: float) -> list[tuple[Any, float]] | None:
        """The items of ``frame`` earlier than ``at`` that the world as of ``at`` holds for
        ``poll``'s TU, as ``(line, unix s)`` in order (:meth:`World.as_of` plays them for the
        answer): every RU going on/offline in its project and each line that changes only a
        dialog of the TU.  None when another item earlier than ``at`` changes what the pass
        reads — an own send of the TU (the sidecar may skip it), a favorite, limit or block
        line, a line naming no TU: the pass keeps its round trip."""
        start, tu, project = self.clock.start, poll["tu"], poll["project"]
        online_only = (project, poll["method"]) in ONLINE_ONLY
        moves: list[tuple[Any, float]] = []
        for it in frame.items:
            t = start + it.t
            if t >= at:
                break
            if it.apply is None:
                continue  # no world change (a pass-over, an answer to a closed task)
            line = it.entry[3]
            if type(line) is sc.Online:
                if line.project == project:  # whoever it is: the world as of ``at`` has it
                    moves.append((line, t))
                continue
            if not self._touches(it, tu, online_only) or type(line) in NO_WORLD:
                continue
            if it.entry[1] == ACTION or not isinstance(line, DIALOG_LINES):
                return None
            moves.append((line, t))
        return moves

    def _touches(self, it: Item, tu: str, online_only: bool = False) -> bool:
        """Does ``it`` (not an ``online`` line) change what ``tu``'s answers read
        (``online_only``: an answer that reads only its favorites and who is online)?"""
        line = it.entry[3]
        if online_only and (it.entry[1] == ACTION or isinstance(line, DIALOG_LINES)):
            return False  # an own send, a chat item, a letter: a dialog, not who is online
        if it.event is not None and isinstance(it.event.get("tu"), str):
            return it.event["tu"] == tu  # a platform event (or an own send): its TU's pairs
        if it.entry[1] == ACTION:
            return True  # an own send always travels as an event; be safe otherwise
        named = getattr(line, "tu", None)
        return named == tu if isinstance(named, str) else True
