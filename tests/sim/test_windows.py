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
    iteration) is told when the run is planned, with its time, and the window holds it back until then: TTFT
    values enter the window in time order, each at the moment of its first token."""
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
    while not cluster.all_done.triggered:
        env.step()
        window.count(env.now)  # a read (an autoscaler's tick) sees the values whose time has come
        stamps = list(window._stamps)
        assert all(t <= env.now for t in stamps)  # nothing is seen ahead of its time
        assert stamps == sorted(stamps)
    rows = cluster.recorder.columns()
    assert list(window._stamps) == sorted(rows["first_token_s"].tolist())


def test_a_value_added_ahead_is_seen_from_its_time_on_in_time_order():
    w = Window(10.0)
    w.add_at(5.0, 50.0, now_s=1.0)
    w.add_at(3.0, 30.0, now_s=1.0)
    w.add(2.0, 20.0)
    assert w.count(2.5) == 1 and list(w._stamps) == [2.0]  # 3 s and 5 s have not come yet
    w.add(4.0, 40.0)  # an add at 4 s lets the value of 3 s in first
    assert list(w._stamps) == [2.0, 3.0, 4.0]
    assert w.count(5.0) == 4 and w.percentile(5.0, 100) == 50.0
    w.add_at(6.0, 60.0, now_s=6.0)  # (its time is now: added at once)
    assert list(w._stamps) == [2.0, 3.0, 4.0, 5.0, 6.0]


def test_memory_stays_bounded_when_nobody_reads():
    w = Window(1.0)
    for t in np.arange(0.0, 10_000.0, 0.01):
        w.add(float(t), 0.0)
    assert len(w) <= 100 + Window.TRIM_EVERY
    assert len(w._stamps) <= 2 * (100 + 2 * Window.TRIM_EVERY)  # the dropped part is released too
