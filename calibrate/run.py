"""One calibration campaign: shapes -> measurements -> fit -> profile, in `out_dir`.

`run_calibration(Settings(...))` is the library entry point (`python -m calibrate` composes the Settings from
Hydra; `calibrate.gpu_session` builds them directly, with no Hydra on the GPU machine). It writes, in `out_dir`:
`measurements.parquet` (every timed point, with provenance), `fit.json` (per-op fits and held-out errors, the
configuration and the sweep's counts) and `<hardware>.parquet` (the profile); `install=True` copies the profile
to `calibrate/profiles/`. Measurements of several models on one device pool in one out_dir: the profile is fitted
on all of them.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from calibrate import ops
from calibrate.control import BudgetReached, Control, Interrupted
from calibrate.fit import FitReport, fit_measurements
from calibrate.impls import impls_for
from calibrate.measurements import MeasurementStore
from calibrate.peaks import FORMATS, datasheet_peaks, measure_ceilings, peaks_used
from calibrate.profile import write_profile
from calibrate.progress import Reporter
from calibrate.provenance import collect
from calibrate.provenance import loadavg as collect_loadavg
from calibrate.shapes import Grid, Parallel, grid_for, model_shapes
from calibrate.settings import CONFIG, Settings
from calibrate.sweep import SweepResult, Task, run_sweep
from calibrate.timing import CpuTimer, CudaTimer, set_cpu_threads
from inferplan.errors import InputError
from inferplan.specs import HardwareSpec, ModelSpec, load_hardware, load_model

PROFILES_DIR = Path(__file__).resolve().parent / "profiles"
DEFAULT_DTYPES = {"cuda": ("bf16", "fp8_block", "int8", "int4_wo"), "cpu": ("bf16", "int8", "int4_wo")}
COLLECTIVES = ("allreduce", "all_to_all")
FORMATS_FOR = {"cuda": FORMATS, "cpu": ("bf16", "int8", "fp32")}


@dataclass
class RunResult:
    out_dir: Path
    hardware: str
    model: str
    measurements_path: Path
    fit_path: Path
    profile_path: Path | None
    installed_path: Path | None
    sweep: SweepResult
    report: FitReport
    shapes: int
    dropped: int
    rehearsal: bool
    skipped: dict[str, dict] = field(default_factory=dict)


def resolve_device(settings: Settings, hw: HardwareSpec) -> tuple[torch.device, str, bool]:
    """(device to time on, implementation table, rehearsal?) for this hardware entry and machine."""
    if hw.kind in ("npu", "fpga"):
        raise InputError(hw.source, "kind", f"no timing backend for {hw.kind} hardware: {hw.name} is analytical-only",
                         "simulate it with the roofline (profile=analytical), or calibrate a cpu/gpu entry")
    device = settings.device
    if device == "auto":
        device = "cpu" if hw.kind == "cpu" else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError(hw.source, "kind", f"{hw.name} is a GPU but no CUDA device is visible",
                         "run on that GPU, or calibrate this machine as a CPU: hardware=cpu_local (or cpu_server)")
    table = settings.impls if settings.impls != "auto" else device
    rehearsal = device == "cpu" and (hw.kind != "cpu" or table == "cuda")
    if rehearsal and os.environ.get("TRITON_INTERPRET", "0") in ("", "0") and table == "cuda":
        raise InputError(CONFIG, "impls", "the CUDA kernels can only be rehearsed on a CPU under the Triton "
                         "interpreter", "set TRITON_INTERPRET=1, or use impls=cpu")
    if device == "cuda" and not settings.allow_device_mismatch:
        token = hw.name.split("_")[0].upper()
        name = torch.cuda.get_device_name(0)
        if token not in name.upper().replace(" ", ""):
            raise InputError(hw.source, "name", f"hardware {hw.name!r} does not look like this device ({name!r})",
                             "pick the matching conf/hardware entry, or set allow_device_mismatch=true")
    return torch.device(device), table, rehearsal


def _timer(device: torch.device, grid: str) -> Callable:
    if device.type == "cuda":
        return CudaTimer().time
    if grid == "tiny":
        return CpuTimer(warmup_s=0.002, target_s=0.02, min_repeats=3, max_repeats=20).time
    return CpuTimer().time


def _ceilings(device: torch.device, grid: str, measured: dict, control: Control, reporter: Reporter) -> dict:
    """Fill `measured` (in place) with the device's ceilings; bounded by `control`'s deadline (see peaks.py)."""
    if device.type == "cuda":
        timer, n, copy, formats, cap_s = CudaTimer(rep_ms=100), 8192, 1 << 30, FORMATS, 0.1
    else:
        n, copy = (256, 16 << 20) if grid == "tiny" else (2048, 256 << 20)
        # NOTE: 3-10 launches in 0.3 s, each cut to ~0.1 s: a CPU without fast BF16 (no AVX512-BF16/AMX) runs a
        # 2048^3 BF16 product for over a minute, which would hold the run far past any budget.
        timer, formats, cap_s = CpuTimer(warmup_s=0.01, target_s=0.3, min_repeats=3, max_repeats=10), \
            FORMATS_FOR["cpu"], 0.1
    return measure_ceilings(device, lambda b: timer.time(b, control).median_s, n, copy, formats, measured=measured,
                            launch_cap_s=cap_s, check=control.check,
                            on_step=lambda what: reporter.step(f"timing {what}"))


def _tasks(shapes: list, table: str, tp: int, ep: int) -> tuple[list[Task], dict[str, dict]]:
    tasks, skipped = [], {}
    for s in shapes:
        impls = impls_for(table, s.op, s.dtype)
        if not impls:
            if s.op in COLLECTIVES:
                reason = (f"collectives are not timed on one device (tp={tp}, ep={ep}); priced from the link "
                          "figures of the hardware entry")
            else:
                reason = f"no {table} implementation of {s.op}/{s.dtype}"
            entry = skipped.setdefault(f"{s.op}/{s.dtype}", {"points": 0, "reason": reason})
            entry["points"] += 1
        tasks.extend(Task(s, impl) for impl in impls)
    return tasks, skipped


# Shares of budget_s: the peak measurement gets at most PEAK_SHARE of it (from when it starts); the fit and the writing are given
# FIT_RESERVE_S (or FIT_RESERVE_SHARE of the budget if less) at the end; the sweep gets the rest.
PEAK_SHARE = 0.25
FIT_RESERVE_S, FIT_RESERVE_SHARE = 5.0, 0.1


def run_calibration(settings: Settings, *, clock: Callable[[], float] = time.monotonic,
                    control: Control | None = None, reporter: Reporter | None = None,
                    started_s: float | None = None) -> RunResult:
    """The campaign, bounded by `settings.budget_s` from `started_s` (default: now) on `clock`: peaks, sweep, fit
    and writing all inside it. `control` carries the stop flag (signals) and receives `flush`, which writes what
    was measured so far; a stop raises `control.Interrupted` after the store is written."""
    start = clock() if started_s is None else started_s
    settings.validate()
    control = control or Control(clock=clock)
    control.clock = clock
    end_s = start + settings.budget_s
    reporter = reporter or Reporter(settings.progress, deadline_s=end_s, clock=clock, start_s=start)
    reporter.stage("setup", 1, "reading provenance and shapes")
    hw, model = load_hardware(settings.hardware), load_model(settings.model)
    device, table, rehearsal = resolve_device(settings, hw)
    threads = set_cpu_threads(settings.threads)
    grid = grid_for(settings.grid, hw)
    dtypes = settings.dtypes or DEFAULT_DTYPES[table]
    shapes, dropped = model_shapes(model, hw, grid, parallel=Parallel(settings.tp, settings.ep), dtypes=dtypes,
                                   ops_wanted=settings.ops)
    out_dir = Path(settings.out_dir)
    provenance = collect(device.type, threads) | {"rehearsal": rehearsal}
    store = MeasurementStore.open(out_dir, provenance, hw.name)
    control.flush = store.close
    reporter.step()
    try:
        return _campaign(settings, store, hw, model, device, table, rehearsal, grid, shapes, dropped, control,
                         reporter, start, end_s, clock)
    except Interrupted:
        store.write()
        raise


def _campaign(settings: Settings, store: MeasurementStore, hw: HardwareSpec, model: ModelSpec,
              device: torch.device, table: str, rehearsal: bool, grid: Grid, shapes: list, dropped: int,
              control: Control, reporter: Reporter, start: float, end_s: float, clock: Callable[[], float]
              ) -> RunResult:
    out_dir = Path(settings.out_dir)
    peaks_meta = store.metadata.get("peaks", {})
    measured = peaks_meta.get("measured")
    if settings.peaks == "measured" and (measured is None or measured.get("not_measured", [])
                                         or not isinstance(measured.get("matmul_n"), dict)):
        measured = measured if measured and isinstance(measured.get("matmul_n"), dict) else {}
        store.metadata["peaks"] = {**peaks_meta, "measured": measured}  # kept as it fills, should a signal come
        control.deadline_s = min(end_s, clock() + PEAK_SHARE * settings.budget_s)
        reporter.stage("peaks", len(measured.get("not_measured", ["mem", *FORMATS_FOR[device.type]])),
                       f"ceilings (≤{PEAK_SHARE:.0%} of the budget)")
        try:
            _ceilings(device, grid.name, measured, control, reporter)
            reporter.end()
        except BudgetReached:
            reporter.end(f"peak share of the budget reached: {', '.join(measured['not_measured'])} keep the "
                         "datasheet figure")
    peaks = peaks_used(datasheet_peaks(hw), measured if settings.peaks == "measured" else None)
    store.metadata["peaks"] = {"used": peaks, "datasheet": datasheet_peaks(hw), "measured": measured}
    for row in store.rows:  # one roofline axis for all rows, old and new
        peak = peaks["flops_per_s"][ops.check_dtype(row["dtype"])["compute"]]
        row["roofline_s"] = ops.roofline_s(row["flops"], row["bytes"], peak, peaks["mem_bytes_per_s"])
    tasks, skipped = _tasks(shapes, table, settings.tp, settings.ep)
    reserve_s = min(FIT_RESERVE_S, FIT_RESERVE_SHARE * settings.budget_s)
    sweep = run_sweep(tasks, store, _timer(device, grid.name), device, peaks, model.name, end_s - reserve_s,
                      reporter=reporter, clock=clock, control=control)
    store.metadata.setdefault("skipped", {}).update(skipped)
    store.metadata["provenance"]["loadavg_1m_end"] = collect_loadavg()
    reporter.stage("fit", 1, "cost curves and held-out errors")
    report = fit_measurements(store.rows, settings.holdout_every)
    store.write()
    models = sorted({m for r in store.rows for m in r["models"].split("+")})
    profile_path = installed = None
    if report.profile:
        profile_path = write_profile(out_dir / f"{hw.name}.parquet", _knot_rows(report),
                                     _profile_metadata(hw, store, report, models, rehearsal))
        if settings.install:
            if rehearsal:
                raise InputError(CONFIG, "install", "a rehearsal (CPU timings of GPU code) is not a profile to ship",
                                 "run on the device itself, or drop install=true")
            PROFILES_DIR.mkdir(parents=True, exist_ok=True)
            installed = Path(shutil.copyfile(profile_path, PROFILES_DIR / profile_path.name))
    result = RunResult(out_dir, hw.name, model.name, store.path, out_dir / "fit.json", profile_path, installed,
                       sweep, report, len(shapes), dropped, rehearsal, {**store.metadata.get("skipped", {})})
    _write_fit_json(result, settings, store, models, shapes_total=len(tasks))
    reporter.step()
    reporter.end()
    return result


def _knot_rows(report: FitReport) -> list[dict]:
    rows = []
    for (op, dtype), fit in sorted(report.profile.items()):
        c = fit.curve
        rows += [{"op": op, "dtype": dtype, "roofline_s": r, "efficiency": e, "launch_s": c.launch_s}
                 for r, e in zip(c.roofline_s, c.efficiency)]
    return rows


def _profile_metadata(hw: HardwareSpec, store: MeasurementStore, report: FitReport, models: list[str],
                      rehearsal: bool) -> dict:
    prov, peaks = store.metadata["provenance"], store.metadata["peaks"]
    return {"hardware": hw.name, "device": prov["device"], "driver": prov.get("driver", "unknown"),
            "torch": prov["torch"], "triton": prov.get("triton", "absent"), "date": prov["date"],
            "git_commit": prov["git_commit"], "models": models, "rehearsal": rehearsal,
            "peaks": {"flops_per_s": peaks["used"]["flops_per_s"], "mem_bytes_per_s": peaks["used"]["mem_bytes_per_s"]},
            "peaks_source": peaks["used"]["source"], "peaks_datasheet": peaks["datasheet"],
            "peaks_measured": peaks["measured"], "provenance": prov,
            "fit": {f"{op}/{dt}": fit.summary() | {"impls": report.impls_in_profile[(op, dt)]}
                    for (op, dt), fit in sorted(report.profile.items())},
            "holdout_every": report.holdout_every}


def overall_error(report: FitReport) -> dict:
    """Held-out MAPE over all profile curves (weighted by held-out points) and the worst single error."""
    fits = [f for f in report.profile.values() if f.n_held_out]
    n = sum(f.n_held_out for f in fits)
    return {"held_out_points": n,
            "held_out_mape_pct": sum(f.held_out_mape_pct * f.n_held_out for f in fits) / n if n else None,
            "held_out_max_abs_pct": max((f.held_out_max_abs_pct for f in fits), default=None)}


def _write_fit_json(result: RunResult, settings: Settings, store: MeasurementStore, models: list[str],
                    shapes_total: int) -> None:
    rep, sw = result.report, result.sweep
    impl_primary = {f"{r['op']}/{r['dtype']}/{r['impl']}": r["primary"] for r in store.rows}
    doc = {
        "hardware": result.hardware, "model": result.model, "models": models, "rehearsal": result.rehearsal,
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in dataclasses.asdict(settings).items()},
        "provenance": store.metadata["provenance"], "peaks": store.metadata["peaks"],
        "holdout": {"every": rep.holdout_every, "rule": "per (op, dtype): distinct shapes sorted by roofline_s; "
                    "index i is held out when 0 < i < n-1 and i % every == every // 2"},
        "sweep": {"tasks": shapes_total, "measured": sw.measured, "reused": sw.reused, "remaining": sw.remaining,
                  "stopped_by_budget": sw.stopped_by_budget, "elapsed_s": round(sw.elapsed_s, 3),
                  "dropped_by_grid_limits": result.dropped, "skipped": result.skipped,
                  "failed": store.metadata.get("failed", {})},
        "overall": overall_error(rep),
        "profile": {f"{op}/{dt}": fit.summary() | {"impls": rep.impls_in_profile[(op, dt)]}
                    for (op, dt), fit in sorted(rep.profile.items())},
        "impls": {k: fit.summary() | {"primary": impl_primary.get(k, True),
                                      "ratio_to_primary": rep.ratio_to_primary.get(k)}
                  for k, fit in sorted(rep.by_impl.items())},
    }
    result.fit_path.parent.mkdir(parents=True, exist_ok=True)
    result.fit_path.write_text(json.dumps(doc, indent=1, sort_keys=False, default=_json_default) + "\n")


def _json_default(v: object) -> object:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, Path):
        return str(v)
    return str(v)
