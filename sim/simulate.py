"""One simulation and its results: the library entry point (`sim/__main__.py`, `sim/api.py`, validation and the
benchmarks call it). The engine (`sim.core.run`) runs the cluster and returns its outcome (typed records); the summary is
built from it here, above the engine."""
from __future__ import annotations

import time

from scenarios.workload import Workload
from inferplan.config.run import RunConfig
from sim.core.run import run_cluster
from sim.results.result import SimResult
from sim.results.summary import summarize


def simulate(run: RunConfig, workload: Workload, progress=None) -> SimResult:
    """Simulate `workload` on the fleet of `run`. `progress(fraction)` is called as simulated time advances."""
    wall0 = time.perf_counter()
    out = run_cluster(run, workload, progress)
    summary = summarize(run, out)
    summary["wall_time_s"] = round(time.perf_counter() - wall0, 3)
    if progress is not None:
        progress(1.0)
    return SimResult(out.requests, out.timeseries_columns, out.pool_columns, summary,
                     interrupted_by=out.interrupted_by)
