"""Verdicts per SLO x request class x pool, from the run's request table (`summary.json` `verdict`).

One record per SLO (`ttft_p99`, `tpot_p99`, `served_fraction`) for every (class, pool) pair that received at least
one request, then the rows that aggregate them: every class on one pool (`class: "all"`), one class on every pool
(`pool: "all"`) and the whole run (`all`/`all`). Requests rejected before placement have no pool: they count only in
the `pool: "all"` rows. A status is `met`, `missed` or `no_data` (no completed request, or none with a second token
for TPOT); missing data is never a pass.

An aggregate row over classes with different targets cannot be one P99 against one target: its status is `missed`
if any member missed, else `no_data` if any member had none, else `met`; its `target` and `achieved` are those of
the binding member (the largest achieved/target ratio, named in `binding_class`). This is the same rule as
`slo.met` in the summary, so the `all`/`all` rows agree with it.
"""
from __future__ import annotations

import math

import numpy as np

from sim.core.metrics import percentiles

SLOS = ("ttft_p99", "tpot_p99", "served_fraction")
ALL = "all"


def _status(achieved: float, target: float, higher_is_better: bool) -> str:
    if achieved is None or achieved != achieved:
        return "no_data"
    return "met" if (achieved >= target if higher_is_better else achieved <= target) else "missed"


def _cell(cols: dict, sel: np.ndarray, targets: dict, served_target: float) -> list[dict]:
    """The three verdicts of the requests `sel` (one class, so one target per SLO)."""
    done = sel & (cols["status"] == "completed")
    n = int(sel.sum())
    out = []
    for slo, key in (("ttft_p99", "ttft_s"), ("tpot_p99", "tpot_s")):
        p99 = percentiles(cols[key], done)["p99"]
        out.append({"slo": slo, "target": targets[slo], "achieved": p99, "requests": n,
                    "status": _status(p99, targets[slo], False)})
    served = float(done.sum()) / n if n else math.nan
    out.append({"slo": "served_fraction", "target": served_target, "achieved": served, "requests": n,
                "status": _status(served, served_target, True)})
    return out


def badness(row: dict) -> float:
    """How far a row is from its target: achieved/target (target/achieved for the served fraction); > 1 misses."""
    t, a = row["target"], row["achieved"]
    if row["slo"] == "served_fraction":
        return t / a if a else math.inf
    return a / t if t else math.inf


def _aggregate(members: list[dict], slo: str, cls: str, pool: str) -> dict:
    """One row over member rows of the same SLO (see the module docstring)."""
    statuses = [m["status"] for m in members]
    status = "missed" if "missed" in statuses else "no_data" if "no_data" in statuses or not members else "met"
    with_data = [m for m in members if m["status"] != "no_data"]

    binding = max(with_data, key=badness) if with_data else (members[0] if members else None)
    return {"slo": slo, "class": cls, "pool": pool,
            "target": binding["target"] if binding else None,
            "achieved": binding["achieved"] if binding else None,
            "requests": sum(m["requests"] for m in members), "status": status,
            "binding_class": binding["class"] if binding else None}


def verdicts(cols: dict, slo) -> list[dict]:
    """All verdict records of a run: `cols` are the request columns (sim/core/metrics.py; strings as `Labels`),
    `slo` the SloConfig."""
    classes, pools = cols["request_class"], cols["pool"]
    rows: list[dict] = []
    for cls in sorted(classes.distinct()):
        ttft_t, tpot_t = slo.for_class(cls)
        targets = {"ttft_p99": ttft_t, "tpot_p99": tpot_t}
        in_cls = classes == cls
        for pool in sorted(pools[in_cls].distinct() - {""}):
            for r in _cell(cols, in_cls & (pools == pool), targets, slo.served_fraction):
                rows.append({"slo": r.pop("slo"), "class": cls, "pool": pool, **r})
        for r in _cell(cols, in_cls, targets, slo.served_fraction):
            rows.append({"slo": r.pop("slo"), "class": cls, "pool": ALL, **r})
    out = list(rows)
    for pool in sorted({r["pool"] for r in rows} - {ALL}) + [ALL]:
        for s in SLOS:
            members = [r for r in rows if r["pool"] == pool and r["slo"] == s]
            out.append(_aggregate(members, s, ALL, pool))
    return out


def missed(records: list[dict]) -> list[dict]:
    """The concrete (one class, one pool) rows that missed, worst first (largest achieved/target ratio)."""
    rows = [r for r in records if r["status"] == "missed" and r["class"] != ALL and r["pool"] != ALL]
    return sorted(rows, key=lambda r: (-badness(r), r["slo"], r["class"], r["pool"]))
