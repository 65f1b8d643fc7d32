"""The run summary (`summary.json`): counts, latency percentiles, throughput, SLO attainment, cost, provenance."""
from __future__ import annotations

import numpy as np

from sim.config import RunConfig
from sim.metrics import percentiles


def summarize(run: RunConfig, cluster, cols: dict, duration_s: float, cost_usd: float, invariants: dict) -> dict:
    status = cols["status"]
    done = status == "completed"
    n = len(status)
    reasons: dict[str, int] = {}
    for r in cols["reject_reason"][status == "rejected"]:
        reasons[r] = reasons.get(r, 0) + 1
    dur = max(duration_s, 1e-9)
    out_tok = float(cols["output_tokens"][done].sum())
    in_tok = float(cols["prompt_tokens"][done].sum())
    slo = run.slo
    with np.errstate(invalid="ignore"):
        tpot_ok = np.where(np.isfinite(cols["tpot_s"]), cols["tpot_s"] <= slo.tpot_p99_s, True)
        good = done & (cols["ttft_s"] <= slo.ttft_p99_s) & tpot_ok
    ttft, tpot, e2e = (percentiles(cols[k][done]) for k in ("ttft_s", "tpot_s", "e2e_s"))
    served = float(done.sum()) / n if n else 1.0
    node_hours = sum(len(p.instances) * p.cfg.tp for p in cluster.pools.values()) * duration_s / 3600.0
    pools = {}
    kinds = set()
    for name, p in cluster.pools.items():
        parts = {k: 0.0 for k in p.instances[0].parts_s} if p.instances else {}
        for inst in p.instances:
            for k, v in inst.parts_s.items():
                parts[k] += v
        kinds.add(p.cost.kind)
        pools[name] = {
            "hardware": p.hardware.name, "model": p.model.name, "tp": p.cfg.tp,
            "weights_dtype": p.cfg.weights_dtype, "kv_dtype": p.cfg.kv_dtype,
            "instances_max": len(p.instances), "usd_per_instance_hour": p.usd_per_hour,
            "node_hours": len(p.instances) * p.cfg.tp * duration_s / 3600.0,
            "usd": len(p.instances) * p.usd_per_hour * duration_s / 3600.0,
            "requests_completed": p.completed,
            "kv_blocks_per_instance": p.memory.num_blocks, "block_size_tokens": p.memory.block_size_tokens,
            "weight_bytes": p.memory.weight_bytes, "kv_capacity_bytes": p.memory.kv_capacity_bytes,
            "busy_fraction": (sum(i.busy_s for i in p.instances) / (len(p.instances) * dur)) if p.instances else 0.0,
            "iterations": sum(i.iterations for i in p.instances),
            "time_breakdown_s": parts,
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
    return {
        "scenario": run.scenario.name, "seed": run.seed, "simulated_duration_s": duration_s,
        "requests": {"arrived": n, "completed": int(done.sum()), "rejected": int((status == "rejected").sum()),
                     "unfinished": int((status == "unfinished").sum()), "rejected_by_reason": reasons},
        "latency_s": {"ttft": ttft, "tpot": tpot, "e2e": e2e},
        "throughput": {"requests_per_s": float(done.sum()) / dur, "input_tokens_per_s": in_tok / dur,
                       "output_tokens_per_s": out_tok / dur},
        "slo": {"ttft_p99_s": slo.ttft_p99_s, "tpot_p99_s": slo.tpot_p99_s, "served_fraction": slo.served_fraction,
                "attainment": float(good.sum()) / n if n else 1.0, "goodput_requests_per_s": float(good.sum()) / dur,
                "served": served,
                "met": {"ttft_p99": bool(ttft["p99"] <= slo.ttft_p99_s), "tpot_p99": bool(not tpot["p99"] > slo.tpot_p99_s),
                        "served_fraction": bool(served >= slo.served_fraction)}},
        "cost": {"usd": cost_usd, "usd_per_million_output_tokens": cost_usd / out_tok * 1e6 if out_tok else None,
                 "usd_per_million_input_tokens": cost_usd / in_tok * 1e6 if in_tok else None,
                 "usd_per_request": cost_usd / float(done.sum()) if done.any() else None, "node_hours": node_hours},
        "pools": pools,
        "cost_model": {"kind": kind, "profile": first_pool.cost.describe()["profile"], "hardware": first_pool.hardware.name,
                       "note": note},
        "invariants": invariants,
    }
