"""The captured replay frames (tests/contract) serve the TypeScript client's tests too."""
from tests.contract.conftest import captured, frames  # noqa: F401 - pytest fixtures
