"""The Hydra callback that writes `sweep.parquet` when a multirun ends (registered in `conf/config.yaml`,
`hydra.callbacks.sweep_parquet`).

It reads the job folders back rather than the launcher's return values, so it works the same for every launcher
(joblib processes, Ray workers) as long as the sweep folder is on a file system this process sees. A job that fails
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

from sim.sweep.table import rows_from_folder, write_sweep


class SweepParquetCallback(Callback):
    """After a multirun: `<hydra.sweep.dir>/sweep.parquet`, one row per job folder."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(str(config.hydra.sweep.dir))
        rows = rows_from_folder(sweep_dir)
        if not rows:
            return
        out = write_sweep(sweep_dir, rows)
        done = sum(r["status"] == "completed" for r in rows)
        print(f"sweep: {out} ({len(rows)} jobs, {done} completed)")
        failed = [r for r in rows if r["status"] != "completed"]
        for r in failed:
            print(f"  job {r['job']} {r['status']}: {r['error']}", file=sys.stderr)
        if failed:
            raise SystemExit(1)
