"""Sender health (DESIGN §10 second half; seed 000): a pure health machine per sender, groups,
the manage operations, their storage and a fleet simulator.  Nothing here does I/O except
:mod:`sidecar.senders.store`; the router asks :func:`health.may_send` and reports outcomes."""
