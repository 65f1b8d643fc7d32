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
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from calibrate.ops import DTYPES, OPS, log_interp
from inferplan.errors import InputError

SCHEMA_VERSION = 1
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
        table = pq.read_table(path)
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
    if meta["schema_version"] != SCHEMA_VERSION:
        raise InputError(path, "metadata.schema_version", f"is {meta['schema_version']}, this inferplan reads "
                         f"{SCHEMA_VERSION} (stale profile)", fix_regen)
    if expected_hardware is not None and meta["hardware"] != expected_hardware:
        raise InputError(path, "metadata.hardware", f"profile is for {meta['hardware']!r}, the pool runs on "
                         f"{expected_hardware!r}", f"use calibrate/profiles/{expected_hardware}.parquet or "
                         "profile=analytical")
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
