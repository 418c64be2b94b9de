"""The TypeScript client package (``clients/typescript``, issue 20): its ``npm test`` under Node's
own test runner, fed the schema ``sidecar schema`` prints now and the frames a real replay just
exchanged (temp files passed by environment variable; no copy of the schema is checked in, so it
cannot go stale).  Skipped, saying why, without Node ≥ 20 or without ``npm ci`` in the package."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "clients" / "typescript"
NODE_MAJOR = 20
pytestmark = pytest.mark.xdist_group("capture")  # shares tests/contract's captured replay


def node_or_skip() -> str:
    """Node ≥ 20 with the package's dependencies installed, or the calling test skips saying why."""
    node = shutil.which("node")
    if node is None:
        pytest.skip(f"node ≥ {NODE_MAJOR} not found on PATH: the TypeScript client's tests did not run")
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    m = re.match(r"v(\d+)\.", version)
    if m is None or int(m[1]) < NODE_MAJOR:
        pytest.skip(f"node ≥ {NODE_MAJOR} not found (PATH has {version or 'an unreadable node'}):"
                    " the TypeScript client's tests did not run")
    if not (PACKAGE / "node_modules").is_dir():
        pytest.skip("run `npm ci` in clients/typescript: the TypeScript client's tests did not run")
    return node


@pytest.fixture(scope="session")  # the scope of ``captured``: fixtures of a wider scope come first
def node() -> str:
    """:func:`node_or_skip` asked before ``captured``, so a skip does not first pay for the
    replay it would feed (~11 s)."""
    return node_or_skip()


def test_npm_test_compiles_the_schema_in_ajv_strict_and_validates_real_frames(node, tmp_path, captured):
    npm = shutil.which("npm", path=str(Path(node).parent)) or shutil.which("npm")
    assert npm, "node is on PATH but npm is not"
    schema = tmp_path / "schema.json"
    with schema.open("w") as f:
        subprocess.run([sys.executable, "-m", "sidecar", "schema"], cwd=ROOT, stdout=f, check=True)
    r = subprocess.run([npm, "test"], cwd=PACKAGE, capture_output=True, text=True,
                       env={**os.environ, "SIDECAR_SCHEMA": str(schema), "SIDECAR_FRAMES": str(captured)})
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "# skipped 0" in r.stdout and "# fail 0" in r.stdout, r.stdout[-2000:]
    assert re.search(r"ajv strict: \d+ frames, 0 violations", r.stdout), r.stdout[-2000:]
