"""Why an SLO missed, from the run's own evidence (`summary.json` `diagnosis`).

For every missed verdict of one class on one pool (sim/review/verdict.py), worst first:

1. **window**: the requests are binned by when the SLO is decided (first token for TTFT, finish for TPOT, arrival
   for the served fraction); the worst bin and the contiguous missing bins around it are the window.
2. **cause**: checked in this order, the first that the window's evidence supports:
   `overload_action` (most slow requests were sent to the fallback pool, or rejected by the circuit breaker),
   `placement_spill` (the pool is not the class's first route: it got the class's overflow),
   `kv_preemption` (at least 30% of the slow requests were preempted),
   `cold_start` (the autoscaler asked for instances before the window but they were still starting in it),
   `autoscaler_lag` (an autoscaled pool had fewer instances in or before the window than it had earlier while its
   load did not fall, or had to scale up during the window),
   then `queueing` (queueing, estimated by Little's law from the sampled queue, is at least half of the mean TTFT)
   or else `step_time` (the iterations themselves are slow: large batches per instance).
3. **evidence**: the numbers behind the cause; **try**: Hydra overrides and `sim.plan` dimensions to test.

The thresholds (30% preempted, half of TTFT queueing, half of the slow requests) are stated choices of this
module, not measurements: they only pick which of the measured facts to lead with; every finding carries all of
its window's numbers.
"""
from __future__ import annotations

import math

import numpy as np

from sim.review.evidence import RunEvidence
from sim.review.verdict import badness, missed

CAUSES = ("queueing", "step_time", "kv_preemption", "autoscaler_lag", "cold_start", "overload_action",
          "placement_spill")
LOOKBACK_S = 600.0      # how far before the window the pool's history is read (instances, load, scale events)
MAX_FINDINGS = 8
_TIME_KEY = {"ttft_p99": ("first_token_s", "ttft_s"), "tpot_p99": ("finish_s", "tpot_s"),
             "served_fraction": ("arrival_s", None)}


def bin_width_s(duration_s: float) -> float:
    """About 20 bins over the run, at least 10 s, rounded to 10 s (a minute for an hour-long run)."""
    return max(10.0, round(duration_s / 20.0 / 10.0) * 10.0)


def bin_stat(times: np.ndarray, values: np.ndarray, width_s: float, t_end_s: float, p99: bool) -> np.ndarray:
    """Per bin of `width_s` over [0, t_end_s]: the P99 of `values` (`p99`) or their mean (the served fraction,
    `values` being 1 for a completed request); NaN where a bin has no value."""
    n_bins = max(1, int(math.ceil(t_end_s / width_s)))
    ok = np.isfinite(times) & np.isfinite(values)
    idx = np.clip((times[ok] // width_s).astype(np.int64), 0, n_bins - 1)
    vals = values[ok]
    stat = np.full(n_bins, np.nan)
    for b in np.unique(idx):
        v = vals[idx == b]
        stat[b] = float(np.percentile(v, 99)) if p99 else float(v.mean())
    return stat


def _window(stat: np.ndarray, target: float, width_s: float, lower_is_worse: bool) -> tuple[float, float, float]:
    finite = np.isfinite(stat)
    if not finite.any():
        return 0.0, width_s, math.nan
    score = np.where(finite, -stat if lower_is_worse else stat, -np.inf)
    w = int(np.argmax(score))
    bad = finite & ((stat < target) if lower_is_worse else (stat > target))
    lo = hi = w
    while lo > 0 and bad[lo - 1]:
        lo -= 1
    while hi + 1 < len(stat) and bad[hi + 1]:
        hi += 1
    return lo * width_s, (hi + 1) * width_s, float(stat[w])


def _active_at(series: dict, t0: float, t1: float) -> np.ndarray:
    t = series["t_s"]
    return series["active"][(t > t0) & (t <= t1)]


def _mean(x: np.ndarray) -> float:
    return float(x.mean()) if x.size else math.nan


def _r(x: float, digits: int = 3):
    return None if x is None or x != x else round(float(x), digits)


def diagnose(records: list[dict], ev: RunEvidence) -> list[dict]:
    """The findings for the missed verdicts `records` (empty when every SLO is met)."""
    out = []
    for row in missed(records)[:MAX_FINDINGS]:
        out.append(_finding(row, ev))
    return out


def _finding(row: dict, ev: RunEvidence) -> dict:
    cols, slo, cls, pool = ev.requests, row["slo"], row["class"], row["pool"]
    width = bin_width_s(ev.duration_s)
    sel = (cols["request_class"] == cls) & (cols["pool"] == pool)
    t_key, v_key = _TIME_KEY[slo]
    done = cols["status"] == "completed"
    values = None if v_key is None else cols[v_key]  # (read once: latencies are derived on each read)
    if v_key is None:
        stat = bin_stat(cols["arrival_s"][sel], done[sel].astype(np.float64), width, ev.duration_s, p99=False)
    else:
        stat = bin_stat(cols[t_key][sel & done], values[sel & done], width, ev.duration_s, p99=True)
    a, b, worst = _window(stat, row["target"], width, lower_is_worse=v_key is None)
    with np.errstate(invalid="ignore"):
        in_win = sel & (cols[t_key] > a) & (cols[t_key] <= b)
        slow = in_win & ~done if v_key is None else in_win & done & (values > row["target"])
    e = _evidence(ev, cls, pool, a, b, in_win, slow)
    e = {"achieved_in_window": _r(worst, 4), "target": row["target"], "achieved_over_run": _r(row["achieved"], 4),
         **e}
    cause = _cause(ev, slo, cls, pool, e)
    return {"slo": slo, "class": cls, "pool": pool, "window_s": [a, b], "cause": cause,
            "severity": _r(badness(row), 3), "evidence": e, "try": _try(ev, cause, cls, pool, e)}


def _finite(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The finite values where `mask` holds (the column read once)."""
    return values[mask & np.isfinite(values)]


def _evidence(ev: RunEvidence, cls: str, pool: str, a: float, b: float, in_win: np.ndarray,
              slow: np.ndarray) -> dict:
    cols = ev.requests
    n_win, n_slow = int(in_win.sum()), int(slow.sum())
    span = max(b - a, 1e-9)
    before = max(0.0, a - LOOKBACK_S)
    on_pool = cols["pool"] == pool
    arr = cols["arrival_s"]
    rate_win = float((on_pool & (arr > a) & (arr <= b)).sum()) / span
    rate_before = float((on_pool & (arr > before) & (arr <= a)).sum()) / max(a - before, 1e-9) if a > before else math.nan
    e: dict = {"requests_in_window": n_win, "requests_over_target": n_slow,
               "pool_arrivals_per_s_before": _r(rate_before, 2), "pool_arrivals_per_s_in_window": _r(rate_win, 2)}
    s = ev.pool_series.get(pool)
    if s is not None and s["t_s"].size:
        act_before, act_win = _active_at(s, before, a), _active_at(s, a, b)
        t = s["t_s"]
        w = (t > a) & (t <= b)
        active_mean = _mean(s["active"][w])
        queued_mean, running_mean = _mean(s["queued"][w]), _mean(s["running"][w])
        e.update({"instances_max_before": int(act_before.max()) if act_before.size else None,
                  "instances_at_window_start": int(act_win[0]) if act_win.size else None,
                  "instances_min_in_window": int(act_win.min()) if act_win.size else None,
                  "instances_at_window_end": int(act_win[-1]) if act_win.size else None,
                  "instances_starting_mean_in_window": _r(_mean(s["starting"][w]), 2),
                  "queued_per_instance": _r(queued_mean / active_mean if active_mean else math.nan, 2),
                  "running_per_instance": _r(running_mean / active_mean if active_mean else math.nan, 1),
                  "kv_utilization_max": _r(float(s["kv_utilization"][w].max()) if w.any() else math.nan, 3),
                  "busy_fraction_mean": _r(_mean(s["busy_fraction"][w]), 3)})
        # Little's law on the pool's sampled queue: mean wait = mean queue / arrival rate.
        wait = queued_mean / rate_win if rate_win > 0 and queued_mean == queued_mean else math.nan
        ttft = _mean(_finite(cols["ttft_s"], in_win))
        e["queueing_s_estimate"] = _r(wait, 4)
        # Requests still queued when the window closes have no TTFT yet, so the estimate can exceed the mean TTFT
        # of those that got one: the share is capped at 1 (all of it queueing) and the cap is said.
        share = wait / ttft if ttft and ttft == ttft and wait == wait else math.nan
        e["queueing_share_of_ttft"] = _r(min(share, 1.0) if share == share else share, 3)
        if share == share and share > 1.0:
            e["queueing_share_capped"] = True
    tpot = _finite(cols["tpot_s"], in_win)
    e["tpot_p50_s_in_window"] = _r(float(np.percentile(tpot, 50)) if tpot.size else math.nan, 4)
    itl = _finite(cols["itl_max_s"], in_win)
    e["itl_max_p99_s_in_window"] = _r(float(np.percentile(itl, 99)) if itl.size else math.nan, 4)
    e["preemptions_in_window"] = int(cols["preemptions"][on_pool & (arr > a) & (arr <= b)].sum())
    e["preempted_share_of_slow"] = _r(float((cols["preemptions"][slow] > 0).mean()) if n_slow else 0.0, 3)
    e["fallback_share_of_slow"] = _r(float(cols["fallback"][slow].mean()) if n_slow else 0.0, 3)
    rejected = (cols["request_class"] == cls) & (cols["status"] == "rejected") & (arr > a) & (arr <= b)
    reasons: dict[str, int] = {}
    for r in cols["reject_reason"][rejected]:
        reasons[r] = reasons.get(r, 0) + 1
    e["rejected_in_window"] = dict(sorted(reasons.items()))
    first = (ev.routes.get(cls) or [pool])[0]
    e["first_route"] = first
    if first != pool:
        e["spilled_in_window"] = int((in_win & ~cols["fallback"]).sum())
    ups = [x for x in ev.scale_events if x[1] == pool and a < x[0] <= b and x[3] > x[2]]
    downs = [x for x in ev.scale_events if x[1] == pool and before < x[0] <= b and x[3] < x[2]]
    e["scale_ups_in_window"] = len(ups)
    e["scale_downs_before_and_in_window"] = len(downs)
    facts = ev.pools.get(pool)
    if facts is not None:
        e["autoscaler"] = facts.autoscaler
        e["min_instances"], e["max_instances"] = facts.min_instances, facts.max_instances
        starts = [(s0, s1) for s0, s1, _ in facts.instance_times_s if before < s0 <= b]
        cold = [s1 - s0 for s0, s1 in starts if s1 == s1]
        e["cold_starts_before_and_in_window"] = len(starts)
        e["cold_start_s_median"] = _r(float(np.median(cold)) if cold else math.nan, 1)
        e["starting_at_window_start"] = sum(1 for s0, s1, _ in facts.instance_times_s
                                            if s0 <= a and not (s1 <= a))
    e["overload_transitions_in_window"] = [[x[0], x[1], x[2]] for x in ev.overload_transitions if a < x[0] <= b]
    return e


def _cause(ev: RunEvidence, slo: str, cls: str, pool: str, e: dict) -> str:
    if (e["fallback_share_of_slow"] >= 0.5 or
            (slo == "served_fraction" and e["rejected_in_window"].get("circuit_breaker", 0) >= 1)):
        return "overload_action"
    if e["first_route"] != pool and e.get("spilled_in_window", 0) > 0:
        return "placement_spill"
    if e["preempted_share_of_slow"] >= 0.3:
        return "kv_preemption"
    if e.get("autoscaler", "fixed") != "fixed":
        if e.get("starting_at_window_start", 0) > 0 and (e.get("instances_starting_mean_in_window") or 0) >= 1 \
                and not e["scale_downs_before_and_in_window"]:
            return "cold_start"
        n_prev, n_min = e.get("instances_max_before"), e.get("instances_min_in_window")
        rate_b, rate_w = e["pool_arrivals_per_s_before"], e["pool_arrivals_per_s_in_window"]
        shrank = n_prev is not None and n_min is not None and n_min < n_prev and (rate_b is None or rate_w >= rate_b)
        if shrank or (e["scale_ups_in_window"] and n_min is not None and n_min < e["max_instances"]):
            return "autoscaler_lag"
    share = e.get("queueing_share_of_ttft")
    if slo != "tpot_p99" and share is not None and share >= 0.5:
        return "queueing"
    return "step_time" if slo != "served_fraction" else "queueing"


def _try(ev: RunEvidence, cause: str, cls: str, pool: str, e: dict) -> list[str]:
    """Knobs to test next: concrete Hydra overrides, then `sim.plan` dimensions."""
    facts = ev.pools.get(pool)
    lo = facts.min_instances if facts else 1
    hi = facts.max_instances if facts else 1
    pp = f"scenario.pools.{pool}"
    if cause == "autoscaler_lag":
        n = min(hi, e.get("instances_max_before") or hi)
        par = facts.autoscaler_params if facts else {}
        out = [f"{pp}.min_instances={n}"]
        if "cooldown_s" in par:
            out.append(f"{pp}.autoscaler.cooldown_s={max(par['cooldown_s'] / 3, par.get('interval_s', 1)):g}")
        if "step" in par:
            out.append(f"{pp}.autoscaler.step={2 * int(par['step'])}")
        step = max(1, (hi - lo) // 6)
        out.append(f"search.{pp}.min_instances=range({lo},{hi + 1},{step})")
        return out
    if cause == "cold_start":
        n = min(hi, (e.get("instances_at_window_start") or lo) + max(1, e.get("starting_at_window_start", 1)))
        return [f"{pp}.min_instances={n}", f"{pp}.cold_start.chunked_loading=true",
                f"search.{pp}.min_instances=range({lo},{hi + 1},{max(1, (hi - lo) // 6)})"]
    if cause == "placement_spill":
        first = e["first_route"]
        ff = ev.pools.get(first)
        out = []
        if ff is not None:
            out.append(f"scenario.pools.{first}.min_instances={ff.max_instances}" if ff.autoscaler != "fixed"
                       else f"scenario.pools.{first}.instances={2 * ff.instances}")
        if ev.spill_queue_per_instance is not None:
            out.append(f"scenario.placement.spill_queue_per_instance={2 * float(ev.spill_queue_per_instance):g}")
        if ff is not None:
            key = "min_instances" if ff.autoscaler != "fixed" else "instances"
            top = ff.max_instances if key == "min_instances" else 2 * ff.instances
            out.append(f"search.scenario.pools.{first}.{key}=range({ff.min_instances},{top + 1},"
                       f"{max(1, (top - ff.min_instances) // 6)})")
        return out
    if cause == "overload_action":
        fb = ev.fallback_pool or pool
        return [f"scenario.pools.{fb}.min_instances={hi}", "scenario.overload.fallback_tpot_p99_s=0.1",
                "search.scenario.overload.enabled=[true,false]"]
    if cause == "kv_preemption":
        seqs = int(ev.batching.get("max_num_seqs", 256))
        return [f"{pp}.kv_dtype=fp8", f"batching.max_num_seqs={max(1, seqs // 2)}",
                f"{pp}.gpu_memory_utilization=0.95", f"search.batching.max_num_seqs=[{max(1, seqs // 4)},"
                f"{max(1, seqs // 2)},{seqs}]"]
    count = "max_instances" if facts and facts.autoscaler != "fixed" else "instances"
    now = (facts.max_instances if count == "max_instances" else facts.instances) if facts else 1
    grow = f"{pp}.{count}={int(math.ceil(now * 1.5))}"
    dim = f"search.{pp}.{count}=range({now},{2 * now + 1},{max(1, now // 4)})"
    if cause == "queueing":
        return [grow, dim]
    seqs = int(ev.batching.get("max_num_seqs", 256))
    return [grow, f"batching.max_num_seqs={max(1, seqs // 2)}", dim,
            f"search.batching.max_num_seqs=[{max(1, seqs // 4)},{max(1, seqs // 2)},{seqs}]"]
