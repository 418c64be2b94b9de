"""The runtime room (DESIGN §5, §13): the sans-I/O floor every service stands on.

* :mod:`.step` — a step's effects (store ops, notes, requests) and the service hooks protocol;
* :mod:`.factory` — the Task Factory (create, refuse, close, overdue);
* :mod:`.tu` — one TU's runtime: its state and the facts its services hand up;
* :mod:`.dispatch` — one domain event: the core reactions, then every service;
* :mod:`.engine` — every TU, the one scheduler, keyed randomness, the process-wide namespace;
* :mod:`.decisions` — the decision log ("why");
* :mod:`.executor` — the ONE step executor: commit, then notify, then requests.

Imports flow one way, top to bottom: ``step`` ← ``decisions`` ← ``factory`` ← ``tu`` ←
``dispatch`` ← ``engine`` ← ``executor``; services import the runtime, never the reverse; nothing here imports an
I/O library (``tests/sidecar/test_sans_io_imports.py``).
"""
