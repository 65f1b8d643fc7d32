"""`measurements.parquet`: one row per timed (op, dtype, impl, shape), with the campaign's provenance.

Columns (the dashboard reads these names):
    op, dtype, impl      string   what was timed (`impl` names the implementation, e.g. kernels.gemm_fp8_block)
    primary              bool     the implementation our stack runs (else a library baseline)
    shape                string   the op's shape parameters, e.g. "m=64,n=6144,k=4096" (see calibrate.shapes)
    layers, models       string   which model layers / models need this shape, "+"-joined
    flops, bytes         float64  the op's work by the formulas of calibrate.ops (the simulator's)
    roofline_s           float64  max(flops / peak, bytes / bandwidth) over the campaign's peaks (metadata)
    measured_s           float64  median seconds per launch
    p20_s, p80_s         float64  20th and 80th percentile seconds per launch
    repeats              int64    launches timed
    predicted_s          float64  the fitted curve of this (op, dtype, impl) at this shape (NaN before a fit)
    held_out             bool     the shape was withheld from the fit (its error is the reported one)
    in_profile           bool     the row is on the profile's curve (primary, or the fallback for the shape)
Metadata key `inferplan` (JSON): provenance (calibrate.provenance), hardware, peaks {used, datasheet, measured},
skipped and failed points.

The store is written atomically (temporary file + rename) every few seconds during a sweep, so an interrupted
campaign keeps what it measured; reopening it resumes (points already present are not measured again).
"""
from __future__ import annotations

import json
import math
import os
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from calibrate.provenance import device_identity
from inferplan.errors import InputError

METADATA_KEY = b"inferplan"
COLUMNS: dict[str, pa.DataType] = {
    "op": pa.string(), "dtype": pa.string(), "impl": pa.string(), "primary": pa.bool_(), "shape": pa.string(),
    "layers": pa.string(), "models": pa.string(), "flops": pa.float64(), "bytes": pa.float64(),
    "roofline_s": pa.float64(), "measured_s": pa.float64(), "p20_s": pa.float64(), "p80_s": pa.float64(),
    "repeats": pa.int64(), "predicted_s": pa.float64(), "held_out": pa.bool_(), "in_profile": pa.bool_(),
}
NAME = "measurements.parquet"


def row_key(row: dict) -> tuple[str, str, str, str]:
    return row["op"], row["dtype"], row["impl"], row["shape"]


class MeasurementStore:
    """The rows of one campaign (one device, one out_dir) and its metadata."""

    def __init__(self, path: Path, metadata: dict, rows: list[dict]) -> None:
        self.path, self.metadata, self.rows = path, metadata, rows
        self._index = {row_key(r): i for i, r in enumerate(rows)}
        self.lock = threading.RLock()  # add/write from the campaign's thread, write from the signal path
        self.closed = False  # after `close()`, writes are no-ops (the process is leaving)

    @classmethod
    def open(cls, out_dir: Path, provenance: dict, hardware: str) -> MeasurementStore:
        """Load `out_dir/measurements.parquet` if present (refusing one from another device or hardware entry),
        else start an empty store."""
        path = Path(out_dir) / NAME
        fresh = {"provenance": provenance, "hardware": hardware, "skipped": {}, "failed": {}}
        if not path.exists():
            return cls(path, fresh, [])
        fix = f"calibrate into another out_dir, or delete {path} to start over"
        try:
            table = pq.read_table(path)
            meta = json.loads((table.schema.metadata or {})[METADATA_KEY])
        except Exception as err:  # corrupt or foreign file
            raise InputError(path, "file", f"not a measurements file ({type(err).__name__})", fix) from None
        missing = [c for c in COLUMNS if c not in table.column_names]
        if missing:
            raise InputError(path, missing[0], "column missing", fix)
        if meta.get("hardware") != hardware:
            raise InputError(path, "metadata.hardware", f"measured as {meta.get('hardware')!r}, this run is "
                             f"{hardware!r}", fix)
        old, new = device_identity(meta.get("provenance", {})), device_identity(provenance)
        if old != new:
            diff = {k: (old[k], new[k]) for k in old if old[k] != new[k]}
            raise InputError(path, "metadata.provenance", f"taken on another device or setup: {diff}", fix)
        meta["provenance"] = {**meta["provenance"], "resumed": provenance["date"]}
        rows = table.select(list(COLUMNS)).to_pylist()
        return cls(path, meta, rows)

    def has(self, key: tuple[str, str, str, str]) -> bool:
        return key in self._index

    def get(self, key: tuple[str, str, str, str]) -> dict | None:
        i = self._index.get(key)
        return None if i is None else self.rows[i]

    def add(self, row: dict) -> None:
        full = {c: row.get(c) for c in COLUMNS}
        full["predicted_s"] = row.get("predicted_s", math.nan)
        full["held_out"] = bool(row.get("held_out", False))
        full["in_profile"] = bool(row.get("in_profile", False))
        key = row_key(full)
        with self.lock:
            if key in self._index:
                self.rows[self._index[key]] = full
            else:
                self._index[key] = len(self.rows)
                self.rows.append(full)

    def note_models(self, key: tuple[str, str, str, str], model: str, layers: tuple[str, ...]) -> None:
        """Record that `model` also needs an already measured point."""
        row = self.rows[self._index[key]]
        row["models"] = "+".join(sorted(set(row["models"].split("+")) | {model}))
        row["layers"] = "+".join(sorted(set(row["layers"].split("+")) | set(layers)))

    def write(self) -> Path:
        """Write atomically (temporary file, then rename): a reader never sees a half-written file."""
        with self.lock:
            if self.closed:
                return self.path
            self.path.parent.mkdir(parents=True, exist_ok=True)
            table = pa.table({c: pa.array([r[c] for r in self.rows], type=t) for c, t in COLUMNS.items()})
            table = table.replace_schema_metadata({METADATA_KEY: json.dumps(self.metadata, sort_keys=True,
                                                                            default=str).encode()})
            tmp = self.path.with_suffix(".parquet.tmp")
            pq.write_table(table, tmp)
            os.replace(tmp, self.path)
            return self.path


    def close(self) -> Path:
        """The last write: later `write()` calls (from a thread still running) do nothing."""
        with self.lock:
            self.write()
            self.closed = True
            return self.path


def read_measurements(path: str | Path) -> tuple[list[dict], dict]:
    """Rows and metadata of a measurements file (for the dashboard and tests)."""
    table = pq.read_table(path)
    return table.to_pylist(), json.loads((table.schema.metadata or {}).get(METADATA_KEY, b"{}"))
