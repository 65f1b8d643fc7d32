"""The run summary (the `Summary` record of sim/results/schema.py): counts, latency percentiles, throughput, SLO
attainment, cost, provenance, built from the engine's outcome (sim/core/outcome.py) and its request columns.

Read `summarize` (last) first: one section of the summary per function above it, each a typed record of the
schema."""
from __future__ import annotations

import numpy as np

from inferplan.config.run import RunConfig
from sim.core.metrics import percentiles
from sim.core.outcome import FleetOutcome, PoolOutcome, RunOutcome
from sim.results.schema import (SCHEMA_VERSION, ClassSlo, Cost, CostModelInfo, Failures, Fleet, Latency, Percentiles,
                                PoolFailures, PoolPricing, PoolSummary, RequestCounts, Slo, Summary, Throughput)
from sim.results.kv_memory import kv_memory
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


def _failures(pool: PoolOutcome, cols, moved: np.ndarray) -> PoolFailures:
    """A pool's instance failures (sim/core/fleet/failures.py): how many, when, which instance, why, and what
    became of the requests they held (moved to another instance, or rejected for want of one)."""
    log = pool.failures
    here = cols["pool"] == pool.name
    rejected = (cols["status"] == "rejected") & (cols["reject_reason"] == "instance_failure")
    return {"count": len(log), "times_s": [t for t, _, _ in log], "instances": [i for _, i, _ in log],
            "causes": [c for _, _, c in log], "requests_failed_over": int((moved & here).sum()),
            "requests_rejected": int((rejected & here).sum())}


def _engine_note(pool: PoolOutcome) -> str:
    """The pool's engine preset beside a measured grid's provenance (the grid was measured in one engine)."""
    if not pool.engine:
        return " (the pool names no engine preset)"
    version = f" {pool.engine_version}" if pool.engine_version else ""
    return f" (the pool's engine preset: {pool.engine}{version})"


def _requests(cols) -> RequestCounts:
    """How many requests arrived, completed, were rejected (and why) or were still unfinished at the end."""
    status = cols["status"]
    reasons: dict[str, int] = {}
    for r in cols["reject_reason"][status == "rejected"]:
        reasons[r] = reasons.get(r, 0) + 1
    return {"arrived": len(status), "completed": int((status == "completed").sum()),
            "rejected": int((status == "rejected").sum()), "unfinished": int((status == "unfinished").sum()),
            "rejected_by_reason": reasons}


def _slo(run: RunConfig, cols, duration_s: float) -> tuple[Slo, Percentiles, Percentiles]:
    """The SLO section, and the overall TTFT and TPOT percentiles (over completed requests)."""
    status = cols["status"]
    done = status == "completed"
    n = len(status)
    dur = max(duration_s, 1e-9)
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
    per_class: dict[str, ClassSlo] = {}
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
    served = float(done.sum()) / n if n else None
    section: Slo = {
        "ttft_p99_s": slo.ttft_p99_s, "tpot_p99_s": slo.tpot_p99_s, "served_fraction": slo.served_fraction,
        "attainment": float(good.sum()) / n if n else None, "goodput_requests_per_s": float(good.sum()) / dur,
        "served": served,
        "met": {"ttft_p99": _all_met([c["met"]["ttft_p99"] for c in per_class.values()]),
                "tpot_p99": _all_met([c["met"]["tpot_p99"] for c in per_class.values()]),
                "served_fraction": None if served is None else bool(served >= slo.served_fraction)},
        "classes": per_class}
    return section, ttft, tpot


def _pool(pool: PoolOutcome, cols, peak: dict) -> PoolSummary:
    """One pool's figures; `peak`: the most instances the sampler saw per pool (else those ever launched)."""
    bill, cache = pool.bill, pool.prefix_cache
    alive_h = bill["alive_instance_hours"]
    return {
        "hardware": pool.hardware, "model": pool.model, "role": pool.role, "tp": pool.tp,
        "weights_dtype": pool.weights_dtype, "kv_dtype": pool.kv_dtype,
        "devices_per_instance": pool.devices_per_instance,
        "instances_start": pool.instances_start, "instances_max": peak.get(pool.name, pool.instances_launched),
        "instances_launched": pool.instances_launched, "usd_per_instance_hour": pool.usd_per_instance_hour,
        **bill,  # (the bill's keys: sim/core/fleet/billing.py `pool_bill`, named in PoolSummary)
        "requests_completed": pool.requests_completed,
        "kv_blocks_per_instance": pool.kv_blocks_per_instance, "block_size_tokens": pool.block_size_tokens,
        "weight_bytes": pool.weight_bytes, "kv_capacity_bytes": pool.kv_capacity_bytes,
        "busy_fraction": bill["busy_instance_hours"] / alive_h if alive_h else 0.0,
        "iterations": pool.iterations,
        "time_breakdown_s": dict(pool.time_breakdown_s),
        "hidden_communication_s": pool.hidden_communication_s,
        "prefix_cache": {"enabled": cache.enabled, "hit_tokens": cache.hit_tokens,
                         "tier2_hit_tokens": cache.tier2_hit_tokens, "lookup_tokens": cache.lookup_tokens},
        "preemptions": int(cols["preemptions"][cols["pool"] == pool.name].sum()),
        "cost_model": pool.cost_model,
    }


def _pricing(pool: PoolOutcome) -> PoolPricing:
    """How the pool's instances were bought (on demand, reserved, spot) and what they were billed."""
    return {"kind": pool.price_kind, "discount": pool.price_discount,
            "on_demand_usd_per_instance_hour": pool.on_demand_usd_per_instance_hour,
            "usd_per_instance_hour": pool.usd_per_instance_hour, "usd": pool.bill["usd"]}


def _cost(run: RunConfig, fleet: FleetOutcome, cols) -> Cost:
    """The fleet's bill (the pools' bills summed, in pool order) per unit of work served, and the margin."""
    done = cols["status"] == "completed"
    out_tok = float(cols["output_tokens"][done].sum())
    in_tok = float(cols["prompt_tokens"][done].sum())
    total_usd = total_dev_h = total_node_h = total_kwh = waste = 0.0
    for p in fleet.pools.values():
        bill = p.bill
        total_usd += bill["usd"]
        total_dev_h += bill["device_hours"]
        total_node_h += bill["node_hours"]
        total_kwh += bill["energy_kwh"]
        waste += bill["idle_waste_usd"]
    rev = fleet.revenue
    return {"usd": total_usd, "usd_per_million_output_tokens": total_usd / out_tok * 1e6 if out_tok else None,
            "usd_per_million_input_tokens": total_usd / in_tok * 1e6 if in_tok else None,
            "usd_per_request": total_usd / float(done.sum()) if done.any() else None,
            "device_hours": total_dev_h, "node_hours": total_node_h, "idle_waste_usd": waste,
            "energy_kwh": total_kwh, "billing_granularity_s": run.scenario.billing_granularity_s, "revenue": rev,
            "margin_usd": None if rev is None else rev["usd"] - total_usd}


_NOTES = {"analytical": "roofline over datasheet peaks x documented default efficiencies (conf/cost/roofline.yaml, "
                        "docs/cost-model.md)",
          "measured": "efficiency curves fitted to kernels measured on the device (calibrate/profiles)",
          "mixed": "measured profile where it covers an op, datasheet roofline for the rest (see pools.*.cost_model)"}
_GRID_NOTES = {"analytical": "no op of any pool is covered by its measured grid: analytical forms throughout",
               "measured": "every op priced from per-op latencies measured in a serving engine (AIConfigurator grids)",
               "mixed": "per-op latencies measured in a serving engine (AIConfigurator grids) where they cover an "
                        "op, analytical forms for the rest (pools.*.cost_model: measured_ops, fallback with "
                        "reasons)"}


def _cost_model(fleet: FleetOutcome) -> CostModelInfo:
    """The pricing's provenance: one kind for the run (or mixed), and the measured grids that priced each pool."""
    kinds = {p.cost_kind for p in fleet.pools.values()}
    kind = kinds.pop() if len(kinds) == 1 else "mixed"
    first = next(iter(fleet.pools.values()))
    # Measured grids (cost.profile=measured): which database, engine and version measured each pool's ops
    sources = {name: p.cost_model["source"]["text"] + (f"; {p.cost_model['source']['choice']}"
                                                        if p.cost_model["source"].get("choice") else _engine_note(p))
               for name, p in fleet.pools.items() if "source" in p.cost_model}
    note = (_GRID_NOTES if sources else _NOTES)[kind]
    info: CostModelInfo = {"kind": kind, "profile": first.cost_model["profile"], "hardware": first.hardware,
                           "note": note}
    if sources:
        info["sources"] = sources
    return info


def _fleet(fleet: FleetOutcome, cols) -> Fleet:
    """What the autoscalers and the overload ladder did."""
    return {"scale_events": [list(e) for e in fleet.scale_events],
            "overload_transitions": [list(t) for t in fleet.overload.transitions],
            "fallback_requests": int(cols["fallback"].sum()), "autoscalers": dict(fleet.autoscalers)}


def summarize(run: RunConfig, outcome: RunOutcome) -> Summary:
    """The run's `summary.json` body (without `wall_time_s`, which the caller measures). A run that a signal
    stopped before its end (`outcome.interrupted_by`) is `interrupted` and its diagnosis names no cause."""
    cols, fleet, duration_s = outcome.requests, outcome.fleet, outcome.end_s
    status = cols["status"]
    done = status == "completed"
    dur = max(duration_s, 1e-9)
    moved = (cols["reject_reason"] == "instance_failure") & (status != "rejected")  # failed over, not rejected
    slo, ttft, tpot = _slo(run, cols, duration_s)
    failures = {name: _failures(p, cols, moved) for name, p in fleet.pools.items()}
    out_tok = float(cols["output_tokens"][done].sum())
    in_tok = float(cols["prompt_tokens"][done].sum())
    latency: Latency = {"ttft": ttft, "tpot": tpot, "e2e": percentiles(cols["e2e_s"], done), "itl": fleet.itl_s}
    throughput: Throughput = {"requests_per_s": float(done.sum()) / dur, "input_tokens_per_s": in_tok / dur,
                              "output_tokens_per_s": out_tok / dur}
    failed: Failures = {"requests_failed_over": int(moved.sum()),
                        "requests_rejected": int(sum(f["requests_rejected"] for f in failures.values())),
                        "pools": failures}
    partial = bool(outcome.interrupted_by)
    return {
        "schema_version": SCHEMA_VERSION, "status": "interrupted" if partial else "completed",
        "scenario": run.scenario.name, "seed": run.seed, "simulated_duration_s": duration_s,
        "requests": _requests(cols), "latency_s": latency, "throughput": throughput, "slo": slo,
        "cost": _cost(run, fleet, cols), "fleet": _fleet(fleet, cols),
        "pools": {name: _pool(p, cols, outcome.peak_instances) for name, p in fleet.pools.items()},
        # (new sections at the top level: the golden summaries pin every key the older sections hold)
        "pricing": {name: _pricing(p) for name, p in fleet.pools.items()},
        "failures": failed,
        "cost_model": _cost_model(fleet),
        "kv_memory": {name: kv_memory(run.setups[name], p) for name, p in fleet.pools.items()},
        "invariants": outcome.invariants,
        "calibration": run.calibration,
        **review(run, outcome, partial=partial),  # `verdict`, `diagnosis` (sim/review)
    }
