"""Shared builders for the validation tests: simulator-made logs under known residual parameters."""
from __future__ import annotations

from pathlib import Path

import pytest

from sim.validate.replay import ResidualParams
from sim.validate.synthetic import SAMPLES_DIR, make_log, truth_run

# One A100-80GB running Llama-3-8B with continuous batching, as in the shipped samples.
DEPLOYMENT = ["scenario=smoke", "scenario.pools.main.hardware=a100_80gb", "scenario.pools.main.instances=1"]
TRUTH = ResidualParams(step_overhead_s=4e-3, frontend_overhead_s=0.015, scale={"gemm": 0.8, "attention": 1.0})


@pytest.fixture(scope="session")
def truth_log():
    """150 Poisson requests at 3 req/s with 3% lognormal measurement noise, simulated under `TRUTH`."""
    return make_log(truth_run(DEPLOYMENT, TRUTH), n=150, rate_per_s=3.0, seed=11, noise_sigma=0.03,
                    prompt_median=1500, output_median=48)


@pytest.fixture
def samples() -> Path:
    return SAMPLES_DIR
