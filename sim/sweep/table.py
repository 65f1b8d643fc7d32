"""`sweep.parquet`: one row per job of a sweep (a multirun, or a plan's configurations).

Columns: `job` (int), `run_dir` (the job's folder, relative to the sweep folder), `status` (`completed` when the job
folder has its `DONE` marker, `interrupted` when its run was stopped by a signal (partial results, or none when
the signal came before the simulation ran: its `INTERRUPTED` marker), `failed` otherwise, `invalid` for a planner configuration the simulator refused), `error` (empty, or the failed job's
one-line error from its `FAILED` file), one column per override key (`batching`, `scenario.pools.main.instances`, ...; typed int,
float, bool or string as the values allow) and the metrics of `sim/results/flat.py`. The dashboard's Compare page reads it
(docs/dashboard.md).
"""
from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from inferplan.config.yaml_files import read_yaml
from inferplan.errors import InputError
from sim.results.flat import flatten_summary
from sim.results.read import failed_reason, interrupted_overrides, stopped_early, try_summary
from sim.results.schema import INTERRUPTED

SWEEP_FILE = "sweep.parquet"
_FIRST = ("job", "run_dir", "status")


def parse_overrides(overrides: list[str]) -> dict:
    """Hydra override strings as `{key: value}`: values typed by Hydra's grammar (`1` int, `0.5` float, `true`
    bool, anything else, lists included, as its text); `+key`/`++key` give `key`, a deletion `~key` gives `~key`."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    out = {}
    for text in overrides:
        ov = parser.parse_override(text)
        key = ov.get_key_element().lstrip("+")
        if ov.is_delete():
            out[key] = "deleted"
            continue
        value = ov.value()
        out[key] = value if isinstance(value, (bool, int, float, str)) else ov.get_value_element_as_str()
    return out


def job_row(job_dir: Path, sweep_dir: Path, job: int, overrides: dict, error: str = "",
            status: str | None = None) -> dict:
    """The row of one job: bookkeeping, its overrides, and its summary's flat metrics (none if it has no summary)."""
    summary = try_summary(job_dir)
    early = summary is None and stopped_early(job_dir)
    if status is None:
        status = str(summary.get("status", "completed")) if summary is not None else \
            "interrupted" if early else "failed"
    if not error and summary is None:
        error = failed_reason(job_dir) or ("interrupted before the simulation ran" if early else "")
    row = {"job": int(job), "run_dir": os.path.relpath(job_dir, sweep_dir), "status": status}
    if summary is not None:
        row.update(flatten_summary(dict(summary)))
    row.update(overrides)  # an override named like a metric (`seed`) holds the same value
    row["error"] = error or ("" if summary is not None else "no results (the job did not finish)")
    return row


def _job_number(job_dir: Path, fallback: int) -> int:
    try:
        hydra_cfg = read_yaml(job_dir / ".hydra" / "hydra.yaml")
        return int(hydra_cfg["hydra"]["job"]["num"])
    except (InputError, KeyError, TypeError, ValueError):
        return int(job_dir.name) if job_dir.name.isdigit() else fallback


def rows_from_folder(sweep_dir: Path) -> list[dict]:
    """The rows of every job folder under `sweep_dir` (a folder holding `.hydra/overrides.yaml`, or a job a signal
    stopped before Hydra set it up: its INTERRUPTED marker records the overrides), by job number."""
    sweep_dir = Path(sweep_dir)
    job_dirs = sorted({p.parent.parent for p in sweep_dir.glob("**/.hydra/overrides.yaml")}
                      | {p.parent for p in sweep_dir.glob(f"**/{INTERRUPTED}")})
    rows = []
    for i, job_dir in enumerate(job_dirs):
        hydra_overrides = job_dir / ".hydra" / "overrides.yaml"
        overrides = (read_yaml(hydra_overrides) or [] if hydra_overrides.is_file()
                     else interrupted_overrides(job_dir))
        rows.append(job_row(job_dir, sweep_dir, _job_number(job_dir, i), parse_overrides(overrides)))
    return sorted(rows, key=lambda r: r["job"])


def _column(values: list) -> pa.Array:
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return pa.array(values, type=pa.bool_())
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return pa.array(values, type=pa.int64())
    if present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return pa.array([None if v is None else float(v) for v in values], type=pa.float64())
    return pa.array([None if v is None else str(v) for v in values], type=pa.string())


def write_sweep(sweep_dir: Path, rows: list[dict]) -> Path:
    """Write `rows` as `<sweep_dir>/sweep.parquet` (atomically: a reader never sees half a file); returns its path."""
    sweep_dir = Path(sweep_dir)
    keys = list(_FIRST) + [k for k in dict.fromkeys(k for r in rows for k in r) if k not in _FIRST]
    table = pa.table({k: _column([r.get(k) for r in rows]) for k in keys})
    out = sweep_dir / SWEEP_FILE
    tmp = sweep_dir / f".{SWEEP_FILE}.tmp"
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, out)
    return out
