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
   `queueing` (TTFT and served fraction: queueing, estimated by Little's law from the sampled queue, is at least
   half of the mean TTFT),
   `step_time` (TTFT and TPOT: the iterations are slow because the batches are large: at least 8 requests
   running per instance on average in the window),
   `prefill_interference` (TPOT, on an iteration-level scheduler: at least half of the slow requests decoded while
   another request's prefill ran on their instance, the decodes that met none are within the target, and those
   that met one are slower: a decode in the same iteration as a prompt waits for the whole prompt),
   `queueing` again for the served fraction where a queue existed (at least 1 queued per instance, or
   `queue_full` rejections), else `undiagnosed`: no cause is named and no knob suggested.
3. **evidence**: the numbers behind the cause; **try**: Hydra overrides, then `sim.plan` dimensions (`search.`
   plus the same key) to test. A knob is listed only where the run's configuration and evidence show it changes
   this run: no value it already has, no limit the run never reached (max_num_seqs is halved only where the
   running requests per instance exceeded the halved limit), no key that does not reach the pool (an engine
   preset's settings replace the batching group's; a fixed KV capacity ignores the KV dtype).

A run that stopped before its end (a signal: `summary.json` `status: interrupted`) gets one note instead: its
windows may be cut short and its unfinished requests never had a chance to finish, so it names no cause and no
knob.

The thresholds (30% preempted, half of TTFT queueing, half of the slow requests, 8 running per instance, 1
queued per instance) are stated choices of this module, not measurements: they only pick which of the measured
facts to lead with; every finding carries all of its window's numbers. 8 running per instance is "well above 1":
below it a decode step is mostly the weights being read once per iteration, so the batch is not what makes the
step slow; the prefill evidence covers the few-requests case.
"""
from __future__ import annotations

import math

import numpy as np

from sim.review.evidence import RunEvidence
from sim.review.verdict import badness, missed

CAUSES = ("queueing", "step_time", "prefill_interference", "kv_preemption", "autoscaler_lag", "cold_start",
          "overload_action", "placement_spill", "undiagnosed")
PREEMPTED_SHARE_OF_SLOW = 0.3       # kv_preemption: share of the slow requests preempted at least once
QUEUEING_SHARE_OF_TTFT = 0.5        # queueing: Little's-law wait over the mean TTFT
LARGE_BATCH_RUNNING_PER_INSTANCE = 8.0  # step_time: mean running requests per instance in the window
PREFILL_SHARE_OF_SLOW = 0.5         # prefill_interference: slow decodes that met another request's prefill
QUEUED_PER_INSTANCE = 1.0           # served-fraction queueing: mean queued requests per instance

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
    """The findings for the missed verdicts `records` (empty when every SLO is met); for a run that stopped
    before its end, one note that says so instead."""
    rows = missed(records)
    if ev.partial:
        return [_partial_note(rows, ev)] if rows else []
    return [_finding(row, ev) for row in rows[:MAX_FINDINGS]]


def _partial_note(rows: list[dict], ev: RunEvidence) -> dict:
    """The single finding of a stopped run: what missed over what was simulated, no cause, no knob."""
    unfinished = int((ev.requests["status"] == "unfinished").sum())
    return {"slo": None, "class": "all", "pool": "all", "window_s": [0.0, ev.duration_s], "cause": None,
            "severity": None, "partial": True,
            "evidence": {"simulated_until_s": _r(ev.duration_s, 1), "requests_unfinished": unfinished,
                         "missed_verdicts": [f"{r['slo']} {r['class']}@{r['pool']}" for r in rows]},
            "try": []}


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
    if slo == "tpot_p99" and values is not None:
        e.update(_prefill_evidence(cols, pool, a, b, in_win & done & np.isfinite(values), slow, values))
    e = {"achieved_in_window": _r(worst, 4), "target": row["target"], "achieved_over_run": _r(row["achieved"], 4),
         **e}
    cause = _cause(ev, slo, pool, e)
    return {"slo": slo, "class": cls, "pool": pool, "window_s": [a, b], "cause": cause,
            "severity": _r(badness(row), 3), "evidence": e, "try": _try(ev, cause, pool, e)}


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
                  "instances_max_in_window": int(act_win.max()) if act_win.size else None,
                  "instances_at_window_end": int(act_win[-1]) if act_win.size else None,
                  "instances_starting_mean_in_window": _r(_mean(s["starting"][w]), 2),
                  "queued_per_instance": _r(queued_mean / active_mean if active_mean else math.nan, 2),
                  "running_per_instance": _r(running_mean / active_mean if active_mean else math.nan, 1),
                  "running_per_instance_max": _r(_per_instance_max(s["running"][w], s["active"][w]), 1),
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


def _per_instance_max(running: np.ndarray, active: np.ndarray) -> float:
    """The largest sampled running/active: at that sample at least one instance held that many (or more)."""
    ok = active > 0
    return float((running[ok] / active[ok]).max()) if ok.any() else math.nan


def _prefill_evidence(cols, pool: str, a: float, b: float, decoding: np.ndarray, slow: np.ndarray,
                      tpot: np.ndarray) -> dict:
    """How the window's decodes (`decoding`: completed, with a TPOT) shared their instance with other requests'
    prefills: the share of the slow ones that met at least one, the prompt tokens they met, and the TPOT P50 of
    the decodes that met one against those that met none (in the window, else over the run). Prompts prefilled
    on the pool in the window: their uncached tokens (the chunk-size knob changes only prompts longer than its
    budget)."""
    if "instance" not in cols or "prompt_tokens" not in cols:
        return {}
    idx = np.flatnonzero(decoding)
    met, tokens = _prefills_beside(cols, pool, idx)
    beside, is_slow, t = met > 0, slow[idx], tpot[idx]
    alone = float(np.median(t[~beside])) if (~beside).any() else _undisturbed_tpot_p50_s(cols, pool, tpot)
    first = cols["first_token_s"]
    with np.errstate(invalid="ignore"):
        prefilled = _prefilled_here(cols, pool) & (first > a) & (first <= b)
    prompt = _uncached_tokens(cols)[prefilled]
    return {"slow_beside_prefill_share": _r(float(beside[is_slow].mean()) if is_slow.any() else math.nan, 3),
            "prefill_tokens_beside_slow_p50": _r(float(np.median(tokens[is_slow])) if is_slow.any() else math.nan, 0),
            "tpot_p50_s_beside_prefill": _r(float(np.median(t[beside])) if beside.any() else math.nan, 4),
            "tpot_p50_s_without_prefill": _r(alone, 4),
            "prefill_prompt_tokens_p50_in_window": _r(float(np.median(prompt)) if prompt.size else math.nan, 0),
            "prefill_prompt_tokens_max_in_window": int(prompt.max()) if prompt.size else None}


def _undisturbed_tpot_p50_s(cols, pool: str, tpot: np.ndarray) -> float:
    """The TPOT P50 of the pool's decodes over the whole run that met no prefill (a window where every decode
    met one has none of its own to compare with)."""
    idx = np.flatnonzero((cols["pool"] == pool) & (cols["status"] == "completed") & np.isfinite(tpot))
    met, _ = _prefills_beside(cols, pool, idx)
    alone = tpot[idx][met == 0]
    return float(np.median(alone)) if alone.size else math.nan


def _uncached_tokens(cols) -> np.ndarray:
    prompt = np.asarray(cols["prompt_tokens"], dtype=np.float64)
    return prompt - cols["cached_tokens"] if "cached_tokens" in cols else prompt


def _prefilled_here(cols, pool: str) -> np.ndarray:
    """Requests whose prompt was prefilled on `pool` (a disaggregated request's first token comes from its
    prefill pool, not from the instance it decodes on)."""
    here = (cols["pool"] == pool) & np.isfinite(cols["first_token_s"])
    if "prefill_pool" in cols:
        here &= (cols["prefill_pool"] == "") | (cols["prefill_pool"] == pool)
    return here


def _prefills_beside(cols, pool: str, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each request in `idx`: how many other requests' prefills ended on its instance after its own first
    token and up to its last (each in an iteration that also carried its decode), and their uncached prompt
    tokens. A prefill is placed at its request's first token: the end of its (last) prefill iteration."""
    inst, first, fin = np.asarray(cols["instance"]), cols["first_token_s"], cols["finish_s"]
    src = np.flatnonzero(_prefilled_here(cols, pool))
    src = src[np.lexsort((first[src], inst[src]))]   # by instance, then by first token
    s_inst, s_t = inst[src], first[src]
    cum = np.concatenate(([0.0], np.cumsum(_uncached_tokens(cols)[src])))
    met, tokens = np.zeros(idx.size, dtype=np.int64), np.zeros(idx.size)
    mine = inst[idx]
    for i in np.unique(mine):
        lo_i, hi_i = np.searchsorted(s_inst, i, "left"), np.searchsorted(s_inst, i, "right")
        seg, m = s_t[lo_i:hi_i], mine == i
        # (side "right" at the first token: its own prefill, and any in that same iteration, are not beside
        # its decode; at the finish: the iteration of its last token counts)
        lo = lo_i + np.searchsorted(seg, first[idx[m]], "right")
        hi = np.maximum(lo, lo_i + np.searchsorted(seg, fin[idx[m]], "right"))
        met[m], tokens[m] = hi - lo, cum[hi] - cum[lo]
    return met, tokens


def _cause(ev: RunEvidence, slo: str, pool: str, e: dict) -> str:
    if (e["fallback_share_of_slow"] >= 0.5 or
            (slo == "served_fraction" and e["rejected_in_window"].get("circuit_breaker", 0) >= 1)):
        return "overload_action"
    if e["first_route"] != pool and e.get("spilled_in_window", 0) > 0:
        return "placement_spill"
    if e["preempted_share_of_slow"] >= PREEMPTED_SHARE_OF_SLOW:
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
    if slo != "tpot_p99" and share is not None and share >= QUEUEING_SHARE_OF_TTFT:
        return "queueing"
    if slo != "served_fraction" and (e.get("running_per_instance") or 0) >= LARGE_BATCH_RUNNING_PER_INSTANCE:
        return "step_time"
    if slo == "tpot_p99" and _prefill_interference(ev.pools.get(pool), e):
        return "prefill_interference"
    if slo == "served_fraction" and ((e.get("queued_per_instance") or 0) >= QUEUED_PER_INSTANCE
                                     or e["rejected_in_window"].get("queue_full", 0) > 0):
        return "queueing"
    return "undiagnosed"


def _prefill_interference(facts, e: dict) -> bool:
    """Most slow decodes met a prefill on their instance, the decodes that met none are within the target (the
    window's, else the run's on the pool), and meeting one made decodes slower. Only where a decode can share an
    iteration with a prompt: an iteration-level scheduler on a pool that prefills (a decode-role pool gets its
    prompts' KV from elsewhere)."""
    if facts is None or facts.batching.chunked_prefill is None or facts.role == "decode":
        return False
    share = e.get("slow_beside_prefill_share")
    beside, alone = e.get("tpot_p50_s_beside_prefill"), e.get("tpot_p50_s_without_prefill")
    if share is None or share < PREFILL_SHARE_OF_SLOW or alone is None or alone > e["target"]:
        return False   # (undisturbed decodes over the target: the step itself is too slow, prefills aside)
    return beside is None or beside > alone


def _try(ev: RunEvidence, cause: str, pool: str, e: dict) -> list[str]:
    """Knobs to test next, each one that changes this run (module docstring): Hydra overrides, then `sim.plan`
    dimensions."""
    facts = ev.pools.get(pool)
    knobs = {"autoscaler_lag": _try_autoscaler_lag, "cold_start": _try_cold_start,
             "placement_spill": _try_placement_spill, "overload_action": _try_overload_action,
             "kv_preemption": _try_kv_preemption, "queueing": _try_queueing, "step_time": _try_step_time,
             "prefill_interference": _try_prefill_interference}.get(cause)
    if knobs is None or facts is None:
        return []
    out = list(dict.fromkeys(knobs(ev, facts, pool, e)))
    return sorted(out, key=lambda k: k.startswith("search."))  # (stable: overrides first, each in its order)


def _floor_range(facts) -> str:
    lo, hi = facts.min_instances, facts.max_instances
    return f"range({lo},{hi + 1},{max(1, (hi - lo) // 6)})"


def _try_autoscaler_lag(ev: RunEvidence, facts, pool: str, e: dict) -> list[str]:
    pp, par = f"scenario.pools.{pool}", facts.autoscaler_params
    out = []
    n = min(facts.max_instances, e.get("instances_max_before") or facts.max_instances)
    if n > facts.min_instances:
        out.append(f"{pp}.min_instances={n}")
    if "cooldown_s" in par:
        shorter = max(par["cooldown_s"] / 3, par.get("interval_s", 1))
        if shorter < par["cooldown_s"]:
            out.append(f"{pp}.autoscaler.cooldown_s={shorter:g}")
    if "step" in par:
        out.append(f"{pp}.autoscaler.step={2 * int(par['step'])}")
    if facts.max_instances > facts.min_instances:
        out.append(f"search.{pp}.min_instances={_floor_range(facts)}")
    return out


def _try_cold_start(ev: RunEvidence, facts, pool: str, e: dict) -> list[str]:
    pp, out = f"scenario.pools.{pool}", []
    n = min(facts.max_instances, (e.get("instances_at_window_start") or facts.min_instances)
            + max(1, e.get("starting_at_window_start", 1)))
    if n > facts.min_instances:
        out.append(f"{pp}.min_instances={n}")
    if facts.chunked_loading is False:
        out.append(f"{pp}.cold_start.chunked_loading=true")
    if facts.max_instances > facts.min_instances:
        out.append(f"search.{pp}.min_instances={_floor_range(facts)}")
    return out


def _try_placement_spill(ev: RunEvidence, facts, pool: str, e: dict) -> list[str]:
    first = e["first_route"]
    ff, out = ev.pools.get(first), []
    if ff is not None:
        out += _more_instances(first, ff, None)
    if ev.spill_queue_per_instance is not None:
        out.append(f"scenario.placement.spill_queue_per_instance={2 * float(ev.spill_queue_per_instance):g}")
    return out


def _try_overload_action(ev: RunEvidence, facts, pool: str, e: dict) -> list[str]:
    fb = ev.fallback_pool or pool
    ff, out = ev.pools.get(fb), []
    if ff is not None:
        out += _more_instances(fb, ff, None)
    if ev.overload_fallback_tpot_p99_s is not None:
        out.append(f"scenario.overload.fallback_tpot_p99_s={1.5 * ev.overload_fallback_tpot_p99_s:g}")
    return out + ["search.scenario.overload.enabled=[true,false]"]


def _try_kv_preemption(ev: RunEvidence, facts, pool: str, e: dict) -> list[str]:
    pp, out = f"scenario.pools.{pool}", []
    if facts.num_gpu_blocks_override is not None:  # a fixed block count: only a larger one adds KV room
        out.append(f"++{pp}.num_gpu_blocks_override={2 * int(facts.num_gpu_blocks_override)}")
    else:
        if facts.kv_dtype in ("bf16", "fp16"):
            out.append(f"{pp}.kv_dtype=fp8")
        if facts.gpu_memory_utilization is not None and facts.gpu_memory_utilization < 0.95:
            out.append(f"{pp}.gpu_memory_utilization=0.95")
    return out + _fewer_seqs(facts, e)


def _try_queueing(ev: RunEvidence, facts, pool: str, e: dict) -> list[str]:
    return _more_instances(pool, facts, e)


def _try_step_time(ev: RunEvidence, facts, pool: str, e: dict) -> list[str]:
    return _more_instances(pool, facts, e) + _fewer_seqs(facts, e)


def _try_prefill_interference(ev: RunEvidence, facts, pool: str, e: dict) -> list[str]:
    """Chunked prefill where it is off, and half the token budget where it is on: each only where some prompt
    prefilled in the window is longer than the budget it would run with (a shorter one is never split)."""
    bf = facts.batching
    longest = e.get("prefill_prompt_tokens_max_in_window") or 0
    if not bf.chunked_prefill:
        if bf.chunk_on and bf.chunk_budget_tokens and longest > bf.chunk_budget_tokens:
            return [bf.chunk_on, bf.chunk_search]
        return []
    b = bf.token_budget
    if bf.budget_key and b and b >= 2 and longest > b // 2:
        return [f"{bf.budget_key}={b // 2}", f"search.{bf.budget_key}=[{max(1, b // 4)},{b // 2},{b}]"]
    return []


def _more_instances(pool: str, facts, e: dict | None) -> list[str]:
    """More capacity: a fixed pool's count; an autoscaled pool's ceiling where it reached it in the window, else
    its floor above the fewest instances it had there (a ceiling it never reached changes nothing). `e` None:
    the pool is not the window's own (its floor is raised to its ceiling)."""
    pp = f"scenario.pools.{pool}"
    if facts.autoscaler == "fixed":
        n = facts.instances
        return [f"{pp}.instances={int(math.ceil(n * 1.5)) if e is not None else 2 * n}",
                f"search.{pp}.instances=range({n},{2 * n + 1},{max(1, n // 4)})"]
    lo, hi = facts.min_instances, facts.max_instances
    if e is None:
        return ([f"{pp}.min_instances={hi}", f"search.{pp}.min_instances={_floor_range(facts)}"] if hi > lo else [])
    top = e.get("instances_max_in_window")
    if top is not None and top >= hi:
        return [f"{pp}.max_instances={int(math.ceil(hi * 1.5))}",
                f"search.{pp}.max_instances=range({hi},{2 * hi + 1},{max(1, hi // 4)})"]
    floor = min(hi, int(math.ceil(1.5 * (e.get("instances_min_in_window") or lo))))
    return [f"{pp}.min_instances={floor}", f"search.{pp}.min_instances={_floor_range(facts)}"] if floor > lo else []


def _fewer_seqs(facts, e: dict) -> list[str]:
    """Half the running-sequence limit, only where the running requests per instance exceeded that half in the
    window (below it the halved limit never binds)."""
    bf = facts.batching
    top = e.get("running_per_instance_max")
    if bf.seqs_key is None or not bf.max_num_seqs or top is None or top <= bf.max_num_seqs // 2:
        return []
    seqs, half = bf.max_num_seqs, max(1, bf.max_num_seqs // 2)
    return [f"{bf.seqs_key}={half}", f"search.{bf.seqs_key}=[{max(1, seqs // 4)},{half},{seqs}]"]
