"""The TypeScript client's tests (``clients/typescript/test/client.test.mjs``) against the FROZEN
binary (issue 20 item 5): the ``frozen`` fixture builds it once, ``SIDECAR_FROZEN`` points the
Node tests at it.  Skipped, saying why, without Node ≥ 20 or ``npm ci``, like the source run."""
from __future__ import annotations

import os
import shutil

import pytest

from tests.clients.test_typescript import PACKAGE, node_or_skip, run_bounded

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("frozen")]


def test_typescript_client_against_the_frozen_binary(frozen):
    node_or_skip()
    npm = shutil.which("npm")
    assert npm, "node is on PATH but npm is not"
    r = run_bounded([npm, "test", "--", "test/client.test.mjs"], cwd=PACKAGE,
                    env={**os.environ, "SIDECAR_FROZEN": str(frozen)})
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    # the client's three tests ran and passed (the schema tests skip: they need SIDECAR_SCHEMA)
    assert "# fail 0" in r.stdout and r.stdout.count("\nok ") >= 3, r.stdout[-2000:]
    assert "# skip no sidecar" not in r.stdout, r.stdout[-2000:]
