"""Database rows -> grid rows: our names, our units (seconds, bytes), one row per measured shape, with provenance.

`convert(db, hardware, engine)` returns the grid columns of every family (`calibrate.profile.write_grid_profile`
takes them as they are) and the provenance per family: framework, version asked and versions that measured the
rows, kernels per format, files, collection metadata, and what was left out and why (formats we have no name
for, sliding-window attention, beam search, a secondary kernel at a shape the primary kernel also measured,
donor rows at shapes the version measured itself, Gated DeltaNet kernels we have no op for, DeepEP rows at SM
counts other than the default or measured on another GPU; repeated measurements of one shape are merged by their
median). A family the profile lacks says whether the database has its table for this GPU at all (`in_database`): what the simulator's provenance rule reads
(docs/cost-model.md, "Provenance").
"""
from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from calibrate.aic.db import AicDb, TableSource, version_key
from calibrate.aic.grid import FAMILIES
from calibrate.aic.names import (ATTN_DTYPES, BMM_DTYPES, COMM_DTYPES, DEEPEP_FAMILIES, DEEPEP_FRAMEWORK,
                                 DEEPEP_GPUS_PER_NODE, DEEPEP_NORMAL_SMS, DEEPEP_PHASES, DEVICE_TOKEN, DSA_CHECKPOINTS,
                                 DSA_DENSE_PREFILL_MARK, DSA_FAMILIES, DSA_MODELS, ENGINE_FAMILIES, ENGINES,
                                 FAMILY_OP, GDN_FAMILIES, GDN_KERNELS, GEMM_DTYPES, MLA_BMM_OPS, MLA_FAMILIES,
                                 MOE_DTYPES, NCCL_OPS, NOT_DEFAULT_KERNELS, allreduce_mode)
from calibrate.profile import GRID_NUMERIC_COLUMNS, GRID_STRING_COLUMNS
from inferplan.errors import InputError

MS = 1e-3  # the database's latency unit
US = 1e-6  # DeepEP's (`_us` columns)


def _skip(counter: Counter, reason: str, mask: pd.Series, by: pd.Series | None = None) -> None:
    if by is None:
        if int(mask.sum()):
            counter[reason] += int(mask.sum())
        return
    for value, n in by[mask].value_counts().items():
        counter[f"{reason} {value}"] += int(n)


def _deepep(family: str, df: pd.DataFrame, skipped: Counter, system: str) -> pd.DataFrame:
    """DeepEP rows in grid columns: each measured shape gives a dispatch and a combine row (their own formats,
    `DEEPEP_PHASES`), `gpus` = EP ranks = nodes x 8, `tokens` = tokens per rank before dispatch."""
    keep = pd.Series(True, index=df.index)
    token = DEVICE_TOKEN.get(system, "")
    if token and "device" in df:
        other = ~df["device"].astype(str).str.contains(token)
        _skip(skipped, "measured on another GPU:", other, df["device"].astype(str))
        keep &= ~other
    if family == "deepep_normal":
        sms = df["dispatch_sms"] != DEEPEP_NORMAL_SMS
        _skip(skipped, f"SM count other than DeepEP's default {DEEPEP_NORMAL_SMS}", sms & keep)
        keep &= ~sms
        phases = {"deepep_dispatch": df["dispatch_transmit_us"] + df["dispatch_notify_us"].fillna(0.0),
                  "deepep_combine": df["combine_transmit_us"] + df["combine_notify_us"].fillna(0.0)}
    else:
        phases = {"deepep_dispatch": df["dispatch_avg_t_us"], "deepep_combine": df["combine_avg_t_us"]}
    frames = []
    for op, us in phases.items():
        out = pd.DataFrame(index=df.index)
        out["op"], out["dtype"], out["variant"], out["compute"] = op, DEEPEP_PHASES[op], "", ""
        out["tokens"], out["hidden"] = df["num_token"], df["hidden_size"]
        out["topk"], out["experts"] = df["num_topk"], df["num_experts"]
        out["gpus"] = df["node_num"] * DEEPEP_GPUS_PER_NODE
        out["family"] = family
        out["kernel"] = df["kernel_source"].astype(str) + "_" + df["op_name"].astype(str)
        out["version"] = df["source_version"].astype(str)
        out["latency_s"] = us * US
        bad = ~(out["latency_s"] > 0)
        _skip(skipped, f"{op} latency not > 0", bad & keep)
        frames.append(out[keep & ~bad])
    return pd.concat(frames, ignore_index=True)


def _normalise(family: str, df: pd.DataFrame, skipped: Counter, system: str = "") -> pd.DataFrame:
    """The family's rows in grid columns (no de-duplication yet)."""
    if family in DEEPEP_FAMILIES:
        return _deepep(family, df, skipped, system)
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
    elif family in MLA_FAMILIES:  # heads per device; DeepSeek-V3's MLA dimensions (names.MLA_DIMS)
        kv, math = df["kv_cache_dtype"].map(ATTN_DTYPES), df["mla_dtype"].map(ATTN_DTYPES)
        bad = kv.isna() | math.isna()
        _skip(skipped, "format", bad, df["mla_dtype"] + "/" + df["kv_cache_dtype"])
        keep &= ~bad
        out["dtype"], out["compute"] = kv, math
        out["batch"], out["heads"] = df["batch_size"], df["num_heads"]
        if family == "mla_prefill":
            out["seq"] = df["isl"]
        else:  # as attention's generation rows: `step` tokens decoded after an `isl`-token prompt
            out["ctx"] = df["isl"] + df["step"]
    elif family == "mla_bmm":  # tokens and heads per device
        fmt, op = df["bmm_dtype"].map(BMM_DTYPES), df["op_name"].map(MLA_BMM_OPS)
        _skip(skipped, "format", fmt.isna(), df["bmm_dtype"])
        _skip(skipped, "op", op.isna() & fmt.notna(), df["op_name"])
        keep &= fmt.notna() & op.notna()
        out["dtype"], out["op"] = fmt, op
        out["tokens"], out["heads"] = df["num_tokens"], df["num_heads"]
    elif family in GDN_FAMILIES:  # one table, split by phase; heads per device; bf16 activations throughout
        phase = df["phase"] != GDN_FAMILIES[family]
        op = df["kernel_source"].map(GDN_KERNELS)
        _skip(skipped, "kernel", op.isna() & ~phase, df["kernel_source"])
        unequal = (df["head_k_dim"] != df["head_v_dim"]) & op.notna() & ~phase
        _skip(skipped, "key and value head dims differ", unequal)
        keep &= ~phase & op.notna() & ~unequal
        out["op"], out["dtype"] = op, "bf16"
        out["batch"], out["heads"], out["kv_heads"] = df["batch_size"], df["num_v_heads"], df["num_k_heads"]
        out["head_dim"] = df["head_k_dim"]
        if family == "gdn_prefill":
            out["seq"] = df["seq_len"]
    elif family in DSA_FAMILIES:  # heads per device; the models names.DSA_MODELS holds the facts of
        kv, proj = df["kv_cache_dtype"].map(ATTN_DTYPES), df["gemm_type"].map(GEMM_DTYPES)
        bad = kv.isna() | proj.isna()
        _skip(skipped, "format", bad, df["gemm_type"] + "/" + df["kv_cache_dtype"])
        variant = df["model"].map(lambda m: DSA_CHECKPOINTS.get(m, m if m in DSA_MODELS else None))
        unknown = variant.isna() & ~bad
        _skip(skipped, "model without its config facts in names.DSA_MODELS", unknown, df["model"])
        keep &= ~bad & ~unknown
        if family == "dsa_prefill":  # where the engine runs a prompt dense, the rows of its other paths are not
            # what it runs (names.DSA_DENSE_PREFILL_MARK)
            shape = df["model"] + "/" + df[["gemm_type", "kv_cache_dtype", "batch_size", "isl", "num_heads"]].astype(
                str).agg("/".join, axis=1)
            dense = df["kernel_source"].astype(str).str.contains(DSA_DENSE_PREFILL_MARK, regex=False)
            other = shape.isin(set(shape[dense & keep])) & ~dense & keep
            _skip(skipped, "sparse path at a prompt length the engine runs dense", other)
            keep &= ~other
        out["dtype"], out["compute"], out["variant"] = kv, proj, variant
        out["batch"], out["heads"] = df["batch_size"], df["num_heads"]
        if family == "dsa_prefill":
            out["seq"] = df["isl"]
        else:  # one new token per sequence after `step` cached ones (the rows' isl is 1)
            out["ctx"] = df["step"]
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
    # A shape the grid interpolates over must be positive (the profile loader refuses it otherwise): some tables
    # hold degenerate measurements (TensorRT-LLM 1.2.0rc5's H100 GEMM table has 882 rows with m = 0).
    spec = FAMILIES[family]
    for c in (*spec.combo, *spec.dense):
        if c in out:
            bad = ~(pd.to_numeric(out[c], errors="coerce") > 0)
            _skip(skipped, f"{c} not > 0", bad & keep)
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
    cat = list(dict.fromkeys(["op", *spec.cat]))
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


def _devices(raw: pd.DataFrame, system: str) -> list[str]:
    """The GPUs the imported rows ran on (rows of another GPU are left out: `_deepep`)."""
    if "device" not in raw:
        return []
    names = sorted(set(raw["device"].astype(str)))
    token = DEVICE_TOKEN.get(system, "")
    mine = [d for d in names if token in d] if token else names
    return mine or names


def convert_family(db: AicDb, src: TableSource, system: str = "") -> tuple[pd.DataFrame, dict]:
    """(grid rows, provenance) of one family's table."""
    skipped: Counter = Counter()
    raw = db.read(src)
    rows = _normalise(src.family, raw, skipped, system)
    for (framework, family, kernel), (systems, why) in NOT_DEFAULT_KERNELS.items():
        if (framework, family) == (src.framework, src.family) and system in systems and "kernel" in rows:
            off = rows["kernel"] == kernel
            _skip(skipped, f"kernel {kernel}: {why}", off)
            rows = rows[~off]
    rows = _dedupe(src.family, rows, src.version, skipped)
    kernels: dict[str, dict[str, int]] = {}
    for (dtype, kernel), n in rows.groupby(["dtype", "kernel"]).size().items():
        kernels.setdefault(str(dtype), {})[str(kernel)] = int(n)
    prov = {"framework": src.framework, "version": src.version,
            "measured_versions": {str(v): int(n) for v, n in rows["version"].value_counts().sort_index().items()},
            "files": [p.split("/systems/", 1)[-1] if "/systems/" in p else p for p, _ in src.files],
            "collection": src.meta, "device": _devices(raw, system),
            "rows_read": int(len(raw)), "rows": int(len(rows)), "kernels": kernels, "skipped": dict(sorted(skipped.items()))}
    return rows, prov


# A GEMM format whose latency is above this many times bf16's at the median shape both measured (same table, same
# GPU) is not a kernel time: block-scaled or per-tensor FP8 reads at most bf16's bytes at twice its peak, and every
# engine's FP8 tables measure 0.8-2.1x bf16 at the median. vLLM's block-FP8 tables measure 4.3x (H100) to 32x
# (GB200), 55-800 us for a 4096x4096 GEMM at one row: the collector timed vLLM's eager Python path (activation
# quantisation and dispatch around the kernel, which CUDA graphs remove in serving), not the kernel.
HOST_BOUND_RATIO = 3.0


def _bf16_ratio(rows: pd.DataFrame, dtype: str) -> float:
    """Median over the (m, n, k) measured in both of a GEMM table's `dtype` latency / its bf16 latency (nan: none)."""
    key = ["m", "n", "k"]
    b = rows[rows["dtype"] == "bf16"].groupby(key)["latency_s"].median()
    x = rows[rows["dtype"] == dtype].groupby(key)["latency_s"].median()
    both = x.index.intersection(b.index)
    return float((x.loc[both] / b.loc[both]).median()) if len(both) else float("nan")


def _replace_host_bound(db: AicDb, system: str, framework: str, counts: dict[str, int], rows: pd.DataFrame,
                        prov: dict) -> pd.DataFrame:
    """The GEMM rows with each host-bound format (`HOST_BOUND_RATIO`) replaced by the same format measured on the
    same GPU in the engine with the most rows whose table of that format is not host-bound (the same kernels:
    DeepGEMM or CUTLASS block-scaled GEMMs), said in the provenance; left out when no engine has one."""
    for dtype in sorted(set(rows["dtype"].astype(str)) - {"bf16"}):
        ratio = _bf16_ratio(rows, dtype)
        if not ratio > HOST_BOUND_RATIO:
            continue
        rows = rows[rows["dtype"] != dtype]
        why = (f"{framework}'s {dtype} GEMMs measure {ratio:.1f}x its bf16 at the median shape: the collector's "
               f"host path, not the kernel (HOST_BOUND_RATIO {HOST_BOUND_RATIO})")
        for donor in sorted((e for e in counts if e != framework), key=lambda e: (-counts[e], ENGINES.index(e))):
            src = db.source(system, "gemm", donor)
            if src is None:
                continue
            other, _ = convert_family(db, src, system)
            if (other["dtype"] == dtype).any() and _bf16_ratio(other, dtype) <= HOST_BOUND_RATIO:
                rows = pd.concat([rows, other[other["dtype"] == dtype]], ignore_index=True)
                prov.setdefault("replaced", {})[dtype] = {"reason": why, "from": donor, "version": src.version,
                                                          "ratio_to_bf16": round(_bf16_ratio(other, dtype), 2)}
                break
        else:
            prov.setdefault("replaced", {})[dtype] = {"reason": why, "from": None}
    if "replaced" in prov:  # (the kernels and rows the profile now holds)
        kernels: dict[str, dict[str, int]] = {}
        for (dtype, kernel), n in rows.groupby(["dtype", "kernel"]).size().items():
            kernels.setdefault(str(dtype), {})[str(kernel)] = int(n)
        prov["kernels"], prov["rows"] = kernels, int(len(rows))
    return rows


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
    default, counts = db.default_engine(system)
    if framework is None:
        framework = default
        choice = f"default: the engine whose newest versions hold the most importable rows ({counts})"
    else:
        choice = "asked (--engine)"
    frames, provenance = [], {}
    for family in (*ENGINE_FAMILIES, *MLA_FAMILIES, "mla_bmm", "nccl", *DEEPEP_FAMILIES, *GDN_FAMILIES,
                   *DSA_FAMILIES):
        engine_family = (family in ENGINE_FAMILIES or family in MLA_FAMILIES or family == "mla_bmm"
                         or family in GDN_FAMILIES or family in DSA_FAMILIES)
        if family in DEEPEP_FAMILIES:
            src = db.source_every_version(system, family, DEEPEP_FRAMEWORK)
        else:
            src = db.source(system, family, framework if engine_family else "nccl",
                            version if engine_family else None)
        if src is None:
            where = DEEPEP_FRAMEWORK if family in DEEPEP_FAMILIES else framework
            provenance[family] = {"missing": f"no {family} table for {where}"
                                  + (f" at or below {version}" if version and engine_family else ""),
                                  "in_database": db.has_table(system, family)}
            continue
        rows, prov = convert_family(db, src, system)
        if family in DEEPEP_FAMILIES:
            prov["note"] = ("DeepEP is measured in SGLang's wide-EP images only; every version's rows, the newest "
                            "measurement of a shape kept")
        if version is not None and engine_family and version_key(src.version) != version_key(version):
            prov["note"] = f"no {version} folder: the newest older version {src.version} was used"
        if family == "gemm":
            rows = _replace_host_bound(db, system, framework, counts, rows, prov)
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
    engine_info = {"framework": framework, "version": version, "choice": choice, "row_counts": counts,
                   "default": default}
    return columns, {"system": system, "engine": engine_info, "families": provenance}
