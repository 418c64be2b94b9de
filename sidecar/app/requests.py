"""The app's platform requests: ``platform.request`` to Electron, one or a step's several in one
round trip (``platform.requests``).

Rules / theory of operation
---------------------------
* A request carries ``at`` (the asking step's instant, unix seconds) and, inside a
  ``platform.events`` call, ``batch_seen`` / ``batch_skipped`` (:class:`sidecar.protocol.outbound.PlatformRequest`):
  on the virtual clock a replayer answers from its world as of then.
* Virtual clock: the requests one step makes go out together as ONE ``platform.requests
  {requests: [platform.request params, …]}`` round trip when there are several; the answer is
  ``{"results": [{"result": …} | {"error": {"code", "message"}}, …]}``, one per request, in
  order.  An answer is a function of the world at the step's instant, so asking together
  changes no answer; the executor still runs each answer as its own step, in request order
  (:mod:`sidecar.runtime.executor`).  The wall clock asks one by one, in the background.
* A client whose ``auth`` listed ``capabilities`` is asked together iff it listed
  ``platform.requests`` (DESIGN §4; docs/protocol.md "Versions").  One that sent none (older than
  versioning) is probed: if it does not know ``platform.requests`` (it answers -32601, or with
  anything but one result per request) it is asked one by one from then on (:class:`Asker`): the
  same answers, more round trips — an older Electron or a test client that answers every method
  alike keeps working.  That is the connection's fact: a client that connects afterwards is asked
  together again.
* Answers that each fit the bridge's frame cap (1 MiB) may not fit it together: the bridge fails
  the round trip at once (:class:`bridge.errors.AnswerTooLarge`) and that step's requests are
  asked one by one — asking together never fails where one by one succeeds.
* A grid poll pass whose answer the frame carried asks nothing (the app's ``perform`` /
  ``perform_many`` take it first, :mod:`sidecar.app.pushed_polls`).
* Any failure is an outcome, never raised: ``(None, "<ExceptionName>: <text>")`` — a per-item
  error reads exactly as the same error of a single ``platform.request`` (a
  :class:`bridge.errors.RemoteError`), a failure of the whole round trip (a timeout, no client)
  is every item's.
"""
from __future__ import annotations

import logging
from typing import Any

from msgspec import UNSET

from bridge import BridgeServer
from bridge.errors import AnswerTooLarge, RemoteError
from sidecar.domain.errors import Refusal
from sidecar.protocol.outbound import PlatformRequest, PlatformRequests
from sidecar.runtime.step import Request

Outcome = tuple[Any, str | None]  # (result, None) or (None, error text)
log = logging.getLogger("sidecar.app.root")


def params_of(req: Request, batch_seen: int | None, batch_skipped: list[int]) -> PlatformRequest:
    """The wire params of ``req`` (``batch_*``: the open ``platform.events`` call's, module rules)."""
    return PlatformRequest(project=req.project, tu=req.tu, method=req.method, params=req.params,
                           at=req.at, batch_seen=UNSET if batch_seen is None else batch_seen,
                           batch_skipped=list(batch_skipped) or UNSET)


async def perform(bridge: BridgeServer, params: PlatformRequest, timeout: float) -> Outcome:
    """One ``platform.request``."""
    try:
        return await bridge.request("platform.request", params, timeout=timeout), None
    except Exception as exc:  # noqa: BLE001 - any failure is an answer: the pass retries later
        return None, f"{type(exc).__name__}: {exc}"


class Unsupported(Refusal):
    """The client does not serve ``platform.requests`` (module rules)."""


async def perform_many(bridge: BridgeServer, params: list[PlatformRequest], timeout: float) -> list[Outcome]:
    """Several requests in one ``platform.requests`` round trip; one outcome per request.
    Raises :class:`Unsupported` when the client does not serve the method, and
    :class:`bridge.errors.AnswerTooLarge` when the answers together exceed the frame cap."""
    try:
        answer = await bridge.request("platform.requests", PlatformRequests(requests=params),
                                      timeout=timeout)
    except AnswerTooLarge:
        raise  # each answer may fit alone: Asker.many asks one by one
    except RemoteError as exc:
        if exc.code == -32601:
            raise Unsupported(str(exc)) from exc
        return [(None, f"{type(exc).__name__}: {exc}")] * len(params)
    except Exception as exc:  # noqa: BLE001 - any failure is an answer: the passes retry later
        return [(None, f"{type(exc).__name__}: {exc}")] * len(params)
    results = answer.get("results") if isinstance(answer, dict) else None
    if not isinstance(results, list) or len(results) != len(params):
        raise Unsupported(f"platform.requests: {len(params)} requests, answer {answer!r:.200}")
    return [_outcome(r) for r in results]


_NOBODY = object()  # Asker._refused_by while no client refused platform.requests


class Asker:
    """The app's requests to one bridge (module rules): together while the client serves
    ``platform.requests``, one by one after the connected client showed it does not (a newer
    client that connects is asked together again), and one by one for a step whose answers
    together were too large for one frame."""

    def __init__(self, bridge: BridgeServer, timeout: float) -> None:
        self.bridge, self.timeout = bridge, timeout
        # the connection (its auth params, a new object per connection; None in-process) that
        # did not serve platform.requests; _NOBODY while every client so far did
        self._refused_by: object = _NOBODY

    @property
    def together(self) -> bool:
        """What the connected client's ``capabilities`` say; without them: True unless it
        showed it does not serve ``platform.requests`` (module rules)."""
        said = getattr(self.bridge.client, "capabilities", None)
        if said is not None:
            return "platform.requests" in said
        return self._refused_by is not self.bridge.client

    async def one(self, params: PlatformRequest) -> Outcome:
        return await perform(self.bridge, params, self.timeout)

    async def many(self, params: list[PlatformRequest]) -> list[Outcome]:
        if self.together:
            client = self.bridge.client
            try:
                return await perform_many(self.bridge, params, self.timeout)
            except Unsupported as exc:
                log.info("the client does not serve platform.requests (%s); asking one by one", exc)
                self._refused_by = client
            except AnswerTooLarge as exc:
                log.info("%s; asking this step's %d requests one by one", exc, len(params))
        return [await self.one(x) for x in params]


def _outcome(item: Any) -> Outcome:
    if isinstance(item, dict) and isinstance(item.get("error"), dict):
        err = item["error"]
        exc = RemoteError(err.get("code", -32603), str(err.get("message", "")), err.get("data"))
        return None, f"{type(exc).__name__}: {exc}"
    if isinstance(item, dict) and "result" in item:
        return item["result"], None
    return None, f"ValueError: platform.requests: a result is neither result nor error: {item!r:.200}"
