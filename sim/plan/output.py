"""The plan folder: `plan.json`, `sweep.parquet` (one row per configuration, as a multirun writes it) and
`jobs/<id>/`, each configuration's run folder (hard links into the cache, copies where links are impossible), with
`jobs/<id>_n_plus_1/` beside it for its N+1 failure run when the plan checks redundancy.
The dashboard opens it as a plan (docs/dashboard.md)."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from sim.plan.evaluate import Outcome
from sim.plan.result import failure_run_dir
from sim.results.schema import DONE
from sim.sweep import job_row, parse_overrides, write_sweep


def link_run(src: Path, dst: Path) -> None:
    """`dst` becomes a copy of run folder `src` made of hard links (DONE last, as a run is written)."""
    if dst.exists():
        shutil.rmtree(dst)
    files = sorted((p for p in src.rglob("*") if p.is_file()), key=lambda p: p.name == DONE)
    for path in files:
        target = dst / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path, target)
        except OSError:
            shutil.copy2(path, target)


def write_plan_folder(out_dir: Path, outcomes: list[Outcome], base: list[str], plan: dict) -> Path:
    """Write the job folders, `sweep.parquet` and `plan.json` (last) into `out_dir`; returns `plan.json`'s path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    kept = {str(o.id) for o in outcomes} | {f"{o.id}_n_plus_1" for o in outcomes if o.failure_run is not None}
    for stale in (out_dir / "jobs").glob("*"):      # an out_dir reused from a larger plan
        ours = stale.name.isdigit() or stale.name.endswith("_n_plus_1")
        if stale.is_dir() and ours and stale.name not in kept:
            shutil.rmtree(stale)
    rows = []
    fixed = parse_overrides(base)
    for o in outcomes:
        job_dir = out_dir / "jobs" / str(o.id)
        if o.run_dir is not None:
            link_run(o.run_dir, job_dir)
        if o.failure_run is not None and o.failure_run.run_dir is not None:   # its N+1 run (sim/plan/redundancy.py)
            link_run(o.failure_run.run_dir, out_dir / failure_run_dir(o.id))
        overrides = {**fixed, **parse_overrides(list(o.overrides))}
        if o.run_dir is None:
            rows.append({"job": o.id, "run_dir": "", "status": o.status, **overrides, "error": o.error})
        else:
            rows.append(job_row(job_dir, out_dir, o.id, overrides, error=o.error))
    write_sweep(out_dir, rows)
    path = out_dir / "plan.json"
    tmp = out_dir / ".plan.json.tmp"
    tmp.write_text(json.dumps(plan, indent=2) + "\n")
    os.replace(tmp, path)
    return path


def run_dirs(outcomes: list[Outcome]) -> dict[int, str]:
    """Each configuration's folder relative to the plan folder (those that ran)."""
    return {o.id: f"jobs/{o.id}" for o in outcomes if o.run_dir is not None}
