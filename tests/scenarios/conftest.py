"""Fixtures for scenarios tests: where the full external traces, the shipped data and the shipped samples live."""
from __future__ import annotations

from pathlib import Path

import pytest

from scenarios.paths import DATA_ROOT, REPO_ROOT, shared_root

SAMPLES = REPO_ROOT / "scenarios" / "samples"
DATA_TRACES = DATA_ROOT / "traces"


def traces_root() -> Path:
    """`traces/` under the shared root (`$INFERPLAN_SHARED_ROOT` or ../shared): full external copies, maybe absent."""
    return shared_root() / "traces"


@pytest.fixture
def samples() -> Path:
    """The shipped trace samples folder."""
    return SAMPLES


@pytest.fixture
def real_trace(request):
    """real_trace(relative) -> a path under <shared root>/traces, skipping the test when that copy is absent.

    Only tests marked `shared_trace` may use it, so that `-m "not shared_trace"` leaves out every one of them."""
    if request.node.get_closest_marker("shared_trace") is None:
        pytest.fail(f"{request.node.name} reads a full external trace: mark it @pytest.mark.shared_trace")

    def _real(relative: str) -> Path:
        path = traces_root() / relative
        if not path.exists():
            pytest.skip(f"full external trace {path} is absent (set INFERPLAN_SHARED_ROOT or add ../shared)")
        return path
    return _real


@pytest.fixture
def write(tmp_path):
    """write(name, text) -> path of a new file under tmp_path."""
    def _write(name: str, text: str) -> Path:
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        return p
    return _write
