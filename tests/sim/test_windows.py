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


def test_a_value_added_ahead_of_its_time_shows_from_its_stamp_on():
    """A first token at the end of an iteration an instance has just planned is added when the run starts
    (stamped with that end): readers before the stamp must not see it, readers after must."""
    w = Window(10.0)
    w.add(5.0, 1.0)
    w.add(7.5, 2.0, now_s=6.0)  # added at 6 s, happens at 7.5 s
    w.add(6.5, 3.0)             # an ordinary value after it, stamped earlier
    assert w.count(6.9) == 2 and w.percentile(6.9, 100) == 3.0
    assert w.count(7.5) == 3 and w.percentile(7.5, 100) == 3.0
    # 16.0: the window is [6, 16]; the value stamped 5 s is out although it sits behind none
    assert w.count(16.0) == 2
    # 17.0: [7, 17]: the value stamped 6.5 s is out too, although the one ahead of it was added before it
    assert w.count(17.0) == 1 and w.percentile(17.0, 50) == 2.0


def test_memory_stays_bounded_when_nobody_reads():
    w = Window(1.0)
    for t in np.arange(0.0, 10_000.0, 0.01):
        w.add(float(t), 0.0)
    assert len(w) <= 100 + Window.TRIM_EVERY
    assert len(w._stamps) <= 2 * (100 + 2 * Window.TRIM_EVERY)  # the dropped part is released too
