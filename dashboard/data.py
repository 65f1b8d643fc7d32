"""Find result folders and read them; every problem becomes an `InputError` a person can act on.

A result folder is one of (see `docs/results.md`):
- a **run**: `summary.json`, `requests.parquet`, `timeseries.parquet`, `pools.parquet`, `.hydra/`, and `DONE`, which
  the simulator writes last, so a folder without it is a crashed or still-running run;
  a run whose `summary.json` says `"status": "interrupted"` is *partial* (a signal stopped it; its figures cover
  the simulated time so far), and `is_partial` / `run_label` say so wherever it is shown;
- a **sweep**: `sweep.parquet`, one row per job (its overrides, its flattened summary metrics and `run_dir`);
- a **plan**: `plan.json` from the planner, usually beside a `sweep.parquet`.

Pure pandas and pyarrow, no Streamlit: the app caches these loaders (`ui.py`) and the report CLI calls them as is.
"""
from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from inferplan.errors import InputError
from sim.results.read import read_summary, table_path, try_summary
from sim.results.schema import DONE, RUN_FILES, SUMMARY

RUNS_DIR_ENV = "INFERPLAN_RUNS_DIR"
DEFAULT_RUNS_DIRS = "runs, multirun, plans"
TABLES = ("requests", "timeseries", "pools")
RUN_MARKERS = RUN_FILES  # (sim/results/schema.py)

# Columns each table must have for the dashboard to plot it; the rest of docs/results.md is optional here.
REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "requests": ("request_id", "arrival_s", "status", "first_token_s", "finish_s", "ttft_s", "tpot_s"),
    "timeseries": ("t_s", "arrivals", "completions", "queued", "running", "instances", "kv_utilization"),
    "pools": ("t_s", "pool", "starting", "active", "draining"),
}

RERUN_FIX = "re-run the simulation (`python -m sim scenario=<name>`) to rewrite it"

# `summary.json` `status` of a run a signal (Ctrl-C, SIGTERM) stopped before its end (docs/results.md).
PARTIAL_STATUS = "interrupted"
PARTIAL_MARK = " (partial)"


def is_partial(summary: Mapping | None) -> bool:
    """A run stopped before its end: its figures cover only the simulated time so far."""
    return bool(summary) and summary.get("status") == PARTIAL_STATUS


def run_label(name: str, partial: bool) -> str:
    """A run's name wherever it is shown, marked when partial so that it is never read as a complete run."""
    return name + PARTIAL_MARK if partial else name


@dataclass(frozen=True)
class Folder:
    """A result folder found under the results root."""

    path: Path
    kind: str  # "run", "sweep" or "plan"
    label: str  # path relative to the results root, for pickers
    done: bool  # runs: the DONE marker is there; sweeps and plans: always True
    mtime: float  # newest-first ordering
    partial: bool = False  # runs: summary.json says a signal stopped the run (`is_partial`)


@dataclass(frozen=True)
class RunData:
    """A run folder that passed `open_run`: its summary, the tables present (with their schemas) and its config."""

    path: Path
    summary: dict
    schemas: dict[str, pa.Schema] = field(default_factory=dict)  # table name -> schema, only tables present
    config_yaml: str | None = None
    overrides: tuple[str, ...] = ()

    @property
    def scenario(self) -> str:
        return str(self.summary.get("scenario", self.path.name))

    @property
    def partial(self) -> bool:
        return is_partial(self.summary)

    @property
    def title(self) -> str:
        """The scenario's name, marked when the run is partial."""
        return run_label(self.scenario, self.partial)

    def has(self, table: str) -> bool:
        return table in self.schemas


def runs_roots(explicit: str | None = None) -> list[Path]:
    """The results folders: `explicit` (comma-separated), else `$INFERPLAN_RUNS_DIR` (separated by commas or
    `os.pathsep`), else `runs/`, `multirun/` and `plans/` under the current directory (where runs, sweeps and plans go)."""
    text = explicit if explicit and explicit.strip() else os.environ.get(RUNS_DIR_ENV) or DEFAULT_RUNS_DIRS
    parts = [p.strip() for p in text.replace(os.pathsep, ",").split(",") if p.strip()]
    if not parts:
        parts = [p.strip() for p in DEFAULT_RUNS_DIRS.split(",")]
    return [Path(p).expanduser() for p in dict.fromkeys(parts)]


def explain(err: InputError) -> str:
    """One line for a person: what is wrong with which file, and what to do."""
    fix = err.fix[:1].upper() + err.fix[1:]
    return f"`{err.file}`: {err.problem}. {fix}."


def _kind(path: Path, names: set[str]) -> str | None:
    if "plan.json" in names:
        return "plan"
    if "sweep.parquet" in names:
        return "sweep"
    if names.intersection(RUN_MARKERS) or (path / ".hydra" / "config.yaml").is_file():
        return "run"
    return None


def discover(roots: list[Path]) -> list[Folder]:
    """Every run, sweep and plan folder under the `roots` (themselves included), newest first.

    Labels are `<root name>/<path below the root>`; missing roots are skipped.
    """
    found = []
    for root in map(Path, roots):
        if not root.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            path = Path(dirpath)
            kind = _kind(path, set(filenames))
            if kind is None:
                continue
            rel = path.relative_to(root).as_posix()
            label = "/".join(p for p in (root.name, "" if rel == "." else rel) if p) or "."
            done = kind != "run" or DONE in filenames
            partial = kind == "run" and done and _partial_on_disk(path)
            found.append(Folder(path=path, kind=kind, label=label, done=done, mtime=path.stat().st_mtime,
                                partial=partial))
    return sorted(found, key=lambda f: (-f.mtime, f.label))


def _partial_on_disk(run_dir: Path) -> bool:
    """`is_partial` of a complete run folder's summary (False when it cannot be read: opening it explains why)."""
    summary = run_dir / SUMMARY
    return summary.is_file() and _summary_partial(str(run_dir), summary.stat().st_mtime_ns)


@functools.lru_cache(maxsize=4096)
def _summary_partial(run_dir: str, mtime_ns: int) -> bool:
    # Keyed by the summary's modification time: the app lists the folders every few seconds, and a sweep's
    # hundreds of jobs are then not all parsed again unless rewritten.
    return is_partial(try_summary(Path(run_dir)))


def require_results_root(roots: list[Path]) -> None:
    """Raise unless at least one of the results folders exists, telling how to point the dashboard elsewhere."""
    if not any(Path(r).is_dir() for r in roots):
        names = ", ".join(str(r) for r in roots) or "(none given)"
        raise InputError(names, "results folder", "does not exist" if len(roots) == 1 else "none of these exists",
                         f"run `python -m sim scenario=smoke` to create `runs/`, or name another folder in the "
                         f"sidebar (or in ${RUNS_DIR_ENV})")


def read_json(path: Path, what: str) -> dict:
    """A JSON object from `path`; missing, unreadable or non-object files raise `InputError`."""
    if not path.is_file():
        raise InputError(path, what, "file missing", RERUN_FIX)
    try:
        value = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(path, what, f"not valid JSON ({type(err).__name__})", RERUN_FIX) from None
    if not isinstance(value, dict):
        raise InputError(path, what, f"holds a {type(value).__name__}, expected a JSON object", RERUN_FIX)
    return value


def read_schema(path: Path, required: tuple[str, ...] = ()) -> pa.Schema:
    """The schema of a Parquet file, checking that it is readable and has the `required` columns."""
    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowException) as err:
        raise InputError(path, "file", f"not a readable Parquet file ({type(err).__name__}; truncated or corrupt)",
                         RERUN_FIX) from None
    missing = [c for c in required if c not in schema.names]
    if missing:
        raise InputError(path, ", ".join(missing), "column missing (written by a different simulator version?)",
                         RERUN_FIX)
    return schema


def _read_overrides(path: Path) -> tuple[str, ...]:
    """Hydra's `.hydra/overrides.yaml`: a YAML list of `key=value` strings (() when absent or unreadable)."""
    if not path.is_file():
        return ()
    try:
        items = yaml.safe_load(path.read_text(errors="replace"))
    except yaml.YAMLError:
        return ()
    return tuple(str(i) for i in items) if isinstance(items, list) else ()


def open_run(path: Path) -> RunData:
    """Check a run folder and read its summary; every problem is an `InputError` (never a traceback)."""
    path = Path(path)
    if not path.is_dir():
        raise InputError(path, "folder", "not found", "pick a run from the list, or check the results folder")
    summary = dict(read_summary(path))  # (the only reader: checks DONE, the schema version, the JSON)
    schemas = {}
    for table in TABLES:
        file = table_path(path, table)
        if file.is_file():
            schemas[table] = read_schema(file, REQUIRED_COLUMNS[table])
    config = path / ".hydra" / "config.yaml"
    return RunData(path=path, summary=summary, schemas=schemas,
                   config_yaml=config.read_text(errors="replace") if config.is_file() else None,
                   overrides=_read_overrides(path / ".hydra" / "overrides.yaml"))


def read_table(path: Path, table: str, columns: list[str] | None = None) -> pd.DataFrame:
    """One of a run's tables as a DataFrame, reading only `columns` (those present) when given."""
    file = table_path(Path(path), table)
    schema = read_schema(file, REQUIRED_COLUMNS.get(table, ()))
    cols = None if columns is None else [c for c in columns if c in schema.names]
    try:
        return pq.read_table(file, columns=cols).to_pandas()
    except (OSError, pa.ArrowException) as err:
        raise InputError(file, "file", f"not a readable Parquet file ({type(err).__name__})", RERUN_FIX) from None


def read_sweep(path: Path) -> pd.DataFrame:
    """`sweep.parquet` of a sweep (or plan) folder; one row per job."""
    file = Path(path) / "sweep.parquet"
    if not file.is_file():
        raise InputError(file, "file", "missing", "run the sweep again (`python -m sim -m ...` writes it last)")
    read_schema(file)
    try:
        df = pq.read_table(file).to_pandas()
    except (OSError, pa.ArrowException) as err:
        raise InputError(file, "file", f"not a readable Parquet file ({type(err).__name__})",
                         "run the sweep again") from None
    if df.empty:
        raise InputError(file, "rows", "the sweep has no jobs", "run the sweep again")
    return df


def resolve_job_dir(sweep_path: Path, run_dir: object) -> Path | None:
    """A sweep row's `run_dir`, absolute or relative to the sweep folder (or the current directory)."""
    if not isinstance(run_dir, str) or not run_dir:
        return None
    candidate = Path(run_dir)
    if candidate.is_absolute():
        return candidate
    for base in (Path(sweep_path), Path.cwd()):
        if (base / candidate).is_dir():
            return base / candidate
    return Path(sweep_path) / candidate


def read_plan(path: Path) -> dict:
    """`plan.json` of a plan folder."""
    return read_json(Path(path) / "plan.json", "plan.json")
