"""The day plan end to end: the scenario's day of traffic -> per-unit capacity from the cost model -> units per
window (capacity arithmetic) -> each selected window simulated, a unit added where a target is missed and the
window re-run (rounds, windows in parallel) -> day figures -> `day_plan.json`.

The arithmetic count is a lower bound (fewer units would run above their capacity at the window's mean demand),
so the first count upwards from it that meets the SLOs in simulation is the fewest found.
"""
from __future__ import annotations

import dataclasses
import json
import math
import shutil
import time
from datetime import datetime
from dataclasses import asdict
from pathlib import Path

from omegaconf import OmegaConf

from sim.compose import compose_config
from sim.config import load_run_config
from sim.plan.cache import config_hash
from sim.plan.day.capacity import unit_capacity, units_needed
from sim.plan.day.options import DayOptions
from sim.plan.day.report import day_figures, write_plan
from sim.plan.day.traffic import day_curve, request_stats
from sim.plan.day.verify import fleet_slice, measure, next_slice, span, window_overrides
from sim.plan.executors import Task, make_executor


def _pool_names(run) -> tuple[str, str]:
    roles = {p.role: name for name, p in run.pools.items()}
    return roles["prefill"], roles["decode"]


def plan_windows(run, traffic: dict, opts: DayOptions):
    """(curve, stats, capacity, windows): every window's traffic and its arithmetic unit counts."""
    curve = day_curve(traffic)
    stats = request_stats(traffic, run.seed, opts.sample_s)
    cap = unit_capacity(run, stats)
    windows = []
    for i in range(math.ceil(curve.duration_s / opts.window_s - 1e-9)):
        start = i * opts.window_s
        length = min(opts.window_s, curve.duration_s - start)
        conv = curve.window_mean_per_s(start, length)
        req = conv * stats.requests_per_conversation
        p, d = units_needed(cap, stats, req)
        windows.append({"index": i, "start_s": start, "length_s": length, "conversations_per_s": conv,
                        "requests_per_s": req, "requests": req * length,
                        "arithmetic": {"prefill_units": p, "decode_units": d}, "prefill_units": p,
                        "decode_units": d, "verified": False, "rounds": []})
    return curve, stats, cap, windows


def verify_windows(base: tuple[str, ...], run, windows: list[dict], opts: DayOptions, out: Path, log,
                   expected_requests) -> dict:
    """Simulate the selected windows in rounds (all open windows of a round at once); returns the executor's
    description. `expected_requests(span)` is the requests a whole-fleet run of a span would hold."""
    prefill_pool, decode_pool = _pool_names(run)
    slo = {"ttft_p99_s": run.slo.ttft_p99_s, "tpot_p99_s": run.slo.tpot_p99_s,
           "served_fraction": run.slo.served_fraction}
    day_rate = float(OmegaConf.select(compose_config(list(base)), "scenario.traffic.session_arrivals.mean_rate_per_s"))
    todo = [w for w in windows if w["index"] in set(opts.selected(len(windows)))]
    slices = {}
    for w in todo:
        sp = span(w["index"], opts.window_s, opts.warmup_s, opts.measure_s)
        slices[w["index"]] = fleet_slice(w["prefill_units"], w["decode_units"], expected_requests(sp),
                                         opts.max_requests_per_run)
    executor = make_executor(opts.ray_address, opts.jobs)
    described = {"backend": executor.backend, "workers": executor.workers, "round_wall_s": []}
    try:
        for round_ in range(opts.max_rounds):
            if not todo:
                break
            tasks, spans = [], {}
            for w in todo:
                sp, sl = span(w["index"], opts.window_s, opts.warmup_s, opts.measure_s), slices[w["index"]]
                ov = (*base, *window_overrides(sp, prefill_pool, decode_pool, sl, day_rate, opts.drain_s))
                config = OmegaConf.to_container(compose_config(list(ov)), resolve=True)
                folder = out / "windows" / f"{w['index']:03d}_p{sl.prefill_units}_d{sl.decode_units}"
                shutil.rmtree(folder, ignore_errors=True)
                tasks.append(Task(config_hash(config), config, ov, str(folder)))
                spans[str(folder)] = (w, sp, sl)
            started = time.perf_counter()
            for task, outcome in executor.run(tasks):
                w, sp, sl = spans[task.out_dir]
                w["prefill_units"], w["decode_units"] = sl.fleet_units()
                entry = {"prefill_units": w["prefill_units"], "decode_units": w["decode_units"],
                         "slice": asdict(sl), "run_dir": task.out_dir}
                if "error" in outcome:
                    entry["error"] = outcome["error"]
                else:
                    m = measure(Path(task.out_dir), sp, slo)
                    entry.update(m.to_json(), wall_s=outcome["summary"].get("wall_time_s"),
                                 simulated_s=outcome["summary"].get("simulated_duration_s"))
                    w["measured"] = m.to_json()
                    w["verified"] = all(m.met.values())
                    if not w["verified"]:
                        slices[w["index"]] = next_slice(sl, m)
                        w["prefill_units"], w["decode_units"] = slices[w["index"]].fleet_units()
                w["rounds"].append(entry)
                log(json.dumps({"window": w["index"], "round": round_, **entry}, sort_keys=True))
            described["round_wall_s"].append(time.perf_counter() - started)
            todo = [w for w in todo if not w["verified"] and "error" not in w["rounds"][-1]]
    finally:
        executor.close()
    return described


def plan_day(opts: DayOptions, overrides: tuple[str, ...], command: str, echo=print) -> tuple[dict, Path]:
    base = (*overrides, "metrics.progress=false")
    cfg = compose_config(list(base))
    run = load_run_config(cfg)
    traffic = OmegaConf.to_container(cfg.scenario.traffic, resolve=True)
    out = Path(opts.out_dir or f"plans/{run.scenario.name}/day_{datetime.now():%Y-%m-%d_%H-%M-%S}")
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    curve, stats, cap, windows = plan_windows(run, traffic, opts)
    if opts.warmup_s is None:   # long enough for 99% of a conversation's turns: the KV cache is warm
        opts = dataclasses.replace(opts, warmup_s=stats.warmup_s(0.99))
    warm = sum(stats.warm_hit_share(opts.warmup_s + opts.measure_s * (k + 0.5) / 10) for k in range(10)) / 10
    with open(out / "windows.jsonl", "w") as stream:   # each window's run as it finishes
        def log(line: str) -> None:
            stream.write(line + "\n")
            stream.flush()
        def expected_requests(sp) -> float:
            return curve.window_mean_per_s(sp.sim_start_s, sp.sim_s) * sp.sim_s * stats.requests_per_conversation
        executor = verify_windows(base, run, windows, opts, out, log, expected_requests)
    doc = {"command": command, "scenario": run.scenario.name, "seed": run.seed,
           "options": {k: v for k, v in vars(opts).items()}, "slo": {
               "ttft_p99_s": run.slo.ttft_p99_s, "tpot_p99_s": run.slo.tpot_p99_s,
               "served_fraction": run.slo.served_fraction},
           "traffic": {"conversations_per_s_day_mean": curve.day_mean_per_s, **{
               k: v for k, v in vars(stats).items() if not hasattr(v, "shape")}, "cache_hit_share": stats.hit_share,
               "cache_hit_share_after_warmup": warm,
               "requests_per_day": curve.day_mean_per_s * curve.duration_s * stats.requests_per_conversation},
           "unit_capacity": cap.to_json(), "executor": executor,
           "day": day_figures(windows, stats, cap), "windows": windows,
           "wall_s": time.perf_counter() - started}
    return doc, write_plan(doc, out)
