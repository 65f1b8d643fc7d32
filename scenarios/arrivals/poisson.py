"""Homogeneous Poisson arrivals: independent requests at a constant rate (exponential inter-arrival times, CV 1)."""
from __future__ import annotations

import math

import numpy as np

from scenarios.arrivals.process import ArrivalProcess
from scenarios.config_reader import ConfigReader


def poisson_arrivals(rng: np.random.Generator, rate_per_s: float, duration_s: float) -> np.ndarray:
    """Sorted arrival times in `[0, duration_s)` of a Poisson process of `rate_per_s` requests per second.

    Exact and vectorised: the count is Poisson(rate · duration) and, given the count, the times are i.i.d.
    uniform over the window.
    """
    n = rng.poisson(rate_per_s * duration_s)
    return np.sort(rng.random(n) * duration_s)


def poisson_count_arrivals(rng: np.random.Generator, rate_per_s: float, count: int) -> np.ndarray:
    """Exactly `count` arrival times of a Poisson process of `rate_per_s` (cumulative exponential gaps from 0)."""
    return np.cumsum(rng.exponential(1.0 / rate_per_s, count))


def from_config(r: ConfigReader) -> ArrivalProcess:
    """Keys: `rate_per_s` (> 0), `duration_s` (> 0; may be omitted when the traffic's `num_requests` is given:
    the process then runs until exactly that many arrivals and its window is open-ended)."""
    rate, duration = r.number("rate_per_s", positive=True), r.number("duration_s", None, positive=True)
    describe = f"poisson(rate_per_s={rate:g})"
    if duration is None:
        count = r.request_count("num_requests", None)
        if count is None:
            raise r.error("duration_s", "is missing (and so is num_requests)", "add `duration_s:` or `num_requests:`")
        return ArrivalProcess(math.inf, lambda rng: poisson_count_arrivals(rng, rate, count), rate, describe)
    return ArrivalProcess(duration, lambda rng: poisson_arrivals(rng, rate, duration), rate, describe)
