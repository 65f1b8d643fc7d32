"""The Hydra callback that writes `sweep.parquet` when a multirun ends (registered in `conf/config.yaml`,
`hydra.callbacks.sweep_parquet`).

It reads the job folders back rather than the launcher's return values, so it works the same for every launcher
(the `workers` launcher, joblib processes, Ray workers) as long as the sweep folder is on a file system this process sees. A job that fails
writes its error into its folder and returns (`sim/__main__.py`), so Hydra reaches this callback whatever a job
did; the sweep then exits 1 if any job did not complete. After a sweep killed from outside, rebuild the table with
`python -m sim.sweep <sweep folder>`.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from inferplan.config.yaml_files import read_yaml
from inferplan.errors import InputError
from sim.sweep.table import parse_overrides, rows_from_folder, write_sweep
from sim.terminal import compact_table, console, knob_header, ms, served_percent


def comparison_table(sweep_dir: Path, rows: list[dict]):
    """A rich table of the jobs: the overrides that vary, cost, TTFT/TPOT P99, served fraction, SLO verdict;
    cheapest first among the completed ones (failed jobs last)."""
    overrides = {}
    for r in rows:
        path = Path(sweep_dir) / str(r["run_dir"]) / ".hydra" / "overrides.yaml"
        try:
            overrides[r["job"]] = parse_overrides(read_yaml(path) or [])
        except InputError:  # (a job folder without a readable overrides file: no overrides)
            overrides[r["job"]] = {}
    keys = list(dict.fromkeys(k for o in overrides.values() for k in o))
    varying = [k for k in keys if len({str(o.get(k)) for o in overrides.values()}) > 1]
    heads = ["job", *(knob_header(k) for k in varying), "usd", "TTFT P99 ms", "TPOT P99 ms", "served %", "SLOs"]

    def order(r):
        usd = r.get("usd")
        return (r["status"] != "completed", usd if isinstance(usd, (int, float)) else float("inf"), r["job"])
    out = []
    for r in sorted(rows, key=order):
        met = r.get("slo_met")
        verdict = r["status"] if r["status"] != "completed" else ("met" if met else "missed" if met is False
                                                                  else "no data")
        out.append([str(r["job"]), *(str(overrides[r["job"]].get(k, "")) for k in varying),
                    "-" if r.get("usd") is None else f"{r['usd']:,.2f}", ms(r.get("ttft_p99_s")),
                    ms(r.get("tpot_p99_s")), served_percent(r.get("served_fraction")), verdict])
    return compact_table(f"sweep · {len(rows)} jobs · cheapest first", heads, out,
                         left=tuple(range(1, 1 + len(varying))))


class SweepParquetCallback(Callback):
    """After a multirun: `<hydra.sweep.dir>/sweep.parquet`, one row per job folder."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(str(config.hydra.sweep.dir))
        rows = rows_from_folder(sweep_dir)
        if not rows:
            return
        out = write_sweep(sweep_dir, rows)
        console().print(comparison_table(sweep_dir, rows))
        done = sum(r["status"] == "completed" for r in rows)
        print(f"sweep: {out} ({len(rows)} jobs, {done} completed)")
        failed = [r for r in rows if r["status"] != "completed"]
        for r in failed:
            why = r["error"] or ("partial results" if r["status"] == "interrupted" else "")
            print(f"  job {r['job']} {r['status']}: {why}", file=sys.stderr)
        # the gate (`check=true`, sim/__main__.py): a sweep with a job that missed an SLO exits 1 too
        missed = [r for r in rows if r["status"] == "completed" and r.get("slo_met") is not True]
        if missed and config.get("check") is True:
            print(f"check: {len(missed)} of {len(rows)} jobs miss an SLO (jobs "
                  f"{', '.join(str(r['job']) for r in missed)})", file=sys.stderr)
        if failed or (missed and config.get("check") is True):
            raise SystemExit(1)
