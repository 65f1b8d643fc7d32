"""Small builders shared by the simulator tests."""
from __future__ import annotations

import numpy as np

from scenarios.workload import Workload
from sim.compose import compose_config
from sim.config import load_run_config
from sim.core.instance.request_state import SimRequest


def run_config(*overrides: str):
    """A validated RunConfig for the smoke scenario plus Hydra-syntax overrides."""
    return load_run_config(compose_config(["scenario=smoke", "metrics.progress=false", *overrides]))


def poisson_workload(n: int, rate_per_s: float, seed: int, prompt_median: int = 256, output_median: int = 64) -> Workload:
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1.0 / rate_per_s, n))
    prompt = np.clip(np.round(rng.lognormal(np.log(prompt_median), 0.8, n)), 1, 4096)
    output = np.clip(np.round(rng.lognormal(np.log(output_median), 0.6, n)), 1, 1024)
    return Workload.from_columns(arrival, prompt, output)


class Requests(dict):
    """SimRequests by id, each made on first use (a block manager's per-request calls take the request, whose KV
    state it keeps on it); clear it between tests."""

    def __missing__(self, rid: int) -> SimRequest:
        req = self[rid] = SimRequest(rid, 0.0, 1, 1)
        return req
