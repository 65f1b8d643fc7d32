"""Non-homogeneous Poisson arrivals from a rate curve, by time rescaling.

If Λ(t) = ∫₀ᵗ λ(s) ds, the points Λ⁻¹(E₁), Λ⁻¹(E₁+E₂), … of a unit-rate Poisson process E form a Poisson
process of rate λ(t). Equivalently, and vectorised: draw N ~ Poisson(Λ(T)), draw N uniforms on [0, Λ(T)) and map each
back through Λ⁻¹. Λ is integrated on a grid of step `resolution_s` with the trapezoid rule and treated as
piecewise linear between grid points (so λ is piecewise constant per cell, at the cell's trapezoid average).
The error is O(resolution²) per cell for smooth curves and zero for piecewise-constant curves whose breakpoints
lie on the grid; the default 1 s grid resolves minute-scale ramps such as flash sales exactly enough.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

RateFn = Callable[[np.ndarray], np.ndarray]  # t [N] seconds -> rate [N] requests per second, >= 0


def cumulative_rate(rate_fn: RateFn, duration_s: float, resolution_s: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Grid `t [M+1]` over `[0, duration_s]` and `Λ(t) [M+1]`, the expected number of arrivals before each t."""
    m = max(1, int(np.ceil(duration_s / resolution_s)))
    t = np.linspace(0.0, duration_s, m + 1)
    rate = np.asarray(rate_fn(t), dtype=np.float64)
    if np.any(rate < 0) or not np.all(np.isfinite(rate)):
        raise ValueError("rate curve must be finite and >= 0")
    cum = np.concatenate([[0.0], np.cumsum(0.5 * (rate[1:] + rate[:-1]) * np.diff(t))])
    return t, cum


def nhpp_arrivals(rng: np.random.Generator, rate_fn: RateFn, duration_s: float,
                  resolution_s: float = 1.0) -> np.ndarray:
    """Sorted arrival times in `[0, duration_s)` of a Poisson process with rate `rate_fn(t)` requests per second."""
    t, cum = cumulative_rate(rate_fn, duration_s, resolution_s)
    n = rng.poisson(cum[-1])
    u = np.sort(rng.random(n) * cum[-1])
    # u lies in cell i where cum[i] <= u < cum[i+1] (cells of zero mass are never chosen with side="right").
    cell = np.clip(np.searchsorted(cum, u, side="right") - 1, 0, len(t) - 2)
    mass = cum[cell + 1] - cum[cell]
    frac = np.divide(u - cum[cell], mass, out=np.zeros_like(u), where=mass > 0)
    times = t[cell] + frac * (t[cell + 1] - t[cell])
    return np.minimum(times, np.nextafter(duration_s, 0.0))


def thin(rng: np.random.Generator, n: int, keep_probability: float | np.ndarray) -> np.ndarray:
    """Boolean mask keeping each of `n` items independently with `keep_probability` (thinning a point process)."""
    return rng.random(n) < keep_probability
