"""Arrival processes: functions from a random stream to sorted arrival times in seconds.

Read first: `process.py` (the `ArrivalProcess` every kind returns), `poisson.py` (the simplest kind), `daily.py`
(rate curves + flash sales through `nhpp.py`). `ARRIVALS` maps a traffic `kind` to the function that parses its
config block; adding a process is one module plus one line here.
"""
from __future__ import annotations

from scenarios.arrivals import client_windows, daily, gamma, mmpp, poisson
from scenarios.arrivals.process import ArrivalProcess

ARRIVALS = {
    "poisson": poisson.from_config,
    "gamma": gamma.from_config,
    "mmpp": mmpp.from_config,
    "daily": daily.daily_from_config,
    "flash_sale": daily.flash_sale_from_config,
    "client_windows": client_windows.from_config,
}

__all__ = ["ARRIVALS", "ArrivalProcess"]
