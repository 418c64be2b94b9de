"""The TypeScript client package (``clients/typescript``, issue 20): its ``npm test`` under Node's
own test runner, fed the schema ``sidecar schema`` prints now and the frames a real replay just
exchanged (temp files passed by environment variable; no copy of the schema is checked in, so it
cannot go stale).  Skipped, saying why, without Node ≥ 20 or without ``npm ci`` in the package."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "clients" / "typescript"
NODE_MAJOR = 20
pytestmark = pytest.mark.xdist_group("capture")  # shares tests/contract's captured replay


#: seconds an `npm test` may run (~20 s quiet here): one that hangs — a failed test left a sidecar
#: alive and Node waited for it — fails naming itself instead of holding its worker until
#: pytest-timeout's stack dump (stop 31)
NPM_TEST_TIMEOUT_S = 600


def run_bounded(cmd: list[str], *, cwd: Path, env: dict[str, str],
                timeout: float = NPM_TEST_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """``cmd`` in a session of its own, output captured; past ``timeout`` seconds the whole
    process group (npm, node, the sidecars it spawned) is killed and the test fails with the
    output so far."""
    with subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, start_new_session=True) as p:
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            pytest.fail(f"{' '.join(cmd)!r} still ran after {timeout} s (killed):\n{out[-4000:]}\n{err[-2000:]}")
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


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
    r = run_bounded([npm, "test"], cwd=PACKAGE,
                    env={**os.environ, "SIDECAR_SCHEMA": str(schema), "SIDECAR_FRAMES": str(captured)})
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "# skipped 0" in r.stdout and "# fail 0" in r.stdout, r.stdout[-2000:]
    assert re.search(r"ajv strict: \d+ frames, 0 violations", r.stdout), r.stdout[-2000:]
