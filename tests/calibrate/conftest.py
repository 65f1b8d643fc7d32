"""Calibration-test fixtures: toy model files and a Settings factory for fast CPU runs (tiny grid, datasheet peaks,
one thread, no progress bar)."""
from __future__ import annotations

from pathlib import Path

import pytest

from calibrate.settings import Settings
from calibrate.tiny_models import TINY_MODELS, write_tiny_model


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("models")
    return {name: write_tiny_model(name, folder) for name in TINY_MODELS}


@pytest.fixture
def make_settings(tmp_path: Path, tiny_models: dict[str, Path]):
    def make(**overrides: object) -> Settings:
        base = dict(hardware="cpu_local", model=str(tiny_models["tiny_gqa"]), out_dir=tmp_path / "cal", grid="tiny",
                    peaks="datasheet", threads=1, progress=False, dtypes=("bf16",),
                    ops=("gemm", "attn_decode", "elementwise"))
        base.update(overrides)
        return Settings(**base)
    return make


@pytest.fixture
def step_clock():
    """Factory of fake clocks: `step_clock(0.5)` advances 0.5 s per reading."""
    return StepClock


class StepClock:
    """A fake monotonic clock that advances `step_s` on every reading (deterministic budgets)."""

    def __init__(self, step_s: float) -> None:
        self.t, self.step_s = 0.0, step_s

    def __call__(self) -> float:
        self.t += self.step_s
        return self.t
