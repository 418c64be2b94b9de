"""Sender health in a replay (scenarios README "Routing world", "Timeline", "Expectations"; DESIGN
§10; seed 000): ``group`` lines, ``manage`` lines and the ``sender`` / ``history`` expectations.

Rules / theory of operation
---------------------------
* ``group`` lines (initial world) are created on every machine the replay *starts* (``m1`` and
  each fresh machine of a shift change) right after its first ``clock.advance_to``, through the
  bridge like Electron's admin screen would: ``groups.create`` with the line's fields, then
  ``groups.senders.set`` with its ``senders``.  A crash restarts a machine on its data dir, which
  keeps them.  A refusal is a failed result naming the line.
* ``manage`` lines call their method on the current machine.  Group *names* of the scenario stand
  for the ids the sidecar minted: a params ``id`` and the ``groups`` of each ``items[]`` entry
  that name a known group are translated.  With ``error`` the call must fail with exactly that
  JSON-RPC code and change nothing (``groups.list`` and ``senders.list`` are compared before and
  after); without it the call must succeed.
* ``sender``: ``senders.get`` on the current machine — ``state`` (a sender resting after its
  release is ``active``) and, when given, ``cooldown_times``.  ``history``: the sender's rows
  with that ``code`` from every machine of the run (``senders.history`` from the running ones,
  the data dir read-only from retired ones) inside ``between`` ± the 1 s tolerance.
"""
from __future__ import annotations

import sqlite3
from typing import Any

from electron_stub import expect as ex
from electron_stub import scenario as sc

GROUP_FIELDS = ("priority", "failed_in_row", "cooldown_delay_from", "cooldown_delay_to",
                "send_from_message_interval", "send_to_message_interval", "from_time", "to_time")
SENDER_SNAPSHOT = ("groups.list", "senders.list")


def _error(exc: BaseException) -> int | None:
    """The JSON-RPC code of a peer's error answer (``RemoteError``), None for anything else."""
    return getattr(exc, "code", None) if type(exc).__name__ == "RemoteError" else None


class SenderLines:
    """Plays the sender lines of one replay; ``results`` is the replay's result list."""

    def __init__(self, groups: list[Any], results: list[ex.Result]) -> None:
        self.groups = groups  # sc.Group lines of the initial world
        self.results = results
        self.ids: dict[tuple[str, str], str] = {}  # (machine, group name) -> id

    async def setup(self, m: Any) -> None:
        """Create the scenario's groups on a newly started machine ``m``."""
        for g in self.groups:
            body = {"name": g.name, **{f: getattr(g, f) for f in GROUP_FIELDS if getattr(g, f) is not None}}
            try:
                created = await m.call("groups.create", body)
                gid = created["group"]["id"]
                self.ids[(m.name, g.name)] = gid
                if g.senders:
                    await m.call("groups.senders.set", {"id": gid, "senders": list(g.senders)})
            except Exception as exc:  # noqa: BLE001 - a refusal is the scenario's failure, reported
                if _error(exc) is None:
                    raise
                self.results.append(ex.Result(lineno=g.lineno, what="group", ok=False,
                                              detail=f"group {g.name!r} on {m.name} was refused: {exc}"))

    def _translate(self, m: Any, params: dict) -> dict:
        def gid(v: Any) -> Any:
            return self.ids.get((m.name, v), v) if isinstance(v, str) else v

        out = dict(params)
        if "id" in out:
            out["id"] = gid(out["id"])
        if isinstance(out.get("items"), list):
            out["items"] = [{**it, "groups": [gid(x) for x in it["groups"]]}
                            if isinstance(it, dict) and isinstance(it.get("groups"), list) else it
                            for it in out["items"]]
        return out

    async def manage(self, m: Any, line: sc.Manage) -> None:
        """One ``manage`` line on machine ``m`` (see the module rules)."""
        params = self._translate(m, line.params)
        before = await self._snapshot(m) if line.error is not None else None
        try:
            result = await m.call(line.method, params)
        except Exception as exc:  # noqa: BLE001 - the peer's error is what the line checks
            code = _error(exc)
            if code is None:
                raise
            if line.error is None:
                self._add(line, False, f"{line.method} failed: {exc}")
                return
            after = await self._snapshot(m)
            ok = code == line.error and after == before
            why = "" if after == before else "; it changed the groups or senders"
            self._add(line, ok, f"{line.method} answered error {code} (expected {line.error}){why}: {exc}")
            return
        if line.error is not None:
            self._add(line, False, f"{line.method} succeeded, expected error {line.error}: {result!r}"[:300])
        else:
            self._add(line, True, f"{line.method} ok")
            if line.method == "groups.create" and isinstance(result, dict):
                self.ids[(m.name, line.params.get("name"))] = result["group"]["id"]

    async def _snapshot(self, m: Any) -> list[Any]:
        out = []
        for method in SENDER_SNAPSHOT:
            res = await m.call(method, {})
            if isinstance(res, dict):
                res.pop("next_due", None)
            out.append(res)
        return out

    def _add(self, line: Any, ok: bool, detail: str) -> None:
        self.results.append(ex.Result(lineno=line.lineno, what="manage", ok=ok, detail=detail))

    async def expect_sender(self, m: Any, e: sc.Expect) -> ex.Result:
        try:
            s = (await m.call("senders.get", {"sender": e.sender}))["sender"]
        except Exception as exc:  # noqa: BLE001 - an unknown sender is a failed expectation
            if _error(exc) is None:
                raise
            return ex.Result(lineno=e.lineno, what="sender", ok=False, detail=f"sender {e.sender}: {exc}")
        ok = s["state"] == e.state and (e.cooldown_times is None or s["cooldown_times"] == e.cooldown_times)
        want = e.state + (f", cooldown_times {e.cooldown_times}" if e.cooldown_times is not None else "")
        return ex.Result(lineno=e.lineno, what="sender", ok=ok,
                         detail=f"sender {e.sender}: expected {want}; it is {s['state']}, cooldown_times "
                                f"{s['cooldown_times']}, failed_in_row {s['failed_in_row']}")

    async def expect_history(self, machines: list[Any], e: sc.Expect, start: float) -> ex.Result:
        assert e.between is not None and e.min is not None and e.max is not None
        rows: list[dict] = []
        for m in machines:
            if m.running:
                try:  # page through: an answer is at most 1000 rows and under the frame cap
                    params: dict[str, Any] = {"sender": e.sender, "limit": 1000}
                    while True:
                        answer = await m.call("senders.history", params)
                        rows += answer["rows"]
                        if answer.get("next") is None:
                            break
                        params = {**params, "after_id": answer["next"]}
                except Exception as exc:  # noqa: BLE001 - unknown on that machine: no rows there
                    if _error(exc) is None:
                        raise
            else:
                rows += _history_from_dir(m.data_dir, e.sender or "")
        lo, hi = start + e.between[0] - ex.TOLERANCE_S, start + e.between[1] + ex.TOLERANCE_S
        hits = [r for r in rows if r["code"] == e.code and lo <= r["at"] <= hi]
        seen = ", ".join(f"{r['code']}@{r['at'] - start:.0f}" for r in rows[:12]) + (" …" if len(rows) > 12 else "")
        return ex.Result(lineno=e.lineno, what="history", ok=e.min <= len(hits) <= e.max,
                         detail=f"sender {e.sender} code {e.code} in {list(e.between)}: wanted "
                                f"{e.min}..{e.max}, found {len(hits)}; its rows: [{seen}]")


def _history_from_dir(data_dir: Any, sender: str) -> list[dict]:
    """A retired machine's history rows, read-only like ``sidecar senders history``."""
    path = data_dir / "sidecar.db"
    if not path.is_file():
        return []
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return [{"at": at, "code": code, "note": note} for at, code, note in conn.execute(
            "SELECT at, code, note FROM sender_history WHERE sender = ? ORDER BY at, id", (sender,))]
    except sqlite3.Error:
        return []
    finally:
        conn.close()
