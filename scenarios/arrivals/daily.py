"""`daily` and `flash_sale` traffic: Poisson arrivals whose rate follows a curve, with optional flash sales.

`daily` keys: `curve` (a rate curve block, see `rate_curve.py`), `duration_s`, optional `curve_start_s` (the
curve's time at simulated t = 0, e.g. 68 400 to start at 19:00 on a daily curve), optional `mean_rate_per_s` *or*
`peak_rate_per_s` (rescale the curve so its mean or peak over `duration_s` is this, before flash sales),
optional `flash_sales` (list of flash-sale blocks, times in simulated seconds), optional `resolution_s` (grid step
of the time rescaling, default 1 s), optional `window_start_s` + `window_s` (simulate only the arrivals of
`[window_start_s, window_start_s + window_s)` of that curve, times relative to the window's start: one window of
a day whose level is set over the whole day).

`flash_sale` keys: `rate_per_s` (the constant base rate), the flash-sale keys `start_s, ramp_s, hold_s, decay_s,
peak_multiplier`, `duration_s`, optional `resolution_s`.
"""
from __future__ import annotations

import numpy as np

from scenarios.arrivals import flash_sale, rate_curve
from scenarios.arrivals.nhpp import RateFn, cumulative_rate, nhpp_arrivals
from scenarios.arrivals.process import ArrivalProcess
from scenarios.config_reader import ConfigReader


def _process(rate: RateFn, duration: float, resolution: float, describe: str) -> ArrivalProcess:
    _, cum = cumulative_rate(rate, duration, resolution)
    return ArrivalProcess(duration, lambda rng: nhpp_arrivals(rng, rate, duration, resolution),
                          float(cum[-1] / duration), describe)


def shifted(curve: RateFn, offset_s: float, factor: float = 1.0) -> RateFn:
    """`factor · curve(t + offset_s)`."""
    return lambda t: factor * curve(np.asarray(t, dtype=np.float64) + offset_s)


def daily_from_config(r: ConfigReader) -> ArrivalProcess:
    base = rate_curve.from_config(r.nested("curve"))
    duration = r.number("duration_s", positive=True)
    offset = r.number("curve_start_s", 0.0)
    resolution = r.number("resolution_s", 1.0, positive=True)
    mean, peak = r.number("mean_rate_per_s", None, positive=True), r.number("peak_rate_per_s", None, positive=True)
    sales = [flash_sale.read(s) for s in r.mapping_list("flash_sales", None)]
    curve = shifted(base, offset)
    if mean is not None and peak is not None:
        raise r.error("peak_rate_per_s", "is given together with mean_rate_per_s", "keep only one of the two")
    if mean is not None or peak is not None:
        t, cum = cumulative_rate(curve, duration, resolution)
        now = cum[-1] / duration if mean is not None else float(np.max(curve(t)))
        if now <= 0:
            raise r.error("curve", "is zero over the whole window", "choose a curve or window with traffic")
        curve = shifted(base, offset, (mean if mean is not None else peak) / now)
    rate = flash_sale.with_flash_sales(curve, sales)
    start, window = r.number("window_start_s", None, minimum=0.0), r.number("window_s", None, positive=True)
    if (start is None) != (window is None):
        raise r.error("window_s" if window is None else "window_start_s", "is missing",
                      "give both window_start_s and window_s, or neither")
    if start is not None:
        if start + window > duration + 1e-9:
            raise r.error("window_s", f"window ends at {start + window:g} s, after duration_s={duration:g}",
                          "shorten the window or start it earlier")
        rate = shifted(rate, start)
        duration = window
    return _process(rate, duration, resolution, f"daily(curve_start_s={offset:g}, flash_sales={len(sales)}"
                    + (f", window_start_s={start:g})" if start is not None else ")"))


def flash_sale_from_config(r: ConfigReader) -> ArrivalProcess:
    base = r.number("rate_per_s", positive=True)
    sale = flash_sale.read(r, finish=False)
    duration = r.number("duration_s", positive=True)
    resolution = r.number("resolution_s", 1.0, positive=True)
    rate = flash_sale.with_flash_sales(rate_curve.constant_rate(base), [sale])
    return _process(rate, duration, resolution, f"flash_sale(rate_per_s={base:g}, k={sale.peak_multiplier:g})")
