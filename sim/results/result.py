"""A finished run in memory: what `sim/results/write.py` writes into the run folder."""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from inferplan.labels import Labels


@dataclass
class SimResult:
    """Everything a run writes: request columns, time-series rows, per-pool rows and the summary dict."""

    requests: Mapping[str, np.ndarray | Labels]  # strings as Labels; a run's are inferplan/columns.py Columns
    timeseries_columns: dict  # TS_COLUMNS -> values per sampling interval
    pool_columns: dict        # POOL_COLUMNS -> values per (interval, pool)
    summary: dict
    interrupted_by: int = 0   # the signal that stopped the run early (0: it ran to its end)

    @property
    def timeseries(self) -> list[dict]:
        """The time series as rows (convenient in tests; the run folder is written from the columns)."""
        cols = self.timeseries_columns
        return [dict(zip(cols, vals)) for vals in zip(*cols.values())]

    @property
    def pools(self) -> list[dict]:
        cols = self.pool_columns
        return [dict(zip(cols, vals)) for vals in zip(*cols.values())]


def nan_to_none(x):
    """JSON-safe floats: NaN and inf become null."""
    if isinstance(x, dict):
        return {k: nan_to_none(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [nan_to_none(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x
