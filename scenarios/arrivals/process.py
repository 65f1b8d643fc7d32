"""`ArrivalProcess`: a parsed arrival-process config, ready to sample arrival times from a random stream."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ArrivalProcess:
    """`sample(rng)` returns sorted float64 arrival times in seconds, all in `[0, duration_s)`.

    `duration_s` is `math.inf` for a count-bounded process (one that stops after `num_requests` arrivals).

    `mean_rate_per_s` is the process's expected rate over the window (requests per second), used for sizing and
    for the provenance string `describe`.
    """

    duration_s: float
    sample: Callable[[np.random.Generator], np.ndarray]
    mean_rate_per_s: float
    describe: str


def renewal_times(rng: np.random.Generator, draw_iats: Callable[[int], np.ndarray], first_s: float,
                  duration_s: float, mean_iat_s: float, cv: float) -> np.ndarray:
    """Arrival times `first_s, first_s + iat_1, ...` below `duration_s` of a renewal process.

    Draws inter-arrival times in vectorised chunks sized to the expected count plus six standard deviations
    (the count of a renewal process has variance ≈ n·cv²), so one chunk almost always suffices.
    """
    if first_s >= duration_s:
        return np.empty(0)
    pieces, last = [np.array([first_s])], first_s
    while last < duration_s:
        n = (duration_s - last) / mean_iat_s
        chunk = int(n + 6.0 * max(cv, 1.0) * np.sqrt(n) + 16)
        times = last + np.cumsum(draw_iats(chunk))
        pieces.append(times)
        last = float(times[-1])
    t = np.concatenate(pieces)
    return t[: np.searchsorted(t, duration_s, side="left")]
