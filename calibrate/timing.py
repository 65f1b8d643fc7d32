"""Timers: the median of repeated launches, with warm-up, and caches that do not hold the data.

`CpuTimer`: synchronous torch ops timed one launch at a time with `time.perf_counter_ns`, after a warm-up; the
operands rotate over several freshly allocated copies whose total exceeds twice the last-level cache, so each
launch reads most of its data from memory as it would in a model (a layer's weights are not in cache when the
layer runs). When the spread of the launches is wide (a shared machine), it samples longer. On a machine other
processes load, multi-threaded torch ops stall at their thread barriers whenever one thread is descheduled:
calibrate such a machine with `threads=1`, or when it is quiet.
`CudaTimer`: `triton.testing.do_bench`, which warms up, flushes the L2 cache before every launch (it zeroes a
256 MB buffer) and times with CUDA events; we take its median and 20th/80th percentiles.
"""
from __future__ import annotations

import math
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from calibrate.control import Control
from calibrate.torch_ops import Bench


@dataclass(frozen=True)
class Timing:
    """Seconds per launch: median and the 20th/80th percentiles over `repeats` launches."""

    median_s: float
    p20_s: float
    p80_s: float
    repeats: int


def last_level_cache_bytes(default: int = 32 << 20) -> int:
    """Size of the largest CPU cache listed in sysfs (the L3 on x86 servers), else `default`."""
    sizes = []
    for f in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = f.read_text().strip().upper()
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes, default=default)


def _quantile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolated quantile of an already sorted list (numpy's default method)."""
    pos = q * (len(sorted_values) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


@dataclass
class CpuTimer:
    """Median of `min_repeats`..`max_repeats` launches, as many as fit in `target_s` after `warmup_s` of warm-up."""

    warmup_s: float = 0.02
    target_s: float = 0.2
    min_repeats: int = 5
    max_repeats: int = 50
    max_copies: int = 8
    pool_limit_bytes: float = 1.5e9
    cache_bytes: int = 0
    spread_limit: float = 1.5  # p80 / p20 above which more launches are timed

    def __post_init__(self) -> None:
        if not self.cache_bytes:
            self.cache_bytes = last_level_cache_bytes()

    def copies_for(self, operand_bytes: float) -> int:
        """Operand copies to rotate: enough to exceed twice the cache, within `max_copies` and the pool limit."""
        want = math.ceil(2 * self.cache_bytes / max(operand_bytes, 1.0))
        fit = int(self.pool_limit_bytes // max(operand_bytes, 1.0))
        return max(1, min(want, self.max_copies, fit))

    def time(self, bench: Bench, control: Control | None = None) -> Timing:
        """Timing of `bench`; `control.check()` runs before every allocation and launch (it raises on a signal or
        at the deadline, so a stop waits for one launch at most)."""
        check = control.check if control is not None else (lambda: None)
        pool = []
        for _ in range(self.copies_for(bench.operand_bytes)):
            check()
            pool.append(bench.make_inputs())
        clock = time.perf_counter_ns
        warm_start, calls = clock(), 0
        while True:
            check()
            bench.run(pool[calls % len(pool)])
            calls += 1
            elapsed_s = (clock() - warm_start) * 1e-9
            if elapsed_s >= self.warmup_s and calls >= 2:
                break
        estimate_s = max(elapsed_s / calls, 1e-9)
        repeats = int(min(self.max_repeats, max(self.min_repeats, self.target_s / estimate_s)))
        samples: list[float] = []
        start = clock()
        while True:
            inputs = pool[(calls + len(samples)) % len(pool)]
            check()
            t0 = clock()
            bench.run(inputs)
            samples.append((clock() - t0) * 1e-9)
            if len(samples) < repeats:
                continue
            # NOTE: a busy machine stalls some launches (another process holds a core); while the spread is wide,
            # sample on (up to max_repeats and 3x the target time) so that the median rests on more launches.
            ordered = sorted(samples)
            wide = _quantile(ordered, 0.8) > self.spread_limit * _quantile(ordered, 0.2)
            if not wide or len(samples) >= self.max_repeats or (clock() - start) * 1e-9 > 3 * self.target_s:
                break
        samples.sort()
        return Timing(statistics.median(samples), _quantile(samples, 0.2), _quantile(samples, 0.8), len(samples))


@dataclass
class CudaTimer:
    """`triton.testing.do_bench` with short warm-up and repetition windows (ms), L2 flushed before each launch."""

    warmup_ms: float = 5.0
    rep_ms: float = 20.0

    def time(self, bench: Bench, control: Control | None = None) -> Timing:
        import torch
        from triton.testing import do_bench

        if control is not None:  # one do_bench call lasts warmup_ms + rep_ms: checked before it
            control.check()
        inputs = bench.make_inputs()
        torch.cuda.synchronize()
        p50, p20, p80 = do_bench(lambda: bench.run(inputs), warmup=self.warmup_ms, rep=self.rep_ms,
                                 quantiles=[0.5, 0.2, 0.8])
        repeats = max(1, int(self.rep_ms / max(p50, 1e-6)))
        return Timing(p50 * 1e-3, p20 * 1e-3, p80 * 1e-3, repeats)


def set_cpu_threads(threads: int | None) -> int:
    """Set torch's intra-op threads (None: all cores this process may use); returns the count in effect."""
    import torch

    if threads is None:
        threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    torch.set_num_threads(int(threads))
    return torch.get_num_threads()
