"""One simulation in the engine: build the cluster, run SimPy until every request ended (or the drain timeout),
collect the request columns, the sampled series and the invariants.

`run_cluster(run, workload)` returns that outcome as typed records (sim/core/outcome.py: no live object leaves
the engine); `sim/simulate.py` (`simulate`, the library entry point that
`sim/__main__.py` and `sim/api.py` wrap) adds the summary, so the engine never imports the results layer.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager

import numpy as np
import simpy

from inferplan.columns import Columns
from inferplan.interrupts import StopFlag, stop_requested
from scenarios.workload import Workload
from sim.core.cluster import Cluster
from inferplan.config.run import RunConfig
from sim.core.fleet.billing import revenue_usd
from sim.core.instance.itl import ItlSketch
from sim.core.metrics import RequestRecorder, Sampler
from sim.core.outcome import FleetOutcome, OverloadFacts, RunOutcome

__all__ = ["RunOutcome", "run_cluster"]


def check_invariants(cols: Columns, cluster: Cluster, arrived: int) -> dict[str, str]:
    """The named invariants checked at the end of every run (see docs/architecture.md)."""
    out = {}
    status = cols["status"]
    counts = {s: int((status == s).sum()) for s in ("completed", "rejected", "unfinished")}
    drift = [f"{p.name}[{i.index}]" for p in cluster.pools.values() for i in p.instances
             if i.outstanding != len(i.policy.waiting) + len(i.policy.running)]
    out["request_conservation"] = ("ok" if sum(counts.values()) == arrived == len(status) and not drift else
                                   f"violated: {counts} vs {arrived} arrived; instance counts off on {drift}")
    over = [f"{p.name}[{i.index}]" for p in cluster.pools.values() for i in p.instances
            if i.kv.peak_used_blocks > i.kv.num_blocks]
    out["kv_capacity"] = "ok" if not over else f"violated on {', '.join(over)}"
    bad_clock = [f"{p.name}[{i.index}]" for p in cluster.pools.values() for i in p.instances if not i.clock_ok]
    out["clock_monotone"] = "ok" if not bad_clock else f"violated on {', '.join(bad_clock)}"
    a, f1, fin = cols["arrival_s"], cols["first_token_s"], cols["finish_s"]
    with np.errstate(invalid="ignore"):
        bad = np.sum(f1 < a) + np.sum(fin < f1) + np.sum((status == "completed") & ~np.isfinite(fin))
    out["causality"] = "ok" if bad == 0 else f"violated by {int(bad)} requests"
    return out


@contextmanager
def _rare_cycle_collection(gen0_threshold: int = 50_000):
    """Run the event loop with fewer cyclic-garbage passes: it allocates millions of short-lived containers (batch
    items, shapes, events) that reference counting frees, so the default pass every 700 allocations walks young
    objects and finds next to nothing (6-10% of ecommerce_peak and deepseek_v3_day). Cycles are still collected;
    the previous thresholds come back afterwards."""
    old = gc.get_threshold()
    gc.set_threshold(max(old[0], gen0_threshold), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)


def run_cluster(run: RunConfig, workload: Workload, progress=None) -> RunOutcome:
    """Simulate `workload` on the fleet of `run`. `progress(fraction)` is called as simulated time advances."""
    env = simpy.Environment()
    recorder = RequestRecorder(workload, list(run.pools))
    cluster = Cluster(env, run, workload, recorder)
    last_arrival = float(workload.arrival_s[-1]) if len(workload) else 0.0
    horizon_s = last_arrival + run.scenario.frontend_overhead_s + run.scenario.drain_timeout_s
    tick = None
    if progress is not None:
        tick = lambda t: progress(min(1.0, t / max(last_arrival, 1e-9)))
    sampler = Sampler(env, cluster, run.metrics.sample_interval_s, tick)
    stop = StopFlag()
    if len(workload):
        with _rare_cycle_collection(), stop_requested() as stop:
            closed = workload.metadata.get("closed_loop")
            if closed:  # the drain timeout counts from the last request a client sent, not from t = 0
                deadline = env.event()
                env.process(_drain_after_last_send(env, cluster, run.scenario.frontend_overhead_s
                                                   + run.scenario.drain_timeout_s, deadline))
            else:
                deadline = env.timeout(horizon_s)
            _run_until(env, env.any_of([cluster.all_done, deadline]), stop)
    end_s = env.now
    last_t = sampler.last_t_s if sampler.last_t_s is not None else 0.0
    if last_t < end_s or sampler.last_t_s is None:
        partial = end_s - last_t
        if partial > 0:
            saved, sampler.interval_s = sampler.interval_s, partial
            sampler.sample()
            sampler.interval_s = saved
    for req in cluster.live_requests():
        recorder.record(req, ended=False)
    cols = recorder.columns()
    invariants = check_invariants(cols, cluster, cluster.recorder.arrived)
    ts_columns, pool_columns = sampler.columns()
    return RunOutcome(cols, ts_columns, pool_columns, end_s, sampler.peak_instances, invariants,
                      fleet_outcome(run, cluster, cols, end_s), interrupted_by=stop.signum)


def fleet_outcome(run: RunConfig, cluster: Cluster, cols: Columns, end_s: float) -> FleetOutcome:
    """The fleet's facts at the end of the run (what the programs read instead of the cluster)."""
    gran = run.scenario.billing_granularity_s
    pools = {name: p.outcome(end_s, gran) for name, p in cluster.pools.items()}
    itl = ItlSketch()  # every instance's sketch merged, in pool and index order
    for pool in cluster.pools.values():
        for inst in pool.instances:
            itl.merge(inst.itl)
    oc = cluster.overload.cfg
    routes = {c: list(cluster.placement.candidates(c)) for c in sorted(cols["request_class"].distinct())}
    return FleetOutcome(
        pools=pools, scale_events=[tuple(e) for e in cluster.scale_log],
        autoscalers={n: type(s).__name__ for n, s in cluster.scalers.items()}, routes=routes,
        overload=OverloadFacts(bool(oc.enabled), oc.fallback_pool, float(oc.fallback_tpot_p99_s),
                               list(cluster.overload.transitions)),
        itl_s=itl.summary(), revenue=revenue_usd(cols, run.scenario.price_sheet))


def _drain_after_last_send(env: simpy.Environment, cluster: Cluster, after_s: float, deadline: simpy.Event):
    """Closed loop: trigger `deadline` once `after_s` have passed since the last send (each send moves it)."""
    while True:
        end_s = cluster.last_send_s + after_s
        if env.now >= end_s:
            deadline.succeed()
            return
        yield env.timeout(end_s - env.now)


def _run_until(env: simpy.Environment, until: simpy.Event, stop: StopFlag) -> None:
    """`env.run(until=until)`, also stopping between two events once `stop` is set (SIGINT/SIGTERM): the state
    is then that of a clean event boundary, collected like a finished run's (requests in flight `unfinished`)."""
    step = env.step
    try:
        while not until.processed and not stop.signum:
            step()
    except simpy.core.EmptySchedule:
        pass

