"""How long a test waits for what is not its subject.

The suite runs on machines whose load it does not control (2 cores shared with other suites; CI
images at load 8–20), so a wait that only guards against a hang must not be one a slow machine can
reach: a websocket opening handshake of websockets' default 10 s was passed once at load 16–18
(``test_the_pre_auth_cap_is_4_KiB_exactly``).  A test *about* a timeout sets its own, short one.
"""

HANDSHAKE_S = 120.0  # seconds: a websocket opening handshake, the bridge's auth answer

__all__ = ["HANDSHAKE_S"]
