"""Fixtures for scenarios tests: where the real traces and the shipped samples live."""
from __future__ import annotations

from pathlib import Path

import pytest

from scenarios.paths import REPO_ROOT, SHARED_ROOT

TRACES = SHARED_ROOT / "traces"
SAMPLES = REPO_ROOT / "scenarios" / "samples"


@pytest.fixture
def samples() -> Path:
    """The shipped trace samples folder."""
    return SAMPLES


@pytest.fixture
def real_trace():
    """real_trace(relative) -> a path under shared/traces, skipping the test when the traces are absent."""
    def _real(relative: str) -> Path:
        path = TRACES / relative
        if not path.exists():
            pytest.skip(f"real trace {path} is not present")
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
