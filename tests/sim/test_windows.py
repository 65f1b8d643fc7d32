"""The windows autoscalers, placement and the overload ladder read (sim/core/fleet/monitor.py)."""
from __future__ import annotations

import math

import numpy as np

from sim.core.fleet.monitor import Window


def test_window_keeps_the_last_window_s_seconds():
    w = Window(10.0)
    for t in range(30):
        w.add(float(t), float(t))
    assert w.count(29.0) == 11  # stamps 19..29
    assert w.percentile(29.0, 50) == 24.0
    assert w.count(100.0) == 0 and math.isnan(w.percentile(100.0, 99))


def test_first_tokens_of_a_planned_run_reach_the_monitor_when_they_happen():
    """An idle instance prices a request's whole life as one run; its first token (end of the run's first
    iteration) is told by an event at that time: every TTFT value enters the window at the simulated time of its
    first token (env.now == its stamp), in time order, once per request."""
    import simpy

    from sim.compose import compose_config
    from sim.config import load_run_config
    from sim.core.cluster import Cluster
    from sim.core.metrics import RequestRecorder
    from scenarios.workload import Workload

    run = load_run_config(compose_config(["scenario=smoke", "metrics.progress=false"]))
    arrival = np.array([0.0, 5.0, 10.0])
    wl = Workload.from_columns(arrival, np.array([500, 500, 500]), np.array([50, 50, 50]))
    env = simpy.Environment()
    cluster = Cluster(env, run, wl, RequestRecorder(wl, list(run.pools)))
    window = next(iter(cluster.monitors.values())).ttft
    told: list[tuple[float, float]] = []  # (stamp, the clock when it entered the window), observed after each event
    seen = 0
    while not cluster.all_done.triggered:
        env.step()
        now_stamps = list(window._stamps)
        told += [(t_s, float(env.now)) for t_s in now_stamps[seen:]]
        seen = len(now_stamps)
    assert len(told) == 3 and all(t_s == now for t_s, now in told)
    stamps = list(window._stamps)
    assert stamps == sorted(stamps) and len(stamps) == 3
    rows = cluster.recorder.columns()
    assert stamps == sorted(rows["first_token_s"].tolist())
    assert sum(i.iterations for p in cluster.pools.values() for i in p.instances) > 3 * 2  # (runs, not steps)


def test_memory_stays_bounded_when_nobody_reads():
    w = Window(1.0)
    for t in np.arange(0.0, 10_000.0, 0.01):
        w.add(float(t), 0.0)
    assert len(w) <= 100 + Window.TRIM_EVERY
    assert len(w._stamps) <= 2 * (100 + 2 * Window.TRIM_EVERY)  # the dropped part is released too
