"""Database rows -> grid rows: our names, our units (seconds, bytes), one row per measured shape, with provenance.

`convert(db, hardware, engine)` returns the grid columns of every family (`calibrate.profile.write_grid_profile`
takes them as they are) and the provenance per family: framework, version asked and versions that measured the
rows, kernels per format, files, collection metadata, and what was left out and why (formats we have no name
for, sliding-window attention, beam search, a secondary kernel at a shape the primary kernel also measured,
donor rows at shapes the version measured itself; repeated measurements of one shape are merged by their median).
"""
from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from calibrate.aic.db import AicDb, TableSource, version_key
from calibrate.aic.grid import FAMILIES
from calibrate.aic.names import (ATTN_DTYPES, COMM_DTYPES, ENGINE_FAMILIES, ENGINES, FAMILY_OP, GEMM_DTYPES, MOE_DTYPES,
                                 NCCL_OPS, allreduce_mode)
from calibrate.profile import GRID_NUMERIC_COLUMNS, GRID_STRING_COLUMNS
from inferplan.errors import InputError

MS = 1e-3  # the database's latency unit


def _skip(counter: Counter, reason: str, mask: pd.Series, by: pd.Series | None = None) -> None:
    if by is None:
        if int(mask.sum()):
            counter[reason] += int(mask.sum())
        return
    for value, n in by[mask].value_counts().items():
        counter[f"{reason} {value}"] += int(n)


def _normalise(family: str, df: pd.DataFrame, skipped: Counter) -> pd.DataFrame:
    """The family's rows in grid columns (no de-duplication yet)."""
    out = pd.DataFrame(index=df.index)
    keep = pd.Series(True, index=df.index)
    if family == "gemm":
        fmt = df["gemm_dtype"].map(GEMM_DTYPES)
        _skip(skipped, "format", fmt.isna(), df["gemm_dtype"])
        keep &= fmt.notna()
        out["dtype"] = fmt
        for c in ("m", "n", "k"):
            out[c] = df[c]
    elif family in ("attn_prefill", "attn_decode"):
        kv, math = df["kv_cache_dtype"].map(ATTN_DTYPES), df["attn_dtype"].map(ATTN_DTYPES)
        bad = kv.isna() | math.isna()
        _skip(skipped, "format", bad, df["attn_dtype"] + "/" + df["kv_cache_dtype"])
        window = df["window_size"] != 0
        _skip(skipped, "sliding window", window & ~bad)
        beam = (df["beam_width"] != 1) if "beam_width" in df else pd.Series(False, index=df.index)
        _skip(skipped, "beam search", beam & ~bad & ~window)
        keep &= ~bad & ~window & ~beam
        out["dtype"], out["compute"] = kv, math
        out["batch"], out["heads"] = df["batch_size"], df["num_heads"]
        out["kv_heads"], out["head_dim"] = df["num_key_value_heads"], df["head_dim"]
        if family == "attn_prefill":
            out["seq"] = df["isl"]
        else:  # generation rows: `step` tokens decoded after an `isl`-token prompt
            out["ctx"] = df["isl"] + df["step"]
    elif family == "moe":
        fmt = df["moe_dtype"].map(MOE_DTYPES)
        _skip(skipped, "format", fmt.isna(), df["moe_dtype"])
        keep &= fmt.notna()
        out["dtype"], out["variant"] = fmt, df["distribution"]
        for ours, theirs in (("tokens", "num_tokens"), ("hidden", "hidden_size"), ("inter", "inter_size"),
                             ("topk", "topk"), ("experts", "num_experts"), ("tp", "moe_tp_size"),
                             ("ep", "moe_ep_size")):
            out[ours] = df[theirs]
    else:
        col = "allreduce_dtype" if family == "custom_allreduce" else "nccl_dtype"
        fmt = df[col].map(lambda d: COMM_DTYPES.get(d, (None, None))[0])
        width = df[col].map(lambda d: COMM_DTYPES.get(d, (None, np.nan))[1])
        _skip(skipped, "format", fmt.isna(), df[col])
        keep &= fmt.notna()
        out["dtype"], out["gpus"] = fmt, df["num_gpus"]
        out["bytes"] = df["message_size"] * width  # message_size counts elements (docs/cost-model.md)
        if family == "custom_allreduce":
            out["variant"] = df["kernel_source"].map(allreduce_mode)
        else:
            op = df["op_name"].map(NCCL_OPS)
            _skip(skipped, "collective", op.isna(), df["op_name"])
            keep &= op.notna()
            out["op"] = op
    out["family"] = family
    for c in FAMILIES[family].cat:  # (GEMM's variant: set by crossval.split_gemm_by_alignment)
        if c not in out:
            out[c] = ""
    if "op" not in out:
        out["op"] = FAMILY_OP[family]
    out["kernel"] = df["kernel_source"].astype(str)
    out["version"] = df["source_version"].astype(str)
    out["latency_s"] = df["latency"] * MS
    bad = ~(out["latency_s"] > 0)
    _skip(skipped, "latency not > 0", bad & keep)
    keep &= ~bad
    return out[keep]


def _dedupe(family: str, rows: pd.DataFrame, asked: str, skipped: Counter) -> pd.DataFrame:
    """One row per shape: the asked version's rows before donors', the primary kernel's (most rows in the format)
    before others', repeats merged by their median."""
    spec = FAMILIES[family]
    key = ["op", *spec.cat, *spec.combo, *spec.dense]
    key = list(dict.fromkeys(key))
    rows = rows.copy()
    rows["_donor"] = (rows["version"] != asked).astype(int)
    first = rows.groupby(key, dropna=False)["_donor"].transform("min")
    _skip(skipped, "donor row at a shape measured by the version itself", rows["_donor"] > first)
    rows = rows[rows["_donor"] == first]
    cat = ["op", *spec.cat]
    size = rows.groupby([*cat, "kernel"], dropna=False)["latency_s"].transform("size")
    rows = rows.assign(_size=size)
    top = rows.groupby(key, dropna=False)["_size"].transform("max")
    secondary = rows["_size"] < top
    _skip(skipped, "secondary kernel at a shape the primary kernel measured", secondary)
    rows = rows[~secondary]
    merged = rows.groupby(key, dropna=False, sort=True).agg(
        latency_s=("latency_s", "median"), kernel=("kernel", "first"), version=("version", "first"),
        repeats=("latency_s", "size"), family=("family", "first")).reset_index()
    extra = int((merged["repeats"] - 1).sum())
    if extra:
        skipped["repeat measurements merged by median"] += extra
    return merged.drop(columns="repeats")


def convert_family(db: AicDb, src: TableSource) -> tuple[pd.DataFrame, dict]:
    """(grid rows, provenance) of one family's table."""
    skipped: Counter = Counter()
    raw = db.read(src)
    rows = _dedupe(src.family, _normalise(src.family, raw, skipped), src.version, skipped)
    kernels: dict[str, dict[str, int]] = {}
    for (dtype, kernel), n in rows.groupby(["dtype", "kernel"]).size().items():
        kernels.setdefault(str(dtype), {})[str(kernel)] = int(n)
    prov = {"framework": src.framework, "version": src.version,
            "measured_versions": {str(v): int(n) for v, n in rows["version"].value_counts().sort_index().items()},
            "files": [p.split("/systems/", 1)[-1] if "/systems/" in p else p for p, _ in src.files],
            "collection": src.meta, "device": sorted(set(raw["device"].astype(str))) if "device" in raw else [],
            "rows_read": int(len(raw)), "rows": int(len(rows)), "kernels": kernels, "skipped": dict(sorted(skipped.items()))}
    return rows, prov


def parse_engine(engine: str | None) -> tuple[str | None, str | None]:
    """`vllm`, `vllm@0.19.0` or None -> (framework, version)."""
    if not engine:
        return None, None
    name, _, version = engine.partition("@")
    if name not in ENGINES:
        raise InputError("--engine", "engine", f"unknown engine {name!r}", f"valid: {', '.join(ENGINES)}")
    return name, version or None


def convert(db: AicDb, hardware: str, engine: str | None = None) -> tuple[dict[str, np.ndarray], dict]:
    """Grid columns of every family for `hardware` (our name) measured in `engine` (`name[@version]`, default:
    `AicDb.default_engine`), plus NCCL's newest version, and the provenance."""
    system = db.system(hardware)
    framework, version = parse_engine(engine)
    counts: dict[str, int] = {}
    if framework is None:
        framework, counts = db.default_engine(system)
        choice = f"default: the engine whose newest versions hold the most importable rows ({counts})"
    else:
        choice = "asked (--engine)"
    frames, provenance = [], {}
    for family in (*ENGINE_FAMILIES, "nccl"):
        src = db.source(system, family, "nccl" if family == "nccl" else framework,
                        None if family == "nccl" else version)
        if src is None:
            provenance[family] = {"missing": f"no {family} table for {framework}"
                                  + (f" at or below {version}" if version else "")}
            continue
        rows, prov = convert_family(db, src)
        if version is not None and family != "nccl" and version_key(src.version) != version_key(version):
            prov["note"] = f"no {version} folder: the newest older version {src.version} was used"
        frames.append(rows)
        provenance[family] = prov
    if not frames:
        raise InputError(db.root, "--engine", f"no table of {framework} for {hardware}", "pick another engine")
    rows = pd.concat(frames, ignore_index=True)
    columns: dict[str, np.ndarray] = {}
    for c in GRID_STRING_COLUMNS:
        columns[c] = rows[c].fillna("").astype(str).to_numpy(dtype=object) if c in rows else np.full(len(rows), "", dtype=object)
    for c in GRID_NUMERIC_COLUMNS:
        columns[c] = rows[c].astype(float).to_numpy() if c in rows else np.full(len(rows), np.nan)
    columns["latency_s"] = rows["latency_s"].astype(float).to_numpy()
    engine_info = {"framework": framework, "version": version, "choice": choice, "row_counts": counts}
    return columns, {"system": system, "engine": engine_info, "families": provenance}
