"""Run the matrix: plan every row, simulate the expressible ones (in `jobs` worker processes when jobs > 1), and
write each row's record to `<out>/rows.csv` the moment it is known, so that a failed row or Ctrl-C loses nothing
finished. A row that fails is a record with `status: failed` and its one-line reason, not an exception.
"""
from __future__ import annotations

import csv
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from inferplan.interrupts import signum_of
from sim.validate.silicon.metrics import band, error_pct
from sim.validate.silicon.simulate_row import CLIENT_ROUNDS, DEFAULT_CLIENT, simulate_safely
from sim.validate.silicon.support import RowPlan, Unsupported, plan_row
from sim.validate.silicon.table import SiliconRow

FIELDS = ("id", "status", "reason", "detail", "also", "system", "engine", "engine_version", "preset", "model",
          "shape", "mode", "isl_tokens", "osl_tokens", "clients", "band", "tp", "weights_dtype", "deployment",
          "measured_ttft_s", "measured_tpot_s", "sim_ttft_p50_s", "sim_ttft_mean_s", "sim_ttft_p90_s",
          "sim_tpot_p50_s", "sim_tpot_mean_s", "sim_tpot_p90_s", "ttft_error_pct", "tpot_error_pct",
          "ttft_mean_error_pct", "tpot_mean_error_pct", "sim_ttft_round0_p50_s", "sim_ttft_later_p50_s",
          "sim_prefill_alone_s", "requests", "completed", "wall_s", "assumptions", "client", "overrides")


@dataclass
class MatrixRun:
    records: list[dict] = field(default_factory=list)   # one per row, in the order they finished
    interrupted_by: int = 0                             # the signal that stopped the run (0: ran to the end)
    wall_s: float = 0.0


def base_record(row: SiliconRow) -> dict:
    rec = {k: "" for k in FIELDS}
    rec.update(id=row.id, system=row.system, engine=row.engine, engine_version=row.engine_version, model=row.model,
               shape=row.shape, mode=row.mode, isl_tokens=row.isl_tokens, osl_tokens=row.osl_tokens,
               clients=row.clients if row.clients is not None else "",
               band=band(row.clients) if row.clients and row.clients >= 1 else "",
               measured_ttft_s=row.measured_ttft_s, measured_tpot_s=row.measured_tpot_s)
    return rec


def unsupported_record(row: SiliconRow, why: Unsupported) -> dict:
    return base_record(row) | {"status": "unsupported", "reason": why.reason, "detail": why.detail,
                               "also": ",".join(why.also)}


def _deployment(plan: RowPlan) -> str:
    """The `deployment` column: the pool's deployment keys (JSON), or a disaggregated row's two pools'."""
    if plan.decode is None:
        return json.dumps(plan.deployment, sort_keys=True) if plan.deployment else ""
    d = plan.decode
    return json.dumps({"prefill": {"instances": plan.instances, "tp": plan.tp, **plan.deployment},
                       "decode": {"instances": d.instances, "tp": d.tp, **d.deployment}}, sort_keys=True)


def simulated_record(plan: RowPlan, result: dict) -> dict:
    """The row's record from `simulate_safely`'s result: errors of the medians (the file's statistic) and means."""
    rec = base_record(plan.row) | {"preset": plan.engine, "tp": plan.tp, "weights_dtype": plan.weights_dtype,
                                   "deployment": _deployment(plan),
                                   "assumptions": "; ".join(plan.assumptions),
                                   "client": result.get("client", ""), "overrides": result.get("overrides", "")}
    if "failed" in result:
        return rec | {"status": "failed", "reason": "failed", "detail": result["failed"]}
    rec |= {k: result[k] for k in ("requests", "completed", "wall_s", "sim_ttft_p50_s", "sim_ttft_mean_s",
                                   "sim_ttft_p90_s", "sim_tpot_p50_s", "sim_tpot_mean_s", "sim_tpot_p90_s",
                                   "sim_ttft_round0_p50_s", "sim_ttft_later_p50_s", "sim_prefill_alone_s")}
    row = plan.row
    rec |= {"status": "simulated",
            "ttft_error_pct": error_pct(result["sim_ttft_p50_s"], row.measured_ttft_s),
            "tpot_error_pct": error_pct(result["sim_tpot_p50_s"], row.measured_tpot_s),
            "ttft_mean_error_pct": error_pct(result["sim_ttft_mean_s"], row.measured_ttft_s),
            "tpot_mean_error_pct": error_pct(result["sim_tpot_mean_s"], row.measured_tpot_s)}
    if result["completed"] < result["requests"]:
        rec["detail"] = f"{result['requests'] - result['completed']} of {result['requests']} requests not completed"
    return rec


class RowWriter:
    """`rows.csv`, one line per record, flushed as each is added (`append`: after the records already there, in
    that file's columns: one written before a column was added keeps its header, the new column is left out)."""

    def __init__(self, path: Path, append: bool = False) -> None:
        self.path = Path(path)
        fresh = not (append and self.path.is_file())
        fields: tuple[str, ...] | list[str] = FIELDS
        if not fresh:
            with self.path.open(newline="") as fh:
                fields = next(csv.reader(fh), None) or FIELDS
        self._fh = self.path.open("w" if fresh else "a", newline="")
        self._csv = csv.DictWriter(self._fh, fieldnames=fields, extrasaction="ignore")
        if fresh:
            self._csv.writeheader()

    def add(self, rec: dict) -> None:
        self._csv.writerow({k: ("" if isinstance(v, float) and math.isnan(v) else v) for k, v in rec.items()})
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


NUMERIC = ("isl_tokens", "osl_tokens", "clients", "tp", "measured_ttft_s", "measured_tpot_s", "sim_ttft_p50_s",
           "sim_ttft_mean_s", "sim_ttft_p90_s", "sim_tpot_p50_s", "sim_tpot_mean_s", "sim_tpot_p90_s",
           "ttft_error_pct", "tpot_error_pct", "ttft_mean_error_pct", "tpot_mean_error_pct", "sim_ttft_round0_p50_s",
           "sim_ttft_later_p50_s", "sim_prefill_alone_s", "requests", "completed", "wall_s")


def read_records(path: Path) -> list[dict]:
    """The records of a `rows.csv` (numbers as floats, empty numbers NaN), e.g. to resume an interrupted run."""
    with Path(path).open(newline="") as fh:
        recs = list(csv.DictReader(fh))
    for r in recs:
        for k in NUMERIC:
            r[k] = float(r[k]) if r.get(k) not in (None, "") else math.nan
    return recs


def run_matrix(rows: list[SiliconRow], out_dir: Path, jobs: int = 1, rounds: int = CLIENT_ROUNDS,
               on_record: Callable[[dict], None] | None = None, resume: bool = False, cost: str | None = None,
               client: str = DEFAULT_CLIENT,
               engine_keys: Callable[[SiliconRow], dict | None] | None = None) -> MatrixRun:
    """Plan and simulate `rows`; records go to `<out_dir>/rows.csv` as they are known (and to `on_record`).
    `resume`: keep the records already in `<out_dir>/rows.csv` and run only the rows they lack. `cost`: the cost
    model's profile for every row (None: the configured one); `client`: the benchmark client (`clients.CHOICES`);
    `engine_keys`: the engine preset keys a row is simulated with on top of its preset (held_out.py)."""
    keys_of = engine_keys or (lambda row: None)
    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    run = MatrixRun()
    if resume and (out_dir / "rows.csv").is_file():
        wanted = {r.id for r in rows}
        run.records = [r for r in read_records(out_dir / "rows.csv") if r["id"] in wanted]
        done = {r["id"] for r in run.records}
        rows = [r for r in rows if r.id not in done]
    writer = RowWriter(out_dir / "rows.csv", append=resume)

    def add(rec: dict) -> None:
        writer.add(rec)
        run.records.append(rec)
        if on_record is not None:
            on_record(rec)

    plans: list[RowPlan] = []
    pool = None
    try:
        for row in rows:
            p = plan_row(row)
            if isinstance(p, Unsupported):
                add(unsupported_record(row, p))
            else:
                plans.append(p)
        if jobs <= 1:
            for p in plans:
                add(simulated_record(p, simulate_safely(p, rounds, keys_of(p.row), cost, client)))
        else:
            from sim.workers import WorkerPool

            pool = WorkerPool(jobs)
            by_id = {p.row.id: p for p in plans}
            tasks = ((p.row.id, (p, rounds, keys_of(p.row), cost, client)) for p in plans)
            for row_id, result in pool.run(simulate_safely, tasks, in_flight=jobs):
                add(simulated_record(by_id[row_id], result))
    except KeyboardInterrupt as err:  # (Ctrl-C or SIGTERM: keep what finished)
        run.interrupted_by = signum_of(err)
    finally:
        if pool is not None:
            pool.close(abort=bool(run.interrupted_by))
        writer.close()
    run.wall_s = round(time.perf_counter() - t0, 1)
    return run
