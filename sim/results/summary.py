"""The run summary (the `Summary` record of sim/results/schema.py): counts, latency percentiles, throughput, SLO
attainment, cost, provenance, built from the finished cluster and its request columns."""
from __future__ import annotations

import numpy as np

from inferplan.config.run import RunConfig
from sim.core.instance.itl import ItlSketch
from sim.core.fleet.billing import pool_bill, revenue_usd, usd_per_instance_hour
from sim.core.metrics import percentiles
from sim.review import review


def _verdict(achieved: float, target: float) -> bool | None:
    """An SLO verdict: met, missed, or None (JSON null: no data, e.g. no request completed or none had a second
    token). A missing value is never a pass."""
    return None if achieved != achieved else bool(achieved <= target)


def _all_met(verdicts: list) -> bool | None:
    """Across classes: missed if any class missed, else no data if any had none (or there are none), else met."""
    if any(v is False for v in verdicts):
        return False
    return None if not verdicts or any(v is None for v in verdicts) else True


def _within(values: np.ndarray, classes, class_names: list[str], target, no_value_ok: bool) -> np.ndarray:
    """Per request: its value is within its class's `target(class)` (a non-finite value counts as within when
    `no_value_ok`: a TPOT of a one-token answer). Class by class against scalars, in boolean masks (no
    per-request target arrays)."""
    out = np.zeros(len(values), dtype=bool)
    for name in class_names:
        with np.errstate(invalid="ignore"):
            ok = values <= target(name)
        if no_value_ok:
            ok |= ~np.isfinite(values)
        ok &= classes == name
        out |= ok
    return out


def _failures(pool, cols, moved: np.ndarray) -> dict:
    """A pool's instance failures (sim/core/fleet/failures.py): how many, when, which instance, why, and what
    became of the requests they held (moved to another instance, or rejected for want of one)."""
    log = pool.failure_log
    here = cols["pool"] == pool.name
    rejected = (cols["status"] == "rejected") & (cols["reject_reason"] == "instance_failure")
    return {"count": len(log), "times_s": [t for t, _, _ in log], "instances": [i for _, i, _ in log],
            "causes": [c for _, _, c in log], "requests_failed_over": int((moved & here).sum()),
            "requests_rejected": int((rejected & here).sum())}


def _engine_note(pool) -> str:
    """The pool's engine preset beside a measured grid's provenance (the grid was measured in one engine)."""
    engine = pool.engine
    if engine.generic:
        return " (the pool names no engine preset)"
    version = f" {engine.engine_version}" if engine.engine_version else ""
    return f" (the pool's engine preset: {engine.name}{version})"


def _itl(cluster) -> dict:
    """ITL p50/p90/p99/mean over every instance's sketch (merged in pool and index order)."""
    total = ItlSketch()
    for pool in cluster.pools.values():
        for inst in pool.instances:
            total.merge(inst.itl)
    return total.summary()


def summarize(run: RunConfig, cluster, cols: dict, duration_s: float, sampler_peak: dict, invariants: dict,
              pool_columns: dict | None = None, *, partial: bool = False) -> dict:
    """The run's `summary.json` body; `partial`: a signal stopped the run before its end (its diagnosis then names
    no cause)."""
    status = cols["status"]
    done = status == "completed"
    n = len(status)
    reasons: dict[str, int] = {}
    for r in cols["reject_reason"][status == "rejected"]:
        reasons[r] = reasons.get(r, 0) + 1
    moved = (cols["reject_reason"] == "instance_failure") & (status != "rejected")  # failed over, not rejected
    dur = max(duration_s, 1e-9)
    out_tok = float(cols["output_tokens"][done].sum())
    in_tok = float(cols["prompt_tokens"][done].sum())
    slo = run.slo
    classes = cols["request_class"]
    class_names = sorted(classes.distinct())
    # One derived latency column at a time (`inferplan/columns.py`: each is 8 bytes a request, made on reading):
    # its percentiles by class and overall, and which requests are within their class's target.
    ttft_s = cols["ttft_s"]
    good = _within(ttft_s, classes, class_names, lambda name: slo.for_class(name)[0], no_value_ok=False)
    p_ttft = {name: percentiles(ttft_s, (classes == name) & done) for name in class_names}
    ttft = percentiles(ttft_s, done)
    del ttft_s
    tpot_s = cols["tpot_s"]
    good &= _within(tpot_s, classes, class_names, lambda name: slo.for_class(name)[1], no_value_ok=True)
    p_tpot = {name: percentiles(tpot_s, (classes == name) & done) for name in class_names}
    tpot = percentiles(tpot_s, done)
    del tpot_s
    good &= done  # completed within its class's TTFT and TPOT targets (no TPOT: one token)
    e2e = percentiles(cols["e2e_s"], done)
    per_class = {}
    for name in class_names:
        sel = classes == name
        sd = sel & done
        c_ttft, c_tpot = slo.for_class(name)
        served_c = float(sd.sum()) / float(sel.sum())
        per_class[name] = {"requests": int(sel.sum()), "completed": int(sd.sum()),
                           "ttft_s": p_ttft[name], "tpot_s": p_tpot[name], "ttft_p99_s_target": c_ttft,
                           "tpot_p99_s_target": c_tpot,
                           "attainment": float((good & sel).sum()) / float(sel.sum()), "served": served_c,
                           "met": {"ttft_p99": _verdict(p_ttft[name]["p99"], c_ttft),
                                   "tpot_p99": _verdict(p_tpot[name]["p99"], c_tpot),
                                   "served_fraction": bool(served_c >= slo.served_fraction)}}
    rev = revenue_usd(cols, run.scenario.price_sheet)
    served = float(done.sum()) / n if n else None
    pools, pricing, failures = {}, {}, {}
    kinds = set()
    gran = run.scenario.billing_granularity_s
    total_usd = total_dev_h = total_node_h = total_kwh = waste = 0.0
    for name, p in cluster.pools.items():
        parts: dict[str, float] = {}
        for inst in p.instances:
            for k, v in inst.parts_s.items():
                parts[k] = parts.get(k, 0.0) + v
        kinds.add(p.cost.kind)
        bill = pool_bill(p, duration_s, gran)
        total_usd += bill["usd"]
        total_dev_h += bill["device_hours"]
        total_node_h += bill["node_hours"]
        total_kwh += bill["energy_kwh"]
        waste += bill["idle_waste_usd"]
        alive_h = bill["alive_instance_hours"]
        pricing[name] = {"kind": p.price.kind, "discount": p.price.discount,
                         "on_demand_usd_per_instance_hour": p.usd_per_hour,
                         "usd_per_instance_hour": usd_per_instance_hour(p), "usd": bill["usd"]}
        failures[name] = _failures(p, cols, moved)
        pools[name] = {
            "hardware": p.hardware.name, "model": p.model.name, "role": p.cfg.role, "tp": p.cfg.tp,
            "weights_dtype": p.cfg.weights_dtype, "kv_dtype": p.cfg.kv_dtype,
            "devices_per_instance": p.devices_per_instance,
            "instances_start": p.cfg.instances, "instances_max": sampler_peak.get(name, len(p.instances)),
            "instances_launched": len(p.instances), "usd_per_instance_hour": usd_per_instance_hour(p),
            **bill,
            "requests_completed": p.completed,
            "kv_blocks_per_instance": p.memory.num_blocks, "block_size_tokens": p.memory.block_size_tokens,
            "weight_bytes": p.memory.weight_bytes, "kv_capacity_bytes": p.memory.kv_capacity_bytes,
            "busy_fraction": bill["busy_instance_hours"] / alive_h if alive_h else 0.0,
            "iterations": sum(i.iterations for i in p.instances),
            "time_breakdown_s": parts,
            "hidden_communication_s": sum(getattr(i, "hidden_s", 0.0) for i in p.instances),
            "prefix_cache": {"enabled": p.cfg.prefix_caching,
                             "hit_tokens": sum(i.kv.hits_tokens for i in p.instances),
                             "tier2_hit_tokens": sum(i.kv.tier2_hits_tokens for i in p.instances),
                             "lookup_tokens": sum(i.kv.lookups_tokens for i in p.instances)},
            "preemptions": int(cols["preemptions"][cols["pool"] == name].sum()),
            "cost_model": p.cost.describe(),
        }
    kind = kinds.pop() if len(kinds) == 1 else "mixed"
    first_pool = next(iter(cluster.pools.values()))
    note = {"analytical": "roofline over datasheet peaks x documented default efficiencies (conf/cost/roofline.yaml, "
                          "docs/cost-model.md)",
            "measured": "efficiency curves fitted to kernels measured on the device (calibrate/profiles)",
            "mixed": "measured profile where it covers an op, datasheet roofline for the rest (see pools.*.cost_model)"}[kind]
    # Measured grids (cost.profile=measured): which database, engine and version measured each pool's ops
    sources = {name: pools[name]["cost_model"]["source"]["text"] + _engine_note(p)
               for name, p in cluster.pools.items() if "source" in pools[name]["cost_model"]}
    if sources:
        note = {"analytical": "no op of any pool is covered by its measured grid: analytical forms throughout",
                "measured": "every op priced from per-op latencies measured in a serving engine (AIConfigurator grids)",
                "mixed": "per-op latencies measured in a serving engine (AIConfigurator grids) where they cover an "
                         "op, analytical forms for the rest (pools.*.cost_model: measured_ops, fallback with "
                         "reasons)"}[kind]
    return {
        "scenario": run.scenario.name, "seed": run.seed, "simulated_duration_s": duration_s,
        "requests": {"arrived": n, "completed": int(done.sum()), "rejected": int((status == "rejected").sum()),
                     "unfinished": int((status == "unfinished").sum()), "rejected_by_reason": reasons},
        "latency_s": {"ttft": ttft, "tpot": tpot, "e2e": e2e, "itl": _itl(cluster)},
        "throughput": {"requests_per_s": float(done.sum()) / dur, "input_tokens_per_s": in_tok / dur,
                       "output_tokens_per_s": out_tok / dur},
        "slo": {"ttft_p99_s": slo.ttft_p99_s, "tpot_p99_s": slo.tpot_p99_s, "served_fraction": slo.served_fraction,
                "attainment": float(good.sum()) / n if n else None, "goodput_requests_per_s": float(good.sum()) / dur,
                "served": served,
                "met": {"ttft_p99": _all_met([c["met"]["ttft_p99"] for c in per_class.values()]),
                        "tpot_p99": _all_met([c["met"]["tpot_p99"] for c in per_class.values()]),
                        "served_fraction": None if served is None else bool(served >= slo.served_fraction)},
                "classes": per_class},
        "cost": {"usd": total_usd, "usd_per_million_output_tokens": total_usd / out_tok * 1e6 if out_tok else None,
                 "usd_per_million_input_tokens": total_usd / in_tok * 1e6 if in_tok else None,
                 "usd_per_request": total_usd / float(done.sum()) if done.any() else None,
                 "device_hours": total_dev_h, "node_hours": total_node_h, "idle_waste_usd": waste, "energy_kwh": total_kwh,
                 "billing_granularity_s": gran, "revenue": rev,
                 "margin_usd": None if rev is None else rev["usd"] - total_usd},
        "fleet": {"scale_events": [list(e) for e in cluster.scale_log],
                  "overload_transitions": [list(t) for t in cluster.overload.transitions],
                  "fallback_requests": int(cols["fallback"].sum()),
                  "autoscalers": {n: type(s).__name__ for n, s in cluster.scalers.items()}},
        "pools": pools,
        # (new sections at the top level: the golden summaries pin every key the older sections hold)
        "pricing": pricing,
        "failures": {"requests_failed_over": int(moved.sum()),
                     "requests_rejected": int(sum(f["requests_rejected"] for f in failures.values())),
                     "pools": failures},
        "cost_model": {"kind": kind, "profile": first_pool.cost.describe()["profile"], "hardware": first_pool.hardware.name,
                       "note": note, **({"sources": sources} if sources else {})},
        "invariants": invariants,
        "calibration": run.calibration,
        **review(run, cluster, cols, pool_columns, duration_s, partial=partial),  # `verdict`, `diagnosis` (sim/review)
    }
