"""The suite's waits for what is not a test's subject are ones no loaded machine reaches
(``tests/waits.py``): every raw websocket connection a test opens names its handshake wait, and
the suite's bridge clients and spawned sidecars wait :data:`HANDSHAKE_S`."""
import re
from pathlib import Path

import bridge.client
from tests.waits import HANDSHAKE_S

TESTS = Path(__file__).resolve().parent
RAW = re.compile(r"(?<![.\w])(?:ws_)?connect\(f\"ws://")


def test_every_raw_websocket_connect_names_its_handshake_wait():
    missing = []
    for path in sorted(TESTS.rglob("*.py")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if RAW.search(line) and "open_timeout=" not in line:
                missing.append(f"{path.relative_to(TESTS)}:{n}: {line.strip()}")
    assert not missing, "websockets' 10 s default is reachable on a loaded machine:\n" + "\n".join(missing)


def test_the_suite_bridge_client_waits_the_suite_handshake():
    assert bridge.client.OPEN_TIMEOUT_S == HANDSHAKE_S  # tests/conftest.py
