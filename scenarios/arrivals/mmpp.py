"""Markov-modulated Poisson process (MMPP): bursts as a hidden state that switches the arrival rate.

The process sits in state i for an exponential time of mean `mean_dwell_s[i]`, emitting Poisson arrivals at
`rates_per_s[i]`, then jumps to one of the *other* states chosen uniformly (with two states it alternates). The
embedded jump chain is therefore uniform, so the long-run share of time in state i is
`mean_dwell_s[i] / sum(mean_dwell_s)` and the mean rate is the dwell-weighted mean of the rates.
"""
from __future__ import annotations

import numpy as np

from scenarios.arrivals.process import ArrivalProcess
from scenarios.config_reader import ConfigReader


def mmpp_mean_rate(rates_per_s, mean_dwell_s) -> float:
    """Long-run mean rate in requests per second."""
    rates, dwell = np.asarray(rates_per_s, float), np.asarray(mean_dwell_s, float)
    return float((rates * dwell).sum() / dwell.sum())


def mmpp_arrivals(rng: np.random.Generator, rates_per_s, mean_dwell_s, duration_s: float) -> np.ndarray:
    """Sorted arrival times in `[0, duration_s)`; the initial state is drawn from the time-stationary law."""
    rates, dwell = np.asarray(rates_per_s, float), np.asarray(mean_dwell_s, float)
    k = rates.shape[0]
    state0 = rng.choice(k, p=dwell / dwell.sum())
    # State path, vectorised: draw enough sojourns to cover the window (mean sojourn = mean of dwells under the
    # uniform jump chain), topping up in the rare case they do not.
    states, ends = [], []
    end, current = 0.0, state0
    while end < duration_s:
        m = int(2 * duration_s / dwell.mean()) + 16
        jumps = rng.integers(1, k, size=m - 1) if k > 1 else np.zeros(m - 1, dtype=np.int64)
        path = (current + np.concatenate([[0], np.cumsum(jumps)])) % k
        sojourn = rng.exponential(dwell[path])
        states.append(path)
        ends.append(end + np.cumsum(sojourn))
        end, current = float(ends[-1][-1]), int((path[-1] + (rng.integers(1, k) if k > 1 else 0)) % k)
    path, stop = np.concatenate(states), np.minimum(np.concatenate(ends), duration_s)
    start = np.concatenate([[0.0], stop[:-1]])
    keep = start < duration_s
    path, start, length = path[keep], start[keep], (stop - start)[keep]
    counts = rng.poisson(rates[path] * length)
    t = np.repeat(start, counts) + rng.random(counts.sum()) * np.repeat(length, counts)
    return np.sort(t)


def from_config(r: ConfigReader) -> ArrivalProcess:
    """Keys: `rates_per_s` (list, ≥ 0 each), `mean_dwell_s` (list of the same length, > 0 each), `duration_s`."""
    rates = r.number_list("rates_per_s", min_len=2, minimum=0.0)
    dwell = r.number_list("mean_dwell_s", min_len=2, positive=True)
    duration = r.number("duration_s", positive=True)
    if len(rates) != len(dwell):
        raise r.error("mean_dwell_s", f"has {len(dwell)} entries but rates_per_s has {len(rates)}",
                      "give one mean dwell time per state")
    if max(rates) <= 0:
        raise r.error("rates_per_s", "are all zero", "give at least one state a positive rate")
    mean = mmpp_mean_rate(rates, dwell)
    return ArrivalProcess(duration, lambda rng: mmpp_arrivals(rng, rates, dwell, duration), mean,
                          f"mmpp(rates_per_s={rates}, mean_dwell_s={dwell})")
