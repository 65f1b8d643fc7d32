"""The only reader of run folders: the dashboard, the planner's cache, sweeps, reports and benchmarks read through it.

`read_summary` returns a `Summary` (sim/results/schema.py) of this schema version: a version-1 folder (before
`schema_version` existed) is upgraded, anything else — a newer version, a foreign JSON, a half-written folder — is
an `InputError` of one line. `try_summary` is the quiet form for callers that treat "no complete run" as a state
(a cache miss, a sweep job that failed).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import pyarrow as pa
import pyarrow.parquet as pq

from inferplan.errors import InputError
from sim.results.schema import (DONE, FAILED, INTERRUPTED, POOLS, REQUESTS, SCHEMA_VERSION, SUMMARY, TIMESERIES,
                                Summary, summary_problem)

TABLE_FILES = {"requests": REQUESTS, "timeseries": TIMESERIES, "pools": POOLS}
RERUN_FIX = "re-run the simulation (`python -m sim ...` rewrites the folder)"


def is_complete(run_dir: Path) -> bool:
    """A finished run folder: its DONE marker is there (written last)."""
    return (Path(run_dir) / DONE).is_file()


def failed_reason(run_dir: Path) -> str | None:
    """The one-line error of a sweep job that could not run (its FAILED file), or None."""
    path = Path(run_dir) / FAILED
    return path.read_text(errors="replace").strip() if path.is_file() else None


def stopped_early(run_dir: Path) -> bool:
    """A sweep job that a signal stopped before its simulation ran (its INTERRUPTED marker): not a failure."""
    return (Path(run_dir) / INTERRUPTED).is_file()


def interrupted_overrides(run_dir: Path) -> list[str]:
    """The overrides an INTERRUPTED marker records (the lines after its reason), for a job without `.hydra/`."""
    path = Path(run_dir) / INTERRUPTED
    return [line for line in path.read_text(errors="replace").splitlines()[1:] if line] if path.is_file() else []


def _upgrade(data: dict, where: Path) -> dict:
    version = data.get("schema_version", 1)
    if version == SCHEMA_VERSION:
        return data
    if version == 1 and isinstance(data.get("cost"), dict):
        # Version 1 wrote device-hours under `node_hours`; devices per node were not recorded.
        cost = dict(data["cost"])
        cost["device_hours"], cost["node_hours"] = cost.get("node_hours"), None
        pools = {name: {**p, "node_hours": None} for name, p in (data.get("pools") or {}).items()}
        return {**data, "schema_version": SCHEMA_VERSION, "cost": cost, "pools": pools}
    raise InputError(str(where), "schema_version", f"version {version!r}; this inferplan reads {SCHEMA_VERSION} (and "
                     "upgrades 1)", "re-run the simulation with this version, or read it with the inferplan that wrote it")


def read_summary(run_dir: Path) -> Summary:
    """The summary of a complete run folder; an `InputError` (one line) for anything else."""
    run_dir = Path(run_dir)
    path = run_dir / SUMMARY
    if not run_dir.is_dir():
        raise InputError(str(run_dir), "folder", "not found", "check the results folder")
    if not is_complete(run_dir):
        raise InputError(str(run_dir), DONE, "half-written run: no DONE marker, so the simulation crashed or is still "
                         "running", "wait for it to finish, or re-run it (the simulator writes DONE last)")
    if not path.is_file():
        raise InputError(str(path), SUMMARY, "file missing", RERUN_FIX)
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(str(path), SUMMARY, f"not valid JSON ({type(err).__name__})", RERUN_FIX) from None
    if not isinstance(data, dict):
        raise InputError(str(path), SUMMARY, f"holds a {type(data).__name__}, expected a JSON object", RERUN_FIX)
    if "requests" not in data or "scenario" not in data:
        raise InputError(str(path), SUMMARY, "not an inferplan run summary (no `scenario`/`requests`)", RERUN_FIX)
    data = _upgrade(data, path)
    problem = summary_problem(data, complete=False)
    if problem is not None:
        field, what = problem
        raise InputError(str(path), field, f"{what} (not the summary schema of sim/results/schema.py)", RERUN_FIX)
    return cast(Summary, data)


def try_summary(run_dir: Path) -> Summary | None:
    """`read_summary`, or None when the folder holds no complete, readable run of a version this reads."""
    try:
        return read_summary(run_dir)
    except InputError:
        return None


def table_path(run_dir: Path, table: str) -> Path:
    """The Parquet file of one of a run's tables: `requests`, `timeseries` or `pools`."""
    return Path(run_dir) / TABLE_FILES[table]


def read_table(run_dir: Path, table: str, columns: list[str] | None = None) -> pa.Table:
    """One of a run's tables, reading only `columns` (those present) when given; an `InputError` if unreadable."""
    file = table_path(run_dir, table)
    if not file.is_file():
        raise InputError(str(file), "file", "missing", RERUN_FIX)
    try:
        names = pq.read_schema(file).names
        return pq.read_table(file, columns=None if columns is None else [c for c in columns if c in names])
    except (OSError, pa.ArrowException) as err:
        raise InputError(str(file), "file", f"not a readable Parquet file ({type(err).__name__})", RERUN_FIX) from None
