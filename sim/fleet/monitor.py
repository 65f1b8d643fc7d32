"""Windowed measurements that autoscalers and the overload ladder act on (what an operator's metrics show)."""
from __future__ import annotations

from collections import deque
from typing import ClassVar, Final

import numpy as np

_TRIM_EVERY: Final = 1024  # (a native constant where compiled; `Window.TRIM_EVERY` reads the same)


class Window:
    """Values with timestamps, kept for the last `window_s` seconds. A value may be added ahead of its time (a
    first token at the end of an iteration already planned): readers at `now_s` see only values stamped up to
    `now_s`. Adding is an append (it runs for every request); old values are dropped when the window is read, and
    every TRIM_EVERY adds so that memory stays bounded when nobody reads it."""

    TRIM_EVERY: ClassVar[int] = _TRIM_EVERY  # (a class variable: compiled classes keep it readable from the class)

    def __init__(self, window_s: float) -> None:
        if not window_s > 0:
            raise ValueError('"window_s" must be > 0')
        self.window_s = window_s
        self._items: deque[tuple[float, float]] = deque()
        self._in_order = True  # no value was added ahead of its time: everything trimming leaves is in the window
        self._adds = 0

    def add(self, t_s: float, value: float, now_s: float | None = None) -> None:
        """Add `value` stamped t_s, at simulated time `now_s` (default t_s; earlier for a value added ahead)."""
        self._items.append((t_s, value))
        if now_s is not None and t_s > now_s:
            self._in_order = False
        self._adds += 1
        if not self._adds % _TRIM_EVERY:
            self._trim(t_s if now_s is None else now_s)

    def _trim(self, now_s: float) -> None:
        """Drop values older than the window. Stamps are nearly in order (ahead by at most one iteration): this
        drops from the oldest end, and readers filter the rest."""
        cut = now_s - self.window_s
        items = self._items
        while items and items[0][0] < cut:
            items.popleft()

    def _values(self, now_s: float) -> list[float]:
        self._trim(now_s)
        if self._in_order:
            return [v for _, v in self._items]
        cut = now_s - self.window_s
        return [v for t, v in self._items if cut <= t <= now_s]

    def count(self, now_s: float) -> int:
        return len(self._values(now_s))

    def percentile(self, now_s: float, q: float) -> float:
        """The q-th percentile of the values in the window; NaN when it is empty."""
        values = self._values(now_s)
        if not values:
            return float("nan")
        return float(np.percentile(np.asarray(values, dtype=float), q))


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
