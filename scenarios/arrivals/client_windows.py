"""ServeGen-style arrivals: many clients, each with its own rate and burstiness per 10-minute window, superposed.

ServeGen (Xiang et al., NSDI'26) describes a production pool as, per client and per 600-s window, a mean rate and
an inter-arrival-time (IAT) law — Gamma or Weibull with a fitted shape. Within a window the client is a renewal
process whose IAT law keeps the fitted shape (hence the window's CV) and whose scale is rescaled so the mean IAT
is 1 / rate, as ServeGen's `construct.py` does. The pool's traffic is the superposition of all clients.

Gamma(shape k): CV = 1/√k, mean = k·θ.
Weibull(shape c): CV = √(Γ(1+2/c)/Γ(1+1/c)² − 1), mean = λ·Γ(1+1/c).
Each window restarts its renewal process at a uniform point of a first IAT (an approximation of a stationary start;
exact stationarity would need the length-biased law, which has no closed form for Weibull).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from scenarios.arrivals.process import ArrivalProcess, renewal_times
from scenarios.config_reader import ConfigReader, is_list

NONE, GAMMA, WEIBULL = 0, 1, 2  # IAT law codes in ClientWindows.pattern
PATTERNS = {"gamma": GAMMA, "weibull": WEIBULL}


@dataclass(frozen=True)
class ClientWindows:
    """Per-client per-window statistics on one window grid; arrays are [C clients, W windows].

    `pattern` is NONE (inactive window, rate 0), GAMMA or WEIBULL; `shape` is the IAT law's shape parameter.
    """

    client_ids: tuple[str, ...]
    window_start_s: np.ndarray  # [W] float64, consecutive windows of window_s
    window_s: float
    rate_per_s: np.ndarray  # [C, W] float64, requests per second
    pattern: np.ndarray  # [C, W] int8
    shape: np.ndarray  # [C, W] float64

    @property
    def span_s(self) -> float:
        return float(self.window_start_s[-1] - self.window_start_s[0] + self.window_s)

    def aggregate_rate(self) -> tuple[np.ndarray, np.ndarray]:
        """`(window_start_s [W], total rate [W])`, the pool's rate per window summed over clients."""
        return self.window_start_s, self.rate_per_s.sum(axis=0)


def gamma_cv(shape):
    return 1.0 / np.sqrt(shape)


def weibull_cv(c: float) -> float:
    g1, g2 = math.gamma(1.0 + 1.0 / c), math.gamma(1.0 + 2.0 / c)
    return math.sqrt(max(g2 / (g1 * g1) - 1.0, 0.0))


def weibull_shape_for_cv(cv: float) -> float:
    """The Weibull shape c whose CV is `cv` (bisection on log c; CV decreases in c; valid for 0.05 ≤ cv ≤ 40)."""
    lo, hi = math.log(0.08), math.log(60.0)
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if weibull_cv(math.exp(mid)) > cv else (lo, mid)
    return math.exp(0.5 * (lo + hi))


def _iat_scale(pattern: np.ndarray, shape: np.ndarray, rate: np.ndarray) -> np.ndarray:
    """Scale parameter giving mean IAT 1/rate for each (pattern, shape)."""
    gamma_fn = np.vectorize(math.gamma, otypes=[np.float64])
    mean_unit = np.where(pattern == GAMMA, shape, gamma_fn(1.0 + 1.0 / np.maximum(shape, 1e-3)))
    return 1.0 / (rate * mean_unit)


def _draw(rng: np.random.Generator, pattern: np.ndarray, shape: np.ndarray, scale: np.ndarray) -> np.ndarray:
    out = np.empty(pattern.shape[0])
    g, w = pattern == GAMMA, pattern == WEIBULL
    out[g] = rng.gamma(shape[g], scale[g])
    out[w] = rng.weibull(shape[w]) * scale[w]
    return out


def client_window_arrivals(rng: np.random.Generator, cw: ClientWindows, start_s: float,
                           duration_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Arrivals in `[start_s, start_s + duration_s)` of the data's time axis, as `(arrival_s, client)`.

    `arrival_s [N]` is relative to `start_s` and sorted; `client [N]` indexes `cw.client_ids`. Vectorised over all
    active (client, window) pairs: each gets a buffer of IATs sized to its expected count plus six standard
    deviations; the rare window whose buffer falls short of the window's end is completed on its own.
    """
    end_s = start_s + duration_s
    overlaps = (cw.window_start_s + cw.window_s > start_s) & (cw.window_start_s < end_s)
    active = (cw.rate_per_s > 0) & (cw.pattern != NONE) & overlaps[None, :]
    c_idx, w_idx = np.nonzero(active)
    if c_idx.size == 0:
        return np.empty(0), np.empty(0, dtype=np.int64)
    rate, pattern, shape = cw.rate_per_s[active], cw.pattern[active], cw.shape[active]
    scale = _iat_scale(pattern, shape, rate)
    cv = np.where(pattern == GAMMA, gamma_cv(shape), np.vectorize(weibull_cv, otypes=[float])(shape))
    n = rate * cw.window_s
    m = (n + 6.0 * np.maximum(cv, 1.0) * np.sqrt(n) + 16).astype(np.int64)
    owner = np.repeat(np.arange(m.shape[0]), m)
    iat = _draw(rng, pattern[owner], shape[owner], scale[owner])
    first = np.cumsum(m) - m
    iat[first] *= rng.random(m.shape[0])  # uniform point inside the first IAT
    cs = np.cumsum(iat)
    local = cs - np.repeat(cs[first] - iat[first], m)
    ends = local[first + m - 1]
    times, owners = [local], [owner]
    for e in np.nonzero(ends < cw.window_s)[0]:  # buffers that fell short: extend them (rare)
        extra = renewal_times(rng, lambda k, e=e: _draw(rng, np.full(k, pattern[e]), np.full(k, shape[e]),
                                                        np.full(k, scale[e])),
                              float(ends[e]), cw.window_s, 1.0 / rate[e], float(cv[e]))[1:]
        times.append(extra)
        owners.append(np.full(extra.shape[0], e))
    local, owner = np.concatenate(times), np.concatenate(owners)
    t = cw.window_start_s[w_idx[owner]] + local
    keep = (local < cw.window_s) & (t >= start_s) & (t < end_s)
    t, client = t[keep] - start_s, c_idx[owner[keep]]
    order = np.argsort(t, kind="stable")
    return t[order], client[order]


def from_config(r: ConfigReader) -> ArrivalProcess:
    """`client_windows` kind, ServeGen-style traffic from parameters.

    Keys: `window_s` (default 600), `clients`: list of `{rate_per_s: [per-window rates], cv: number or list,
    pattern: gamma | weibull}` (all clients the same number of windows), optional `duration_s` (default: all
    windows).
    """
    window_s = r.number("window_s", 600.0, positive=True)
    rates, patterns, shapes = [], [], []
    for c in r.mapping_list("clients"):
        rate = c.number_list("rate_per_s", minimum=0.0)
        if is_list(c.raw("cv")):
            cv = c.number_list("cv", positive=True)
        else:
            cv = [c.number("cv", positive=True)] * len(rate)
        if len(cv) != len(rate):
            raise c.error("cv", f"has {len(cv)} values for {len(rate)} windows", "give one cv or one per window")
        kind = c.string("pattern", "gamma", choices=list(PATTERNS))
        c.finish()
        code = PATTERNS[kind]
        rates.append(rate)
        patterns.append([code if x > 0 else NONE for x in rate])
        shapes.append([1.0 / (v * v) if code == GAMMA else weibull_shape_for_cv(v) for v in cv])
    if len({len(x) for x in rates}) != 1:
        raise r.error("clients", "clients have different numbers of windows", "give every client the same count")
    n_windows = len(rates[0])
    cw = ClientWindows(tuple(str(i) for i in range(len(rates))), np.arange(n_windows) * window_s, window_s,
                       np.array(rates), np.array(patterns, dtype=np.int8), np.array(shapes))
    duration = r.number("duration_s", n_windows * window_s, positive=True)
    if duration > cw.span_s:
        raise r.error("duration_s", f"{duration:g} s exceeds the {cw.span_s:g} s the windows cover",
                      "shorten duration_s or add windows")
    covered = cw.rate_per_s.sum(axis=0) * np.clip((duration - cw.window_start_s) / window_s, 0.0, 1.0)
    mean = float(covered.sum() * window_s / duration)
    return ArrivalProcess(duration, lambda rng: client_window_arrivals(rng, cw, 0.0, duration)[0], mean,
                          f"client_windows(clients={len(rates)}, window_s={window_s:g})")
