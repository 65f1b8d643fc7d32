"""Sweeps: `python -m sim -m ...` runs one job per combination of override values (long-lived local workers with the
default `workers` launcher, `launch.py`; joblib processes with `hydra/launcher=joblib`, a Ray cluster with
`hydra/launcher=ray`), and `sweep.parquet` in the sweep folder lists them.

Read first: `table.py` (one row per job folder: its overrides and its summary's metrics, typed columns),
`callback.py` (the Hydra callback that writes the table after a multirun); the metric names, shared with the
dashboard's Compare page, are `sim/results/flat.py`. `python -m sim.sweep <sweep folder>` rebuilds the table, e.g. after a sweep
that stopped on a failing job. See docs/planning.md.
"""
from sim.sweep.callback import SweepParquetCallback
from sim.results.flat import flatten_summary
from sim.sweep.table import SWEEP_FILE, job_row, parse_overrides, rows_from_folder, write_sweep

__all__ = ["SWEEP_FILE", "SweepParquetCallback", "flatten_summary", "job_row", "parse_overrides", "rows_from_folder",
           "write_sweep"]
