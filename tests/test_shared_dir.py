"""``../shared`` has one location (tests/shared_dir.py, issue 18 item 1): SIDECAR_SHARED_DIR moves
it or, naming nothing, hides it; no other module builds a path to it; and a test module that
reads it is marked ``shared`` (skipped, with the reason, where it is absent) or falls back."""
from __future__ import annotations

import re

from tests.shared_dir import ENV, ROOT, locate

#: modules that read ../shared's files when there and use their own otherwise
FALLS_BACK = {"tests/packaging/test_frozen.py": "the generated demo scenario"}
LOCATION_NAMES = re.compile(r"\bimport\b[^\n]*\b(SHARED|SEED_DIR|SHIFT)\b")
# ``X / "shared"``, a string that is the path ``"../shared"`` or ``"../shared/…"``, ``join(…, "shared")``
BUILT_PATH = re.compile(r"""/\s*["']shared["']|["']\.\./shared(/|["'])|join\([^)]*["']shared["']""")


def test_the_location_comes_from_the_environment_else_beside_the_checkout(tmp_path):
    assert locate({}) == ROOT.parent / "shared"
    assert locate({ENV: ""}) == ROOT.parent / "shared"  # empty counts as unset
    assert locate({ENV: str(tmp_path)}) == tmp_path
    assert not locate({ENV: str(tmp_path / "nowhere")}).is_dir()  # invisible


def _sources():
    for top in ("tests", "bench", "electron-stub", "sidecar", "bridge", "platform_clients", "packaging"):
        for path in (ROOT / top).rglob("*.py"):
            yield path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8")


def test_no_module_but_shared_dir_builds_a_path_to_shared():
    own = ("tests/shared_dir.py", "tests/test_shared_dir.py")
    found = [name for name, text in _sources() if name not in own and BUILT_PATH.search(text)]
    assert found == [], f"take the location from tests/shared_dir.py: {found}"


def test_a_test_module_that_reads_shared_is_marked_shared_or_falls_back():
    unmarked = [name for name, text in _sources()
                if re.search(r"(^|/)test_[^/]*\.py$", name) and LOCATION_NAMES.search(text)
                and "pytest.mark.shared" not in text and name not in FALLS_BACK]
    assert unmarked == [], f"mark these pytest.mark.shared (or take the shared_dir fixture): {unmarked}"
