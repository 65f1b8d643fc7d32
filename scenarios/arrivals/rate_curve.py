"""Rate curves λ(t) in requests per second, from parameters or from data, for non-homogeneous arrivals.

Each curve is a vectorised function of time in seconds. Kinds (the `curve:` block of a `daily` traffic):

- `constant`: `rate_per_s`.
- `piecewise_linear`: `rates_per_s` = n values evenly spaced over `period_s` (default 86 400 s, so 24 values are
  the rates at 00:00, 01:00, …, 23:00), linearly interpolated and periodic (23:00 → 24:00 joins back to 00:00).
- `harmonics`: `rate_per_s` · (1 + Σ aᵢ cos(2π (t − peak_sᵢ) / period_sᵢ)), clipped at 0; `terms` is a
  list of `{amplitude, period_s, peak_s}` (amplitude relative to the mean; the mean over a common period is `rate_per_s`
  when no clipping happens).
- `servegen`: `path`, optional `clients` / `top_clients`: the per-window aggregate rate of a ServeGen pool folder
  (sum over the chosen clients), piecewise constant per 600-s window and periodic over the data's span (1 or 14
  days). Use it for the shape and set the level with the traffic's `mean_rate_per_s` or `peak_rate_per_s`.
"""
from __future__ import annotations

import numpy as np

from scenarios.arrivals.nhpp import RateFn
from scenarios.config_reader import ConfigReader, kind_of


def constant_rate(rate_per_s: float) -> RateFn:
    return lambda t: np.full(np.shape(t), float(rate_per_s))


def piecewise_linear_rate(rates_per_s, period_s: float = 86_400.0) -> RateFn:
    """Periodic linear interpolation of `rates_per_s[i]` placed at `i · period_s / n`."""
    rates = np.asarray(rates_per_s, dtype=np.float64)
    nodes = np.arange(rates.shape[0] + 1) * (period_s / rates.shape[0])
    values = np.concatenate([rates, rates[:1]])
    return lambda t: np.interp(np.mod(t, period_s), nodes, values)


def harmonic_rate(rate_per_s: float, terms) -> RateFn:
    """`terms`: iterable of (amplitude, period_s, peak_s)."""
    terms = [tuple(map(float, term)) for term in terms]

    def rate(t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=np.float64)
        shape = 1.0 + sum(a * np.cos(2.0 * np.pi * (t - peak) / period) for a, period, peak in terms)
        return rate_per_s * np.maximum(shape, 0.0)
    return rate


def window_rate(window_start_s, rates_per_s, window_s: float) -> RateFn:
    """Piecewise-constant rate per window (window i covers `[start_i, start_i + window_s)`), periodic over the
    span `n · window_s`; windows must be consecutive from `window_start_s[0]`."""
    rates = np.asarray(rates_per_s, dtype=np.float64)
    first, span = float(window_start_s[0]), rates.shape[0] * window_s

    def rate(t: np.ndarray) -> np.ndarray:
        i = (np.mod(np.asarray(t, dtype=np.float64) - first, span) // window_s).astype(np.int64)
        return rates[np.minimum(i, rates.shape[0] - 1)]
    return rate


def _constant(r: ConfigReader) -> RateFn:
    return constant_rate(r.number("rate_per_s", minimum=0.0))


def _piecewise(r: ConfigReader) -> RateFn:
    return piecewise_linear_rate(r.number_list("rates_per_s", minimum=0.0),
                                 r.number("period_s", 86_400.0, positive=True))


def _harmonics(r: ConfigReader) -> RateFn:
    level = r.number("rate_per_s", positive=True)
    terms = []
    for term in r.mapping_list("terms"):
        terms.append((term.number("amplitude", minimum=0.0), term.number("period_s", 86_400.0, positive=True),
                      term.number("peak_s", 0.0)))
        term.finish()
    return harmonic_rate(level, terms)


def _servegen(r: ConfigReader) -> RateFn:
    from scenarios.loaders.servegen import load_servegen_pool  # late: loaders import arrivals for sampling
    from scenarios.paths import resolve_path

    path = resolve_path(r.string("path"), file=r.file, field=r.path("path"))
    pool = load_servegen_pool(path, clients=r.raw("clients", None),
                              top_clients=r.integer("top_clients", None, minimum=1), with_lengths=False,
                              file=r.file, field=r.path("clients"))
    starts, rates = pool.aggregate_rate()
    return window_rate(starts, rates, pool.windows.window_s)


CURVES = {"constant": _constant, "piecewise_linear": _piecewise, "harmonics": _harmonics, "servegen": _servegen}


def from_config(r: ConfigReader) -> RateFn:
    """Parse a `curve:` block (see the module docstring for kinds and keys)."""
    curve = CURVES[kind_of(r, CURVES)](r)
    r.finish()
    return curve
