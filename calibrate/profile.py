"""The hardware profile: the file calibration writes and the simulator loads.

A profile is a Parquet table of efficiency curves, one per (op, dtype), plus its provenance in the file's
metadata. An op's predicted time is `launch_s + roofline_s / efficiency(roofline_s)`, where `roofline_s` is the
op's roofline time over the peaks stored *in the profile* (so a profile is self-consistent whatever the hardware
config says) and `efficiency` is interpolated in log(roofline_s) between the knots, clamped at the ends.

Columns (one row per knot):
    op          string   one of calibrate.ops.OPS
    dtype       string   one of calibrate.ops.DTYPES
    roofline_s  float64  > 0, strictly increasing within an (op, dtype)
    efficiency  float64  in (0, 2]: roofline time / measured-minus-launch time at that size
    launch_s    float64  >= 0, constant within an (op, dtype): fixed per-launch overhead
Metadata key `inferplan` (JSON): schema_version, hardware, kind ("measured"), device, driver, torch, triton,
date, git_commit, models, peaks {flops_per_s: {bf16, fp8, int8, fp32}, mem_bytes_per_s}, fit {"op/dtype": {...}}.

Grid profiles (schema_version 2, kind "measured_grid"; `write_grid_profile`, made by `python -m
calibrate.import_aic`) hold measured shape grids instead of knots: one row per measured shape, columns
`GRID_STRING_COLUMNS` (family, op, dtype, compute, variant, kernel, version), `GRID_NUMERIC_COLUMNS` (the shape:
m, n, k, batch, seq, ctx, heads, ... bytes; null where a family has no such axis) and `latency_s` (> 0). Their
metadata adds `peaks.link_bytes_per_s`, `source` and per-family `provenance`. `Profile.grid` prices an op from them
(`calibrate.aic.grid_model.GridModel.latency_s(op, **shape)`); such a profile has no curves. Knot profiles
(schema_version 1) load exactly as before, with `grid` None.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from calibrate.ops import DTYPES, OPS, log_interp
from inferplan.errors import InputError

SCHEMA_VERSION = 1
GRID_SCHEMA_VERSION = 2
METADATA_KEY = b"inferplan"
COLUMNS = {"op": pa.string(), "dtype": pa.string(), "roofline_s": pa.float64(), "efficiency": pa.float64(),
           "launch_s": pa.float64()}
REQUIRED_METADATA = ("schema_version", "hardware", "kind", "device", "date", "peaks")


@dataclass(frozen=True)
class EfficiencyCurve:
    """Achieved fraction of the roofline as a function of the op's roofline time, plus a launch overhead."""

    roofline_s: tuple[float, ...]
    efficiency: tuple[float, ...]
    launch_s: float

    def time_s(self, roofline_s: float) -> float:
        """Predicted op time (s) for an op whose roofline time is `roofline_s`; > 0 when either term is."""
        if roofline_s <= 0.0:
            return self.launch_s
        eff = log_interp(roofline_s, self.roofline_s, self.efficiency)
        return self.launch_s + roofline_s / eff


@dataclass(frozen=True)
class Profile:
    """A loaded, validated profile. `curves[(op, dtype)]` gives the fitted curve."""

    path: str
    hardware: str
    peak_flops_per_s: dict[str, float]
    mem_bytes_per_s: float
    curves: dict[tuple[str, str], EfficiencyCurve]
    provenance: dict = field(default_factory=dict)
    grid: Any = None  # calibrate.aic.grid_model.GridModel of a grid profile (schema_version 2), else None

    def curve(self, op: str, dtype: str) -> EfficiencyCurve | None:
        return self.curves.get((op, dtype))


def write_profile(path: str | Path, rows: list[dict], metadata: dict) -> Path:
    """Write knots `rows` (dicts with the COLUMNS) and `metadata` (see module doc) to `path`; returns the path."""
    meta = {"schema_version": SCHEMA_VERSION, "kind": "measured", **metadata}
    missing = [k for k in REQUIRED_METADATA if k not in meta]
    if missing:
        raise ValueError(f"profile metadata lacks {missing}")
    rows = sorted(rows, key=lambda r: (r["op"], r["dtype"], r["roofline_s"]))
    table = pa.table({name: pa.array([r[name] for r in rows], type=t) for name, t in COLUMNS.items()})
    table = table.replace_schema_metadata({METADATA_KEY: json.dumps(meta, sort_keys=True).encode()})
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


def load_profile(path: str | Path, expected_hardware: str | None = None) -> Profile:
    """Read and validate a profile; every problem is an `InputError` naming the file, the field and the fix."""
    path = Path(path)
    fix_regen = "re-run `python -m calibrate hardware=<name> model=<name>` to regenerate it"
    if not path.is_file():
        raise InputError(path, "path", "profile file not found", "give an existing calibrate/profiles/<hw>.parquet "
                         "or set profile=analytical")
    try:
        table = pq.ParquetFile(path).read()  # (read_table goes through pyarrow.dataset, which imports pandas)
    except Exception as err:  # pyarrow raises several types for corrupt files
        raise InputError(path, "file", f"not a readable Parquet file ({type(err).__name__})", fix_regen) from None
    raw = (table.schema.metadata or {}).get(METADATA_KEY)
    if raw is None:
        raise InputError(path, "metadata", "no inferplan provenance metadata", fix_regen)
    try:
        meta = json.loads(raw)
    except json.JSONDecodeError:
        raise InputError(path, "metadata", "provenance metadata is not JSON", fix_regen) from None
    for key in REQUIRED_METADATA:
        if key not in meta:
            raise InputError(path, f"metadata.{key}", "missing", fix_regen)
    if meta["schema_version"] not in (SCHEMA_VERSION, GRID_SCHEMA_VERSION):
        raise InputError(path, "metadata.schema_version", f"is {meta['schema_version']}, this inferplan reads "
                         f"{SCHEMA_VERSION} (and grid profiles, {GRID_SCHEMA_VERSION}) (stale profile)", fix_regen)
    if expected_hardware is not None and meta["hardware"] != expected_hardware:
        raise InputError(path, "metadata.hardware", f"profile is for {meta['hardware']!r}, the pool runs on "
                         f"{expected_hardware!r}", f"use calibrate/profiles/{expected_hardware}.parquet or "
                         "profile=analytical")
    if meta["schema_version"] == GRID_SCHEMA_VERSION:
        return _load_grid(path, table, meta)
    for name, typ in COLUMNS.items():
        if name not in table.column_names:
            raise InputError(path, name, "column missing", fix_regen)
        if not table.schema.field(name).type.equals(typ):
            raise InputError(path, name, f"has type {table.schema.field(name).type}, expected {typ}", fix_regen)
    try:
        peaks = meta["peaks"]
        peak_flops = {k: float(v) for k, v in peaks["flops_per_s"].items()}
        mem_bw = float(peaks["mem_bytes_per_s"])
    except (KeyError, TypeError, ValueError):
        raise InputError(path, "metadata.peaks", "needs flops_per_s {format: value} and mem_bytes_per_s",
                         fix_regen) from None
    cols = table.to_pydict()
    grouped: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    for i, (op, dtype) in enumerate(zip(cols["op"], cols["dtype"])):
        row = f"row {i}"
        if op not in OPS:
            raise InputError(path, f"{row}.op", f"unknown op {op!r}; valid: {', '.join(OPS)}", fix_regen)
        if dtype not in DTYPES:
            raise InputError(path, f"{row}.dtype", f"unknown dtype {dtype!r}; valid: {', '.join(DTYPES)}", fix_regen)
        r, e, l = cols["roofline_s"][i], cols["efficiency"][i], cols["launch_s"][i]
        if r is None or not r > 0:
            raise InputError(path, f"{row}.roofline_s", f"must be > 0, got {r}", fix_regen)
        if e is None or not 0 < e <= 2:
            raise InputError(path, f"{row}.efficiency", f"must be in (0, 2], got {e}", fix_regen)
        if l is None or not l >= 0:
            raise InputError(path, f"{row}.launch_s", f"must be >= 0, got {l}", fix_regen)
        grouped.setdefault((op, dtype), []).append((r, e, l))
    if not grouped:
        raise InputError(path, "rows", "profile has no knots", fix_regen)
    curves = {}
    for key, knots in grouped.items():
        knots.sort()
        xs = [k[0] for k in knots]
        if any(b <= a for a, b in zip(xs, xs[1:])):
            raise InputError(path, f"{key[0]}/{key[1]}.roofline_s", "knots are not strictly increasing", fix_regen)
        if len({k[2] for k in knots}) != 1:
            raise InputError(path, f"{key[0]}/{key[1]}.launch_s", "differs between knots of one curve", fix_regen)
        curves[key] = EfficiencyCurve(tuple(xs), tuple(k[1] for k in knots), knots[0][2])
    return Profile(path=str(path), hardware=str(meta["hardware"]), peak_flops_per_s=peak_flops,
                   mem_bytes_per_s=mem_bw, curves=curves, provenance=meta)


# -- grid profiles (schema_version 2) -------------------------------------------------------------------------
GRID_STRING_COLUMNS: tuple[str, ...] = ("family", "op", "dtype", "compute", "variant", "kernel", "version")
GRID_NUMERIC_COLUMNS: tuple[str, ...] = ("m", "n", "k", "batch", "seq", "ctx", "heads", "kv_heads", "head_dim",
                                         "tokens", "hidden", "inter", "topk", "experts", "tp", "ep", "gpus", "bytes")


def write_grid_profile(path: str | Path, columns: dict[str, Any], metadata: dict) -> Path:
    """Write a grid profile: `columns` (GRID_STRING_COLUMNS, GRID_NUMERIC_COLUMNS with NaN where a family has no
    such axis, `latency_s`), all of one length, and `metadata` (REQUIRED_METADATA plus peaks.link_bytes_per_s).
    Rows are sorted by family and shape (a stable file for the same input); latency is stored as float32 (7
    significant digits: the measurements carry 3-5)."""
    meta = {**metadata, "schema_version": GRID_SCHEMA_VERSION, "kind": "measured_grid"}
    missing = [k for k in REQUIRED_METADATA if k not in meta]
    if missing:
        raise ValueError(f"grid profile metadata lacks {missing}")
    n = len(columns["latency_s"])
    cols = {c: np.asarray(columns.get(c, [""] * n), dtype=object) for c in GRID_STRING_COLUMNS}
    cols.update({c: np.asarray(columns.get(c, np.full(n, np.nan)), dtype=np.float64) for c in GRID_NUMERIC_COLUMNS})
    keys = [cols[c] for c in reversed(GRID_NUMERIC_COLUMNS)] + [cols[c].astype(str) for c in
                                                                 reversed(GRID_STRING_COLUMNS[:5])]
    order = np.lexsort(keys)
    arrays = {c: pa.array(cols[c][order].tolist(), type=pa.string()).dictionary_encode() for c in GRID_STRING_COLUMNS}
    for c in GRID_NUMERIC_COLUMNS:
        v = cols[c][order]
        arrays[c] = pa.array(v, type=pa.float64(), mask=np.isnan(v))
    arrays["latency_s"] = pa.array(np.asarray(columns["latency_s"], dtype=np.float32)[order], type=pa.float32())
    table = pa.table(arrays).replace_schema_metadata({METADATA_KEY: json.dumps(meta, sort_keys=True).encode()})
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Latencies are split into byte streams (the exponent bytes compress apart from the mantissas) and kept out of
    # the dictionary: a quarter smaller than dictionary-encoding them, read back the same by any Parquet reader.
    pq.write_table(table, path, compression="zstd", compression_level=19,
                   use_dictionary=[c for c in table.column_names if c != "latency_s"],
                   use_byte_stream_split=["latency_s"])
    return path


def _values(arr: pa.Array) -> np.ndarray:
    """A fixed-width numeric array's values read from its buffer (nulls hold whatever the buffer has). pyarrow's own
    conversions of chunked, null-holding or dictionary arrays load pandas and pyarrow.compute, a large share of a
    short run's start-up, so a profile is read from the buffers."""
    kind = "f" if pa.types.is_floating(arr.type) else "i" if pa.types.is_signed_integer(arr.type) else \
        "u" if pa.types.is_unsigned_integer(arr.type) else ""
    if not kind:
        raise TypeError(f"not a numeric column: {arr.type}")
    dtype = np.dtype(f"{kind}{arr.type.bit_width // 8}")
    return np.frombuffer(arr.buffers()[1], dtype=dtype, count=len(arr) + arr.offset)[arr.offset:]


def _floats(column: pa.ChunkedArray) -> np.ndarray:
    """A numeric column as float64, NaN for nulls."""
    arr = column.combine_chunks()
    out = _values(arr).astype(np.float64)
    if arr.null_count:
        bits = np.unpackbits(np.frombuffer(arr.buffers()[0], dtype=np.uint8), bitorder="little")
        out[bits[arr.offset: arr.offset + len(arr)] == 0] = np.nan
    return out


def _strings(column: pa.ChunkedArray) -> np.ndarray:
    """A string column (dictionary-encoded or plain) as an object array."""
    arr = column.combine_chunks()
    if pa.types.is_dictionary(arr.type):
        if arr.null_count:
            raise TypeError("null in a dictionary-encoded string column")
        return np.asarray(arr.dictionary.to_pylist(), dtype=object)[_values(arr.indices)]
    return np.asarray(arr.to_pylist(), dtype=object)


def _load_grid(path: Path, table: pa.Table, meta: dict) -> Profile:
    """A grid profile's columns validated and handed to `GridModel` (imported here: knot profiles never need it)."""
    from calibrate.aic.grid import FAMILIES, Peaks
    from calibrate.aic.grid_model import GridModel
    from calibrate.aic.names import GRID_OPS

    fix = "re-run `python -m calibrate.import_aic <systems folder> --hardware <name>` to regenerate it"
    for name in GRID_STRING_COLUMNS + GRID_NUMERIC_COLUMNS + ("latency_s",):
        if name not in table.column_names:
            raise InputError(path, name, "column missing", fix)
    try:
        peaks = meta["peaks"]
        flops = {k: float(v) for k, v in peaks["flops_per_s"].items()}
        p = Peaks(flops, float(peaks["mem_bytes_per_s"]), float(peaks["link_bytes_per_s"]))
    except (KeyError, TypeError, ValueError):
        raise InputError(path, "metadata.peaks", "needs flops_per_s {format: value}, mem_bytes_per_s and "
                         "link_bytes_per_s", fix) from None
    cols: dict[str, np.ndarray] = {}
    for c in GRID_STRING_COLUMNS:
        cols[c] = _strings(table.column(c))
    for c in GRID_NUMERIC_COLUMNS + ("latency_s",):
        cols[c] = _floats(table.column(c))
    if len(cols["latency_s"]) == 0:
        raise InputError(path, "rows", "grid profile has no rows", fix)
    bad = [f for f in set(cols["family"].tolist()) if f not in FAMILIES]
    if bad:
        raise InputError(path, "family", f"unknown family {bad[0]!r}; valid: {', '.join(FAMILIES)}", fix)
    bad = [o for o in set(cols["op"].tolist()) if o not in GRID_OPS]
    if bad:
        raise InputError(path, "op", f"unknown op {bad[0]!r}; valid: {', '.join(GRID_OPS)}", fix)
    bad = [d for d in set(cols["dtype"].tolist()) if d not in DTYPES]
    if bad:
        raise InputError(path, "dtype", f"unknown dtype {bad[0]!r}; valid: {', '.join(DTYPES)}", fix)
    lat = cols["latency_s"]
    if not (np.isfinite(lat) & (lat > 0)).all():
        i = int(np.flatnonzero(~(np.isfinite(lat) & (lat > 0)))[0])
        raise InputError(path, f"row {i}.latency_s", f"must be > 0, got {lat[i]}", fix)
    for family, spec in FAMILIES.items():
        rows = cols["family"] == family
        for c in spec.combo + spec.dense:
            v = cols[c][rows]
            if not (v > 0).all():  # (NaN fails too)
                i = int(np.flatnonzero(rows)[np.flatnonzero(~(v > 0))[0]])
                raise InputError(path, f"row {i}.{c}", f"{family} rows need {c} > 0, got {cols[c][i]}", fix)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return Profile(path=str(path), hardware=str(meta["hardware"]), peak_flops_per_s=flops,
                   mem_bytes_per_s=p.mem_bytes_per_s, curves={}, provenance=meta, grid=GridModel(cols, p, digest))
