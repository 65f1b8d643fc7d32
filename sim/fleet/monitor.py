"""Windowed measurements that autoscalers and the overload ladder act on (what an operator's metrics show)."""
from __future__ import annotations

from collections import deque

import numpy as np


class Window:
    """Values with timestamps, kept for the last `window_s` seconds."""

    def __init__(self, window_s: float) -> None:
        if not window_s > 0:
            raise ValueError('"window_s" must be > 0')
        self.window_s = window_s
        self._items: deque[tuple[float, float]] = deque()

    def add(self, t_s: float, value: float) -> None:
        items = self._items
        items.append((t_s, value))
        if items[0][0] < t_s - self.window_s:  # keep memory bounded when nobody reads the window
            self._trim(t_s)

    def _trim(self, now_s: float) -> None:
        cut = now_s - self.window_s
        items = self._items
        while items and items[0][0] < cut:
            items.popleft()

    def count(self, now_s: float) -> int:
        self._trim(now_s)
        return len(self._items)

    def percentile(self, now_s: float, q: float) -> float:
        """The q-th percentile of the values in the window; NaN when it is empty."""
        self._trim(now_s)
        if not self._items:
            return float("nan")
        return float(np.percentile(np.fromiter((v for _, v in self._items), float, len(self._items)), q))


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
