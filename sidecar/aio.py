"""Small asyncio helpers whose waits a cancellation can never be swallowed by (issue 7).

Rules / theory of operation
---------------------------
* On Python 3.11 ``asyncio.wait_for(fut, t)`` returns ``fut``'s result when ``fut`` finished in
  the same loop iteration in which the waiting task was cancelled: the cancellation is lost.  A
  loop such as ``while True: await wait_for(event.wait(), t)`` then never ends, and whoever
  cancelled it and awaits it (``close()``) waits forever — the sidecar that never exits.  Fixed in
  3.12; ``asyncio.timeout`` (3.11+) never loses a cancellation, so every wait here uses it and
  ``asyncio.wait_for`` is banned by the linter (pyproject.toml, ruff ``banned-api``).
* :func:`bounded` gives every ``close()`` a deadline: shutdown must end within 2 s in every state
  (DESIGN §3), so no single resource may hold it up.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["bounded", "cancel_all", "wait_event"]

log = logging.getLogger("sidecar.aio")
T = TypeVar("T")


async def wait_event(event: asyncio.Event, timeout_s: float) -> bool:
    """Wait for ``event`` at most ``timeout_s`` seconds (≤ 0: just look); True if it is set.

    A cancellation of the caller always propagates as ``CancelledError``."""
    if event.is_set():
        return True
    try:
        async with asyncio.timeout(max(0.0, timeout_s)):
            await event.wait()
    except TimeoutError:
        return False
    return True


async def bounded(aw: Awaitable[T], timeout_s: float, what: str) -> T | None:
    """Await ``aw`` for at most ``timeout_s`` seconds; on timeout log a warning naming ``what``,
    cancel it and return None — without waiting for the cancellation to finish, so even code
    that swallows a cancellation cannot hold the caller.  Other exceptions are logged and
    swallowed too: this is for shutdown steps, where one failing resource must not keep the rest
    open.  A cancellation of the caller propagates (and cancels ``aw``)."""
    task = asyncio.ensure_future(aw)
    try:
        done, _ = await asyncio.wait({task}, timeout=max(0.0, timeout_s))
    except asyncio.CancelledError:
        task.cancel()
        raise
    if not done:
        task.cancel()
        log.warning("%s did not finish within %.2f s; going on without it", what, timeout_s)
        return None
    exc = task.exception()
    if exc is not None:
        log.warning("%s failed: %s: %s", what, type(exc).__name__, exc)
        return None
    return task.result()


async def cancel_all(tasks: set[asyncio.Task] | list[asyncio.Task], timeout_s: float, what: str) -> None:
    """Cancel ``tasks`` and wait at most ``timeout_s`` seconds for them to end; log (never wait
    on) the ones that ignore their cancellation."""
    tasks = [t for t in tasks if not t.done()]
    for t in tasks:
        t.cancel()
    if not tasks:
        return
    _, pending = await asyncio.wait(tasks, timeout=max(0.0, timeout_s))
    if pending:
        log.warning("%s: %d task(s) still running %.2f s after cancel: %s", what, len(pending),
                    timeout_s, ", ".join(sorted(t.get_name() for t in pending)))
