"""Sender health (DESIGN §10 second half; seed 000): a pure health machine per sender, groups,
the manage operations, their storage and a fleet simulator.  Nothing here does I/O except
the sqlite3 readers of :mod:`sidecar.senders.io.storage`; the app component is
:mod:`sidecar.app.senders`, the CLI :mod:`sidecar.cli.senders`; the router asks :func:`health.may_send` and reports outcomes."""
