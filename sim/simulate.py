"""One simulation and its results: the library entry point (`sim/__main__.py`, `sim/api.py`, validation and the
benchmarks call it). The engine (`sim.core.run`) runs the cluster; the summary is built here, above it."""
from __future__ import annotations

import time

from scenarios.workload import Workload
from inferplan.config.run import RunConfig
from sim.core.run import run_cluster
from sim.results.result import SimResult
from sim.results.schema import SCHEMA_VERSION
from sim.results.summary import summarize


def simulate(run: RunConfig, workload: Workload, progress=None) -> SimResult:
    """Simulate `workload` on the fleet of `run`. `progress(fraction)` is called as simulated time advances."""
    wall0 = time.perf_counter()
    out = run_cluster(run, workload, progress)
    status = "interrupted" if out.interrupted_by else "completed"
    summary = summarize(run, out.cluster, out.requests, out.end_s, out.peak_instances, out.invariants,
                        out.pool_columns, partial=bool(out.interrupted_by))
    summary = {"schema_version": SCHEMA_VERSION, "status": status, **summary}
    summary["wall_time_s"] = round(time.perf_counter() - wall0, 3)
    if progress is not None:
        progress(1.0)
    return SimResult(out.requests, out.timeseries_columns, out.pool_columns, summary,
                     interrupted_by=out.interrupted_by)
