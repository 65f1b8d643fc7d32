"""Errors of simulated against measured figures, and their summaries per partition and concurrency band.

`error_pct = 100 (simulated - measured) / measured`: negative means the simulator predicts faster. A summary of a
set of rows gives, per metric: `median_abs_pct` (median of |error|), `mape_pct` (mean of |error|) and `bias_pct`
(median of the signed error), over the rows with a finite error.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import numpy as np

METRICS = ("ttft", "tpot")
# Client concurrency bands: (label, lowest, highest) clients.
BANDS = (("1-4", 1, 4), ("5-32", 5, 32), ("33-128", 33, 128), (">128", 129, math.inf))


def error_pct(simulated: float, measured: float) -> float:
    """Signed error in percent of the measured value (NaN when either side is missing or measured is not > 0)."""
    if not (math.isfinite(simulated) and math.isfinite(measured) and measured > 0):
        return math.nan
    return 100.0 * (simulated - measured) / measured


def band(clients: int) -> str:
    """The concurrency band label of a client count (>= 1)."""
    for label, lo, hi in BANDS:
        if lo <= clients <= hi:
            return label
    raise ValueError(f"client count {clients} is below 1")


def summary(errors_pct: Iterable[float]) -> dict:
    """`{rows, median_abs_pct, mape_pct, bias_pct}` over the finite errors (NaN figures when there are none). The
    errors are sorted first: a matrix's records come in the order its rows finished, and a mean summed in another
    order differs in its last bits (the same rows must give the same figures)."""
    e = np.sort(np.array([x for x in errors_pct if math.isfinite(x)], dtype=np.float64))
    if not e.size:
        return {"rows": 0, "median_abs_pct": math.nan, "mape_pct": math.nan, "bias_pct": math.nan}
    return {"rows": int(e.size), "median_abs_pct": float(np.median(np.abs(e))), "mape_pct": float(np.mean(np.abs(e))),
            "bias_pct": float(np.median(e))}


def summarize(records: list[dict]) -> dict:
    """Per metric, the summary of the records' `<metric>_error_pct` (records of simulated rows), plus `rows`."""
    return {"rows": len(records), **{m: summary(r[f"{m}_error_pct"] for r in records) for m in METRICS}}


def grouped(records: list[dict], key: Callable[[dict], str]) -> dict[str, dict]:
    """`summarize` per group, groups in sorted order."""
    groups: dict[str, list[dict]] = {}
    for r in records:
        groups.setdefault(key(r), []).append(r)
    return {k: summarize(groups[k]) for k in sorted(groups)}


def partition(record: dict) -> str:
    """hardware x engine x model x length shape (x `disagg` for a disaggregated deployment's rows)."""
    mode = " disagg" if record.get("mode") == "disagg" else ""
    return f"{record['system']} {record['engine']} {record['model']} {record['shape']}{mode}"


def band_key(record: dict) -> str:
    return record["band"]


def band_order(label: str) -> int:
    return [b[0] for b in BANDS].index(label)
