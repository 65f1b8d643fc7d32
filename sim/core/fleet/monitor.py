"""Windowed measurements that autoscalers and the overload ladder act on (what an operator's metrics show)."""
from __future__ import annotations

from array import array
from typing import ClassVar, Final

import numpy as np

_TRIM_EVERY: Final = 1024  # values appended between two trims of a window (bounds its memory unread)


class Window:
    """Values with timestamps, kept for the last `window_s` seconds. Values are added when they happen (at the
    simulated time of their stamp), so stamps never decrease and a read sees exactly the values whose time has
    come. Adding is an append to two typed arrays (it runs for every request); old values are dropped when the window is read, and every
    TRIM_EVERY adds so that memory stays bounded when nobody reads it."""

    TRIM_EVERY: ClassVar[int] = _TRIM_EVERY

    def __init__(self, window_s: float) -> None:
        if not window_s > 0:
            raise ValueError('"window_s" must be > 0')
        self.window_s = window_s
        self._stamps = array("d")  # each value's t_s, in the order added
        self._values_s = array("d")
        self._first = 0  # values before this index have left the window
        self._adds = 0

    def __len__(self) -> int:
        """Values held (those trimming has not dropped yet)."""
        return len(self._stamps) - self._first

    def add(self, t_s: float, value: float) -> None:
        """Add `value` at simulated time t_s (now: no earlier than any value added before)."""
        self._stamps.append(t_s)
        self._values_s.append(value)
        self._adds += 1
        if not self._adds % _TRIM_EVERY:
            self._trim(t_s)

    def _trim(self, now_s: float) -> None:
        """Drop values older than the window (from the oldest end: stamps are in order). The arrays shrink once
        most of them is dropped."""
        self._first += _leading_below(self._stamps, self._first, now_s - self.window_s)
        if self._first >= _TRIM_EVERY and 2 * self._first >= len(self._stamps):
            del self._stamps[:self._first]
            del self._values_s[:self._first]
            self._first = 0

    def _values(self, now_s: float) -> np.ndarray:
        self._trim(now_s)
        return np.frombuffer(self._values_s, dtype=np.float64)[self._first:].copy()

    def count(self, now_s: float) -> int:
        return len(self._values(now_s))

    def percentile(self, now_s: float, q: float) -> float:
        """The q-th percentile of the values in the window; NaN when it is empty."""
        values = self._values(now_s)
        if not len(values):
            return float("nan")
        return float(np.percentile(values, q))


def _leading_below(stamps: array, first: int, cut: float) -> int:
    """How many stamps from index `first` on are below `cut` before the first that is not (a helper: the numpy
    view of the array is released when it returns, so the array can be resized again)."""
    inside = np.frombuffer(stamps, dtype=np.float64)[first:] >= cut
    return int(inside.argmax()) if inside.any() else len(inside)


class PoolMonitor:
    """Per-pool windows: TTFT (at first token), TPOT (at finish), arrivals (for the rate)."""

    def __init__(self, window_s: float = 60.0) -> None:
        self.window_s = window_s
        self.ttft = Window(window_s)
        self.tpot = Window(window_s)
        self.arrivals = Window(window_s)

    def arrival_rate_per_s(self, now_s: float) -> float:
        span = min(self.window_s, now_s) if now_s > 0 else self.window_s
        return self.arrivals.count(now_s) / span if span > 0 else 0.0
