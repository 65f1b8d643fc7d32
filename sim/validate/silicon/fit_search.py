"""The simulations a front-end fit runs itself: the base it fits when no `base=` matrix is given (a subsample of
rows simulated with the front-end time at zero), and `search=N`, which checks the linear fit's scale by
simulating (fit.py's module docstring)."""
from __future__ import annotations

import sys

import numpy as np

from sim.validate.silicon.fit_terms import ZERO
from sim.validate.silicon.simulate_row import DEFAULT_CLIENT


def subsample_plans(systems: tuple[str, ...], per_model: int) -> list:
    """`per_model` rows per (engine, model), spread over concurrency and shape."""
    from sim.validate.silicon.support import RowPlan, plan_row
    from sim.validate.silicon.table import CSV_PATH, read_table

    groups: dict[tuple, list[RowPlan]] = {}
    for row in read_table(CSV_PATH):
        if row.system in systems:
            p = plan_row(row)
            if isinstance(p, RowPlan):
                groups.setdefault((row.engine, row.model), []).append(p)
    plans = []
    for _, ps in sorted(groups.items()):
        ps.sort(key=lambda p: (p.row.clients, p.row.isl_tokens, p.row.osl_tokens, p.row.id))
        take = np.unique(np.linspace(0, len(ps) - 1, min(per_model, len(ps))).round().astype(int))
        plans += [ps[i] for i in take]
    return plans


def simulate_plans(plans: list, engine_keys: dict, jobs: int, cost: str | None = None,
                   client: str = DEFAULT_CLIENT) -> list[dict]:
    """Records of `plans` simulated with the front-end keys `engine_keys[<the plan's serving preset>]` overridden
    (`cost`, `client`: as the matrix's options of those names; give the ones the `base=` run was made with)."""
    from sim.validate.silicon.runner import simulated_record
    from sim.validate.silicon.simulate_row import simulate_safely
    from sim.workers import WorkerPool

    pool = WorkerPool(jobs)
    by_id = {p.row.id: p for p in plans}
    try:
        out = [simulated_record(by_id[i], res) for i, res in
               pool.run(simulate_safely, ((p.row.id, (p, 10, engine_keys[p.engine], cost, client))
                                          for p in plans), in_flight=jobs)]
    finally:
        pool.close()
    return out


def simulated_base(systems: tuple[str, ...], per_model: int, jobs: int, cost: str | None = None,
                   client: str = DEFAULT_CLIENT) -> list[dict]:
    """`per_model` rows per (engine, model), simulated with the front-end time at zero."""
    plans = subsample_plans(systems, per_model)
    return simulate_plans(plans, {p.engine: ZERO for p in plans}, jobs, cost, client)


SCALES = (0.4, 0.6, 0.8, 1.0)


def scale_search(doc: dict, systems: tuple[str, ...], per_model: int, jobs: int, cost: str | None = None,
                 client: str = DEFAULT_CLIENT) -> None:
    """The additive fit ignores that a delayed request lightens the load behind it, and its queueing feedback
    (a closed loop's arrivals bunch): simulate a subsample with the fitted coefficients x each of SCALES and keep
    the scale of least median |TTFT error| + median |TPOT error| (each engine on its own rows)."""
    plans = subsample_plans(systems, per_model)
    plans = [p for p in plans if p.row.engine in doc["engines"]]
    results: dict[str, list] = {e: [] for e in doc["engines"]}
    for k in SCALES:
        keys = {p: {n: v * k for n, v in fp["values"].items()} for f in doc["engines"].values()
                for p, fp in f["presets"].items()}
        keys |= {p.engine: dict(ZERO) for p in plans if p.engine not in keys}
        recs = [r for r in simulate_plans(plans, keys, jobs, cost, client) if r["status"] == "simulated"]
        for e in doc["engines"]:
            mine = [r for r in recs if r["engine"] == e]
            ttft = float(np.median(np.abs([r["ttft_error_pct"] for r in mine])))
            tpot = float(np.median(np.abs([r["tpot_error_pct"] for r in mine])))
            results[e].append({"scale": k, "rows": len(mine), "ttft_median_abs_pct": round(ttft, 1),
                               "tpot_median_abs_pct": round(tpot, 1)})
            print(f"scale {k}: {e} {len(mine)} rows, TTFT {ttft:.1f}%, TPOT {tpot:.1f}%", file=sys.stderr, flush=True)
    for e, f in doc["engines"].items():
        best = min(results[e], key=lambda r: r["ttft_median_abs_pct"] + r["tpot_median_abs_pct"])
        for fp in f["presets"].values():
            fp["linear_values"] = dict(fp["values"])
            fp["values"] = {n: v * best["scale"] for n, v in fp["values"].items()}
        f["scale_search"] = {"rows_per_model": per_model, "candidates": results[e], "chosen": best["scale"]}
