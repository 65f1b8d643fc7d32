"""Fixture factory: result folders written per `docs/results.md`, good and broken, for the dashboard tests.

`build_results(base)` lays out, under `base`:
    runs/smoke/<6 runs>     two good runs (2 and 3 instances), one half-written (no DONE, newest), one with a
                            corrupt timeseries.parquet, one partial (interrupted at 300 s, 1 instance, its summary
                            still holding a diagnosis), one with 1 instance that misses TTFT P99 (oldest)
    multirun/2026-11-30/09-00-00/   a sweep over 1..4 instances: jobs 0..3 and sweep.parquet
    plans/ecommerce/        plan.json beside a sweep.parquet pointing at the sweep's jobs
    runs/calibrate/h100_sxm/ measurements.parquet and fit.json;  runs/validate/a100/validation.json
    calibrate/profiles/h100_sxm.parquet   a profile with provenance metadata
    conf/router/*.yaml, conf/batching/*.yaml   policy choices for the What-if page
    empty/                  an empty results folder
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from inferplan.labels import Labels
from sim.config import SloConfig
from sim.results.schema import SCHEMA_VERSION
from sim.results.result import nan_to_none
from sim.review.diagnosis import diagnose
from sim.review.evidence import PoolFacts, RunEvidence
from sim.review.verdict import verdicts

REPO = Path(__file__).resolve().parents[2]
APP = REPO / "dashboard" / "streamlit_app.py"
SLO = {"ttft_p99_s": 2.0, "tpot_p99_s": 0.1, "served_fraction": 0.99}
USD_PER_INSTANCE_HOUR = 2.99
PEAKS = {"flops_per_s": {"bf16": 989.4e12, "fp8": 1978.9e12}, "mem_bytes_per_s": 3.35e12}


def _pct(x: np.ndarray, q: float) -> float:
    x = x[~np.isnan(x)]
    return float(np.quantile(x, q)) if len(x) else float("nan")


def make_run(path: Path, *, instances: int = 2, n: int = 2000, duration_s: float = 600.0, seed: int = 0,
             scenario: str = "smoke", done: bool = True, pools: tuple[str, ...] = ("main",),
             autoscaler: str | None = None, run_status: str = "completed") -> dict:
    """Write a consistent run folder; more instances means lower latency and higher cost. Returns the summary.
    With `autoscaler`, each pool's config names it with limits `min_instances: 1`, `max_instances: 2 x instances`.
    `run_status="interrupted"` is a run a signal stopped at `duration_s`, arrivals up to then, so requests are left in
    flight."""
    rng = np.random.default_rng(seed + 7 * instances)
    path.mkdir(parents=True, exist_ok=True)
    drain_s = 0.0 if run_status == "interrupted" else 60.0  # a stopped run is cut mid-traffic: many in flight
    arrival = np.sort(rng.uniform(0, duration_s - drain_s, n))  # a finished run's last minute drains: few unfinished
    prompt = np.maximum(1, rng.lognormal(6.0, 0.8, n)).astype(np.int64)
    output = np.maximum(1, rng.lognormal(4.5, 0.7, n)).astype(np.int64)
    load = 2.0 / instances  # latency grows as the fleet shrinks
    ttft = rng.lognormal(np.log(0.3 * load ** 1.5), 0.6, n)  # 1 instance: P99 about 3.4 s, over the 2 s SLO
    tpot = rng.lognormal(np.log(0.025 * load), 0.3, n)
    status = np.full(n, "completed", dtype=object)
    reason = np.full(n, "", dtype=object)
    rejected = rng.random(n) < 0.01 / instances
    status[rejected], reason[rejected] = "rejected", "queue_full"
    reason[rejected & (rng.random(n) < 0.3)] = "too_long"
    first = arrival + ttft
    finish = first + tpot * (output - 1)
    status[(status == "completed") & (finish > duration_s)] = "unfinished"
    first[status == "rejected"] = np.nan
    finish[status != "completed"] = np.nan
    first[(status == "unfinished") & (first > duration_s)] = np.nan
    ttft_col = first - arrival
    tpot_col = np.where(output > 1, (finish - first) / np.maximum(output - 1, 1), np.nan)
    pool = np.where(status == "rejected", "", pools[0]).astype(object)
    requests = pd.DataFrame({
        "request_id": np.arange(n, dtype=np.int64), "arrival_s": arrival, "prompt_tokens": prompt,
        "output_tokens": output, "cached_tokens": np.zeros(n, dtype=np.int64), "request_class": "default",
        "pool": pool, "instance": np.where(status == "rejected", -1, rng.integers(0, instances, n)).astype(np.int32),
        "status": status.astype(str), "reject_reason": reason.astype(str), "first_token_s": first,
        "finish_s": finish, "ttft_s": ttft_col, "tpot_s": tpot_col, "e2e_s": finish - arrival,
        "preemptions": np.zeros(n, dtype=np.int32)})
    pq.write_table(pa.Table.from_pandas(requests, preserve_index=False), path / "requests.parquet")

    t = np.arange(1.0, duration_s + 1.0)
    arrivals = np.histogram(arrival, bins=np.arange(0.0, duration_s + 1.0))[0]
    completions = np.histogram(finish[~np.isnan(finish)], bins=np.arange(0.0, duration_s + 1.0))[0]
    running = np.clip(rng.normal(20 * load, 3, len(t)), 0, None).round()
    queued = np.clip(rng.normal(3 * load, 2, len(t)), 0, None).round()
    starting = (t < 60).astype(float)  # one instance warming up for the first minute
    ts = pd.DataFrame({
        "t_s": t, "arrivals": arrivals, "completions": completions, "queued": queued, "running": running,
        "instances": np.full(len(t), float(instances)) - starting, "kv_utilization": np.clip(0.3 * load + 0.05 *
        np.sin(t / 50), 0, 1), "busy_fraction": np.clip(0.5 * load, 0, 1),
        "cost_usd": t / 3600 * instances * USD_PER_INSTANCE_HOUR, "ttft_p99_s": np.nan, "tpot_p99_s": np.nan})
    pq.write_table(pa.Table.from_pandas(ts, preserve_index=False), path / "timeseries.parquet")
    pools_df = pd.concat([pd.DataFrame({
        "t_s": t, "pool": p, "starting": starting, "active": instances - starting, "draining": np.zeros(len(t)),
        "queued": queued, "running": running, "kv_utilization": ts["kv_utilization"],
        "busy_fraction": ts["busy_fraction"]}) for p in pools], ignore_index=True)
    pq.write_table(pa.Table.from_pandas(pools_df, preserve_index=False), path / "pools.parquet")

    done_mask = status == "completed"
    counts = {s: int((status == s).sum()) for s in ("completed", "rejected", "unfinished")}
    by_reason = {r: int((reason == r).sum()) for r in ("queue_full", "too_long") if (reason == r).any()}
    lat = {m: {"p50": _pct(v, .5), "p90": _pct(v, .9), "p99": _pct(v, .99), "mean": float(np.nanmean(v))}
           for m, v in (("ttft", ttft_col[done_mask]), ("tpot", tpot_col[done_mask]),
                        ("e2e", (finish - arrival)[done_mask]))}
    good = done_mask & (ttft_col <= SLO["ttft_p99_s"]) & ~(tpot_col > SLO["tpot_p99_s"])
    usd = duration_s / 3600 * instances * USD_PER_INSTANCE_HOUR
    out_tokens = int(output[done_mask].sum())
    summary = {
        "schema_version": SCHEMA_VERSION, "status": run_status, "scenario": scenario, "seed": seed, "simulated_duration_s": duration_s, "wall_time_s": 1.5 * instances,
        "requests": {"arrived": n, **counts, "rejected_by_reason": by_reason},
        "latency_s": lat,
        "throughput": {"requests_per_s": counts["completed"] / duration_s,
                       "input_tokens_per_s": float(prompt[done_mask].sum()) / duration_s,
                       "output_tokens_per_s": out_tokens / duration_s},
        "slo": {**SLO, "attainment": float(good.sum()) / n, "goodput_requests_per_s": float(good.sum()) / duration_s,
                "met": {"ttft_p99": lat["ttft"]["p99"] <= SLO["ttft_p99_s"],
                        "tpot_p99": lat["tpot"]["p99"] <= SLO["tpot_p99_s"],
                        "served_fraction": counts["completed"] / n >= SLO["served_fraction"]}},
        "cost": {"usd": usd, "usd_per_million_output_tokens": usd / out_tokens * 1e6,
                 "usd_per_million_input_tokens": usd / float(prompt[done_mask].sum()) * 1e6,
                 "device_hours": duration_s / 3600 * instances, "node_hours": duration_s / 3600 * instances,
                 "usd_per_request": usd / n},
        "pools": {p: {"hardware": "h100_sxm", "model": "llama3_8b", "instances_max": instances,
                      "device_hours": duration_s / 3600 * instances / len(pools),
                      "node_hours": duration_s / 3600 * instances / len(pools), "usd": usd / len(pools),
                      "requests_completed": counts["completed"] // len(pools),
                      "time_breakdown_s": {"attention": 120.0 * load, "dense_gemm": 300.0 * load, "moe_gemm": 0.0,
                                           "communication": 0.0, "overhead": 25.0}} for p in pools},
        "cost_model": {"kind": "analytical", "profile": None, "hardware": "h100_sxm",
                       "note": "roofline over datasheet peaks x documented efficiencies (conf/cost/roofline.yaml)"},
        "invariants": {"request_conservation": "ok", "kv_capacity": "ok", "clock_monotone": "ok", "causality": "ok"},
    }
    summary.update(_review(requests, pools_df, pools, instances, duration_s))
    (path / "summary.json").write_text(json.dumps(nan_to_none(summary), indent=2))
    hydra = path / ".hydra"
    hydra.mkdir(exist_ok=True)
    scaler = (f"        autoscaler: {autoscaler}\n        min_instances: 1\n        max_instances: {2 * instances}\n"
              if autoscaler else "")
    pool_yaml = "".join(f"      {p}:\n        hardware: h100_sxm\n        instances: {instances}\n{scaler}"
                        for p in pools)
    (hydra / "config.yaml").write_text(
        f"scenario:\n  name: {scenario}\n  load_multiplier: 1.0\n  duration_s: {duration_s}\n  fleet:\n    pools:\n"
        f"{pool_yaml}router:\n  name: round_robin\nbatching:\n  name: continuous\nseed: {seed}\n")
    (hydra / "overrides.yaml").write_text(f"- scenario={scenario}\n- scenario.fleet.pools.main.instances={instances}\n")
    (hydra / "hydra.yaml").write_text("hydra:\n  runtime:\n    choices:\n      router: round_robin\n"
                                      "      batching: continuous\n")
    if done:
        (path / "DONE").write_text("")
    return summary


def _review(requests: pd.DataFrame, pools_df: pd.DataFrame, pools, instances: int, duration_s: float) -> dict:
    """`verdict` and `diagnosis` as a real run computes them (sim/review), over these synthetic tables."""
    cols = {k: Labels.of(requests[k].tolist()) if pd.api.types.is_string_dtype(requests[k]) else requests[k].to_numpy()
            for k in requests}  # (strings as the run's Labels)
    n = len(requests)
    cols.update(itl_max_s=cols["tpot_s"] * 2, fallback=np.zeros(n, dtype=bool))
    series = {p: {k: pools_df[pools_df["pool"] == p][k].to_numpy(dtype=float) for k in pools_df if k != "pool"}
              for p in pools}
    facts = {p: PoolFacts("fixed", {}, instances, instances, instances) for p in pools}
    records = verdicts(cols, SloConfig(**SLO))
    ev = RunEvidence(cols, series, facts, {"default": list(pools)}, [], [], None, "static", None, duration_s,
                     {"max_num_seqs": 256})
    return {"verdict": records, "diagnosis": diagnose(records, ev)}


def make_sweep(path: Path, counts=(1, 2, 3, 4)) -> pd.DataFrame:
    """A sweep over instance counts; `sweep.parquet` lacks `slo_met` so the dashboard must read the jobs' verdicts."""
    rows = []
    for job, count in enumerate(counts):
        s = make_run(path / str(job), instances=count, seed=job)
        rows.append({"scenario.fleet.pools.main.instances": count, "batching": "continuous",
                     "ttft_p99_s": s["latency_s"]["ttft"]["p99"], "tpot_p99_s": s["latency_s"]["tpot"]["p99"],
                     "attainment": s["slo"]["attainment"], "usd": s["cost"]["usd"],
                     "usd_per_million_output_tokens": s["cost"]["usd_per_million_output_tokens"],
                     "run_dir": str(job)})
    df = pd.DataFrame(rows)
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), path / "sweep.parquet")
    return df


def make_profile(path: Path, with_metadata: bool = True) -> None:
    rows = [{"op": op, "dtype": dt, "roofline_s": r, "efficiency": e * scale, "launch_s": 4e-6}
            for op, dt, scale in (("gemm", "bf16", 1.0), ("gemm", "fp8_block", 0.8), ("attn_decode", "bf16", 0.6))
            for r, e in ((1e-6, 0.05), (1e-5, 0.3), (1e-4, 0.7), (1e-3, 0.85))]
    table = pa.Table.from_pylist(rows)
    if with_metadata:
        meta = {"schema_version": 1, "hardware": "h100_sxm", "kind": "measured", "device": "NVIDIA H100 80GB HBM3",
                "driver": "550.54", "torch": "2.13.0", "triton": "3.7.1", "date": "2026-11-30",
                "git_commit": "abc1234", "models": ["llama3_8b"], "peaks": PEAKS,
                "fit": {"gemm/bf16": {"knots": 4, "median_abs_error": 0.04}}}
        table = table.replace_schema_metadata({b"inferplan": json.dumps(meta).encode()})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


def make_calibration(folder: Path, drop: tuple[str, ...] = ()) -> pd.DataFrame:
    """measurements.parquet (12 points per curve, every 4th held out; a library baseline for bf16 GEMM that is not
    on the profile) and fit.json with calibrate's nested peaks; `drop` removes columns."""
    rng = np.random.default_rng(3)
    rows = []
    for op, dtype, impl, peak in (("gemm", "bf16", "kernels.gemm", 989.4e12),
                                  ("gemm", "bf16", "torch.matmul", 989.4e12),
                                  ("gemm", "fp8_block", "kernels.gemm_fp8_block", 1978.9e12),
                                  ("attn_decode", "bf16", "kernels.attn_paged_decode", 989.4e12)):
        primary = impl.startswith("kernels.")
        for i, m in enumerate(np.geomspace(1, 8192, 12)):
            flops = 2 * m * 4096 * 4096 if op == "gemm" else 4 * m * 128 * 4096
            bytes_ = 4096 * 4096 * 2 + m * 4096 * 4 if op == "gemm" else m * 4096 * 256
            roof = max(flops / peak, bytes_ / PEAKS["mem_bytes_per_s"])
            measured = roof / 0.7 + 4e-6
            rows.append({"op": op, "dtype": dtype, "impl": impl, "primary": primary,
                         "shape": f"m={int(m)},n=4096,k=4096", "flops": flops, "bytes": bytes_, "roofline_s": roof,
                         "measured_s": measured * rng.uniform(0.95, 1.05) * (1.0 if primary else 1.3),
                         "predicted_s": measured * (1.0 if primary else 1.3), "held_out": i % 4 == 3,
                         "in_profile": primary})
    df = pd.DataFrame(rows).drop(columns=list(drop))
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), folder / "measurements.parquet")
    (folder / "fit.json").write_text(json.dumps({"hardware": "h100_sxm",
                                                 "peaks": {"used": PEAKS, "datasheet": PEAKS, "measured": None},
                                                 "ops": {"gemm/bf16": {"median_abs_error_pct": 2.4}}}))
    return df


def _age(path: Path, seconds_ago: float) -> None:
    t = 1_800_000_000 - seconds_ago
    os.utime(path, (t, t))


def build_results(base: Path) -> dict[str, Path]:
    """The whole fixture tree (see the module docstring); returns the interesting paths by name."""
    runs = base / "runs" / "smoke"
    p = {"base": base, "runs": base / "runs", "multirun": base / "multirun",
         "good": runs / "2026-11-30_11-00-00", "good2": runs / "2026-11-30_10-00-00",
         "half": runs / "2026-11-30_12-00-00", "corrupt": runs / "2026-11-30_09-00-00",
         "missed": runs / "2026-11-30_08-00-00", "partial": runs / "2026-11-30_08-30-00",
         "sweep": base / "multirun" / "2026-11-30" / "09-00-00", "plan": base / "plans" / "ecommerce",
         "calibration": base / "runs" / "calibrate" / "h100_sxm", "profile": base / "calibrate" / "profiles" /
         "h100_sxm.parquet", "validation": base / "runs" / "validate" / "a100", "empty": base / "empty"}
    make_run(p["good"], instances=3, seed=1)
    make_run(p["good2"], instances=2, seed=2)
    make_run(p["half"], instances=2, seed=3, done=False)
    (p["half"] / "summary.json").unlink()  # crashed before the summary
    make_run(p["corrupt"], instances=2, seed=4)
    make_run(p["missed"], instances=1, seed=5)  # TTFT P99 over its target: a diagnosis to show
    make_run(p["partial"], instances=1, seed=6, duration_s=300.0, run_status="interrupted")  # a diagnosis not to show
    raw = (p["corrupt"] / "timeseries.parquet").read_bytes()
    (p["corrupt"] / "timeseries.parquet").write_bytes(raw[: len(raw) // 3])  # truncated mid-write
    sweep = make_sweep(p["sweep"])
    p["plan"].mkdir(parents=True)
    plan_rows = sweep.assign(run_dir=[str(p["sweep"] / d) for d in sweep["run_dir"]])
    pq.write_table(pa.Table.from_pandas(plan_rows, preserve_index=False), p["plan"] / "sweep.parquet")
    (p["plan"] / "plan.json").write_text(json.dumps({
        "scenario": "smoke", "chosen": {"scenario.fleet.pools.main.instances": 2},
        "margin": {"ttft_p99_s": 0.8}, "next_cheaper": {"instances": 1, "fails": "ttft_p99"}}))
    make_calibration(p["calibration"])
    make_profile(p["profile"])
    p["validation"].mkdir(parents=True)
    (p["validation"] / "validation.json").write_text(json.dumps(
        {"ttft_s": {"p50": {"measured": 0.11, "simulated": 0.12, "error_pct": 9.1}}, "requests": 1200}))
    for group, names in (("router", ("round_robin", "least_outstanding")), ("batching", ("continuous", "static"))):
        (base / "conf" / group).mkdir(parents=True, exist_ok=True)
        for name in names:
            (base / "conf" / group / f"{name}.yaml").write_text(f"name: {name}\n")
    p["empty"].mkdir()
    for key, age in (("half", 0), ("good", 100), ("good2", 200), ("corrupt", 400), ("sweep", 300), ("plan", 350),
                     ("partial", 450), ("missed", 500)):
        _age(p[key], age)
    return p


@pytest.fixture(scope="session")
def results(tmp_path_factory) -> dict[str, Path]:
    """A read-only fixture tree shared by the tests that do not write results."""
    return build_results(tmp_path_factory.mktemp("results"))


@pytest.fixture
def fresh_results(tmp_path) -> dict[str, Path]:
    """A private fixture tree for tests that write (what-if runs)."""
    return build_results(tmp_path)


@pytest.fixture
def app_env(monkeypatch):
    """Point the app at a fixture tree: results folders via the environment, cwd for calibrate/ and conf/."""
    def use(paths: dict[str, Path], roots: str | None = None) -> None:
        monkeypatch.chdir(paths["base"])
        default = f"{paths['runs']},{paths['multirun']},{paths['base'] / 'plans'}"
        monkeypatch.setenv("INFERPLAN_RUNS_DIR", roots or default)
    return use


@pytest.fixture(scope="session")
def factory() -> SimpleNamespace:
    """The writers above, for tests that make their own folders (test modules cannot import conftest)."""
    return SimpleNamespace(make_run=make_run, make_sweep=make_sweep, make_profile=make_profile,
                           make_calibration=make_calibration, build_results=build_results, app=APP, repo=REPO,
                           slo=SLO)
