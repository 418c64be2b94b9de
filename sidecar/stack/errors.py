"""Stack errors: one tree for every failure of a Stack call (DESIGN §9, §10).

Rules
-----
* :class:`StackError` is the base; ``retryable`` says whether the same request may succeed later.
* :class:`StackUnavailable` (retryable): connection refused/reset, timeouts, any transport error,
  HTTP 5xx, HTTP 429, and a reply that cannot be decoded.  The write is kept and retried on the
  ladder (:mod:`.outbox`).
* :class:`StackRejected` (not retryable by nature): any other non-2xx status (4xx, and 3xx, since
  the client does not follow redirects).  For writes the router fails that write (Stack refused
  it: the same bytes under the same key cannot succeed) and raises ``sidecar/stack/refused``,
  except 408/409/429, which are retried (DESIGN §10 as revised; docs/decisions.md "A refused
  Stack write").
* ``status`` is the HTTP status or ``None`` when no response arrived; ``method``/``path`` name the
  call; ``detail`` carries a short excerpt of the reply body.
"""
from __future__ import annotations

from sidecar.domain.errors import IOFailure


class StackError(IOFailure):
    """A Stack call failed."""

    retryable: bool = False

    def __init__(self, message: str, *, status: int | None = None, method: str = "",
                 path: str = "", detail: str = "", retry_after: float | None = None,
                 retry_after_header: str | None = None) -> None:
        self.status = status  # HTTP status, None when there was no response
        self.retry_after = retry_after  # seconds, a 429's Retry-After (flood control, DESIGN §10)
        # a 429's Retry-After as sent (delay-seconds or an HTTP-date, RFC 9110 §10.2.3): a date is
        # read against the caller's ``now`` (the router's pass), which the client does not know
        self.retry_after_header = retry_after_header
        self.method = method  # "GET" | "PUT" | "POST"
        self.path = path  # request path, e.g. "/v1/tus/g-tu-1/tasks"
        self.detail = detail  # excerpt of the response body (≤ 200 chars)
        super().__init__(message)

    def short(self) -> str:
        """One line for ``outbox.last_error`` and logs."""
        head = f"{type(self).__name__}"
        if self.status is not None:
            head += f" {self.status}"
        return f"{head}: {self}"


class StackUnavailable(StackError):
    """Stack could not be reached or answered 5xx/429: retry later."""

    retryable = True


class StackRejected(StackError):
    """Stack answered with a non-retryable status (4xx other than 429)."""

    retryable = False
