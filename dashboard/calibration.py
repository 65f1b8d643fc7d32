"""Read calibration outputs for the Calibration page: a profile, the measurements behind it, and validation.

- A **profile** (`calibrate/profiles/<hardware>.parquet`): one row per knot `op, dtype, roofline_s, efficiency,
  launch_s`, provenance as JSON under the schema metadata key `inferplan` (see `calibrate/profile.py`).
- A **calibration folder** (`python -m calibrate` writes `calibration/<hardware>/`): `measurements.parquet` (`op,
  dtype, shape, flops, bytes, roofline_s, measured_s, predicted_s, held_out`, and where present `impl`, `primary`,
  `in_profile`), `fit.json` and the folder's own profile `<hardware>.parquet`.
- A **validation run** (`validation.json`, from `python -m sim.validate`).
- A **silicon validation matrix** (`matrix.json` of schema `inferplan.silicon_matrix/1` and `matrix.vl.json`, from
  `python -m sim.validate.silicon`): errors per partition and the predicted-vs-measured chart.

Missing columns or metadata do not stop the page: loaders return what they could read plus notes saying what is
missing; only an unreadable file is an `InputError`.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from dashboard.data import read_json
from inferplan.errors import InputError

PROFILES_DIR = Path("calibrate") / "profiles"
CALIBRATION_DIRS = ("calibration", "calibrate")  # where `python -m calibrate` writes, and the package folder
METADATA_KEY = b"inferplan"
PROFILE_COLUMNS = ("op", "dtype", "roofline_s", "efficiency", "launch_s")
MEASUREMENT_COLUMNS = ("op", "dtype", "shape", "flops", "bytes", "roofline_s", "measured_s", "predicted_s",
                       "held_out")
RECALIBRATE = "re-run `python -m calibrate hardware=<name> model=<name>`"


@dataclass(frozen=True)
class Loaded:
    """A table read as far as it goes: the rows, its provenance (profiles) and notes on what is missing."""

    path: Path
    rows: pd.DataFrame
    provenance: dict
    notes: tuple[str, ...]


def _read_parquet(path: Path) -> pa.Table:
    try:
        return pq.read_table(path)
    except (OSError, pa.ArrowException) as err:
        raise InputError(path, "file", f"not a readable Parquet file ({type(err).__name__})", RECALIBRATE) from None


def _missing(table: pa.Table, expected: tuple[str, ...]) -> list[str]:
    return [c for c in expected if c not in table.column_names]


def list_profiles(folder: Path = PROFILES_DIR, calibration_folder: Path | None = None) -> list[Path]:
    """Profile files in `folder`, by name, then the profile a calibration folder wrote beside its measurements."""
    found = sorted(Path(folder).glob("*.parquet")) if Path(folder).is_dir() else []
    if calibration_folder is not None and Path(calibration_folder).is_dir():
        found += [p for p in sorted(Path(calibration_folder).glob("*.parquet")) if p.name != "measurements.parquet"]
    return found


def load_profile(path: Path) -> Loaded:
    """A profile's knots and provenance; notes name missing columns or metadata."""
    table = _read_parquet(Path(path))
    notes = [f"column `{c}` missing" for c in _missing(table, PROFILE_COLUMNS)]
    raw = (table.schema.metadata or {}).get(METADATA_KEY)
    provenance: dict = {}
    if raw is None:
        notes.append("no provenance metadata (key `inferplan`): where and how it was measured is unknown")
    else:
        try:
            provenance = json.loads(raw)
        except json.JSONDecodeError:
            notes.append("provenance metadata is not valid JSON")
    return Loaded(Path(path), table.to_pandas(), provenance if isinstance(provenance, dict) else {}, tuple(notes))


def find_folders(roots: list[Path], marker: str) -> list[Path]:
    """Folders under any of `roots` that hold a file named `marker`, newest first."""
    found = set()
    for root in roots:
        if not Path(root).is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            if marker in filenames:
                found.add(Path(dirpath))
    return sorted(found, key=lambda p: -p.stat().st_mtime)


def load_measurements(folder: Path) -> Loaded:
    """`measurements.parquet` of a calibration folder, with `held_out` as bool when present."""
    path = Path(folder) / "measurements.parquet"
    if not path.is_file():
        raise InputError(path, "file", "missing", RECALIBRATE)
    table = _read_parquet(path)
    notes = [f"column `{c}` missing" for c in _missing(table, MEASUREMENT_COLUMNS)]
    rows = table.to_pandas()
    if "held_out" in rows:
        rows["held_out"] = rows["held_out"].fillna(False).astype(bool)
    if "shape" in rows:
        rows["shape"] = rows["shape"].astype(str)
    return Loaded(path, rows, {}, tuple(notes))


def load_optional_json(path: Path) -> dict | None:
    """A JSON object if the file exists (`InputError` if it is broken), else None."""
    return read_json(Path(path), Path(path).name) if Path(path).is_file() else None


def error_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (op, dtype): how far the fitted times are from the measured ones, in percent.

    Errors are `(predicted - measured) / measured`, taken over held-out points when the op has any (the honest
    figure), else over all points (then the column `evaluated on` says so).
    """
    need = {"op", "measured_s", "predicted_s"}
    if not need.issubset(rows.columns) or rows.empty:
        return pd.DataFrame()
    d = rows[(rows["measured_s"] > 0) & rows["predicted_s"].notna()].copy()
    d["err"] = (d["predicted_s"] - d["measured_s"]) / d["measured_s"] * 100.0
    keys = [k for k in ("op", "dtype", "impl") if k in d]  # one fitted curve per (op, dtype, implementation)
    out = []
    for key, group in d.groupby(keys):
        held = group[group["held_out"]] if "held_out" in group else group.iloc[0:0]
        basis, sample = ("held-out", held) if len(held) else ("all (none held out)", group)
        abs_err = sample["err"].abs()
        key = key if isinstance(key, tuple) else (key,)
        out.append({**dict(zip(keys, key)), "points": len(group), "held out": len(held), "evaluated on": basis,
                    "median |error| (%)": abs_err.median(), "P90 |error| (%)": abs_err.quantile(0.9),
                    "max |error| (%)": abs_err.max(), "mean signed error (%)": sample["err"].mean()})
    return pd.DataFrame(out).sort_values("median |error| (%)", ascending=False).reset_index(drop=True)


def on_profile(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows the simulator's profile is made of (`in_profile`, else `primary`), or all rows without those
    columns: library baselines timed for comparison stay out of the charts."""
    for col in ("in_profile", "primary"):
        if col in rows:
            return rows[rows[col].fillna(False).astype(bool)]
    return rows


def roofline_points(rows: pd.DataFrame) -> pd.DataFrame:
    """Achieved points: arithmetic intensity (FLOP/byte) and achieved TFLOP/s of each measurement."""
    if not {"flops", "bytes", "measured_s", "op"}.issubset(rows.columns):
        return pd.DataFrame()
    d = rows[(rows["flops"] > 0) & (rows["bytes"] > 0) & (rows["measured_s"] > 0)].copy()
    d["intensity"] = d["flops"] / d["bytes"]
    d["tflops"] = d["flops"] / d["measured_s"] / 1e12
    for col in ("dtype", "shape"):
        if col not in d:
            d[col] = ""
    return d[["op", "dtype", "shape", "intensity", "tflops"]]


def peaks_of(*sources: dict | None) -> tuple[dict[str, float], float | None]:
    """`(peak FLOP/s per format, memory bytes/s)` from the first source with `peaks` (profile, then fit.json)."""
    for src in sources:
        peaks = (src or {}).get("peaks")
        if isinstance(peaks, dict) and isinstance(peaks.get("used"), dict):  # fit.json: {used, datasheet, measured}
            peaks = peaks["used"]
        if isinstance(peaks, dict):
            try:
                flops = {str(k): float(v) for k, v in (peaks.get("flops_per_s") or {}).items()}
                bw = peaks.get("mem_bytes_per_s")
                return flops, float(bw) if bw is not None else None
            except (TypeError, ValueError):
                continue
    return {}, None


def roofline_lines(peak_flops: dict[str, float], mem_bytes_per_s: float | None, lo: float, hi: float) -> pd.DataFrame:
    """Roofline `min(peak, intensity x bandwidth)` per format over intensities `lo..hi` (FLOP/byte), in TFLOP/s."""
    if not peak_flops or not mem_bytes_per_s or not lo > 0 or not hi > lo:
        return pd.DataFrame(columns=["format", "intensity", "tflops"])
    grid = np.geomspace(lo / 2, hi * 2, 60)
    rows = [{"format": fmt, "intensity": x, "tflops": min(peak, x * mem_bytes_per_s) / 1e12}
            for fmt, peak in sorted(peak_flops.items()) for x in grid]
    return pd.DataFrame(rows)


def flat_items(value: object, prefix: str = "") -> list[tuple[str, str]]:
    """Nested JSON as `(dotted.key, text)` rows, for a provenance or validation table."""
    if isinstance(value, dict):
        out = []
        for k, v in value.items():
            out.extend(flat_items(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(value, list) and all(not isinstance(v, (dict, list)) for v in value):
        return [(prefix, ", ".join(map(str, value)))]
    if isinstance(value, list):
        return [row for i, v in enumerate(value) for row in flat_items(v, f"{prefix}[{i}]")]
    return [(prefix, "" if value is None else str(value))]


MATRIX_SCHEMA = "inferplan.silicon_matrix/1"
MATRIX_MARKER = "matrix.json"


@dataclass(frozen=True)
class Matrix:
    """A silicon matrix folder: its document, the chart spec (None when absent) and a table per partition."""

    path: Path
    doc: dict
    chart: dict | None
    partitions: pd.DataFrame


def matrix_folders(candidates: list[Path]) -> list[Path]:
    """The folders among `candidates` whose `matrix.json` is a silicon matrix (other `matrix.json` files are not)."""
    out = []
    for folder in candidates:
        try:
            doc = json.loads((Path(folder) / MATRIX_MARKER).read_text())
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and doc.get("schema") == MATRIX_SCHEMA:
            out.append(Path(folder))
    return out


def matrix_table(doc: dict) -> pd.DataFrame:
    """One row per partition, then `overall`: rows and TTFT/TPOT median |error|, MAPE and bias (%)."""
    rows = []
    items = list((doc.get("partitions") or {}).items()) + [("overall", doc.get("overall") or {})]
    for name, s in items:
        row = {"partition": name, "rows": s.get("rows", 0)}
        for m in ("ttft", "tpot"):
            fig = s.get(m) or {}
            row |= {f"{m.upper()} median |error| (%)": fig.get("median_abs_pct"),
                    f"{m.upper()} MAPE (%)": fig.get("mape_pct"), f"{m.upper()} bias (%)": fig.get("bias_pct")}
        rows.append(row)
    return pd.DataFrame(rows)


def load_matrix(folder: Path) -> Matrix:
    """A silicon matrix folder (`InputError` when `matrix.json` is broken; a missing chart is None)."""
    doc = read_json(Path(folder) / MATRIX_MARKER, MATRIX_MARKER)
    spec_path = Path(folder) / "matrix.vl.json"
    chart = read_json(spec_path, spec_path.name) if spec_path.is_file() else None
    return Matrix(Path(folder), doc, chart, matrix_table(doc))
