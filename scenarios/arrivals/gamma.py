"""Gamma renewal arrivals: i.i.d. Gamma inter-arrival times with a given mean rate and coefficient of variation.

CV < 1 is smoother than Poisson, CV = 1 is Poisson, CV > 1 is bursty (clusters separated by long gaps). With
rate λ and CV c the inter-arrival time is Gamma(shape k = 1/c², scale θ = 1/(λ k)), whose mean is 1/λ and whose
standard deviation is c/λ.
"""
from __future__ import annotations

import math

import numpy as np

from scenarios.arrivals.process import ArrivalProcess, renewal_times
from scenarios.config_reader import ConfigReader


def gamma_arrivals(rng: np.random.Generator, rate_per_s: float, cv: float, duration_s: float) -> np.ndarray:
    """Sorted arrival times in `[0, duration_s)` of a stationary Gamma renewal process.

    Stationary start: the interval straddling t = 0 is length-biased, Gamma(k + 1, θ), and t = 0 falls uniformly
    inside it, so the first arrival is U · Gamma(k + 1, θ). The rate is then exactly λ from the first second on.
    """
    shape = 1.0 / (cv * cv)
    scale = 1.0 / (rate_per_s * shape)
    first = float(rng.random() * rng.gamma(shape + 1.0, scale))
    return renewal_times(rng, lambda n: rng.gamma(shape, scale, n), first, duration_s, 1.0 / rate_per_s, cv)


def gamma_count_arrivals(rng: np.random.Generator, rate_per_s: float, cv: float, count: int) -> np.ndarray:
    """Exactly `count` arrival times of the stationary Gamma renewal process (same start as `gamma_arrivals`)."""
    shape = 1.0 / (cv * cv)
    scale = 1.0 / (rate_per_s * shape)
    first = rng.random() * rng.gamma(shape + 1.0, scale)
    return first + np.concatenate([[0.0], np.cumsum(rng.gamma(shape, scale, count - 1))])


def from_config(r: ConfigReader) -> ArrivalProcess:
    """Keys: `rate_per_s` (> 0), `cv` (> 0; coefficient of variation of inter-arrival times), `duration_s` (may be
    omitted when the traffic's `num_requests` is given: the process then runs until exactly that many arrivals)."""
    rate, cv = r.number("rate_per_s", positive=True), r.number("cv", positive=True)
    duration = r.number("duration_s", None, positive=True)
    describe = f"gamma(rate_per_s={rate:g}, cv={cv:g})"
    if duration is None:
        count = r.request_count("num_requests", None)
        if count is None:
            raise r.error("duration_s", "is missing (and so is num_requests)", "add `duration_s:` or `num_requests:`")
        return ArrivalProcess(math.inf, lambda rng: gamma_count_arrivals(rng, rate, cv, count), rate, describe)
    return ArrivalProcess(duration, lambda rng: gamma_arrivals(rng, rate, cv, duration), rate, describe)
