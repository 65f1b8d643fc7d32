"""Timers and the sweep's ordering: medians of real launches, caches defeated by rotation, coarse-to-fine order."""
from __future__ import annotations

import time

import pytest

from calibrate.impls import Impl
from calibrate.shapes import OpShape
from calibrate.sweep import Task, coarse_to_fine, order_tasks
from calibrate.timing import CpuTimer, last_level_cache_bytes
from calibrate.torch_ops import Bench


def test_cpu_timer_takes_the_median_of_real_launches():
    calls = []
    bench = Bench(lambda: (len(calls),), lambda x: (calls.append(x), time.sleep(0.004)), 1.0)
    timing = CpuTimer(warmup_s=0.0, target_s=0.03, min_repeats=5, max_repeats=8, cache_bytes=1 << 20).time(bench)
    assert timing.median_s == pytest.approx(0.004, rel=0.5)
    assert timing.p20_s <= timing.median_s <= timing.p80_s
    assert 5 <= timing.repeats <= 8 and len(calls) == timing.repeats + 2  # two warm-up launches


def test_cpu_timer_rotates_enough_fresh_inputs_to_miss_the_cache():
    timer = CpuTimer(cache_bytes=32 << 20, max_copies=8, pool_limit_bytes=1e9)
    assert timer.copies_for(1 << 20) == 8             # 1 MB operands: as many as allowed
    assert timer.copies_for(20 << 20) == 4            # 20 MB: 4 copies exceed 2 x 32 MB
    assert timer.copies_for(400 << 20) == 1           # larger than the cache already
    assert timer.copies_for(600e6) == 1               # pool limit
    made = []
    bench = Bench(lambda: made.append(1) or (len(made),), lambda x: None, 20 << 20)
    timer.time(bench)
    assert len(made) == 4


def test_last_level_cache_is_read_from_sysfs():
    assert last_level_cache_bytes() >= 1 << 20


def test_coarse_to_fine_visits_ends_then_midpoints():
    assert coarse_to_fine(9) == [0, 8, 4, 2, 6, 1, 3, 5, 7]
    for n in range(0, 40):
        assert sorted(coarse_to_fine(n)) == list(range(n))


def test_tasks_take_turns_between_implementations():
    def task(op, i, impl):
        return Task(OpShape(op, "bf16", (("m", i),), float(i), 0.0), Impl(impl, True, lambda s, d: None))
    tasks = [task("gemm", i, "a") for i in range(6)] + [task("elementwise", i, "b") for i in range(2)]
    order = order_tasks(tasks)
    assert [t.impl.name for t in order[:4]] == ["b", "a", "b", "a"]
    assert [t.shape.dim("m") for t in order if t.impl.name == "a"][:3] == [0, 5, 2]
