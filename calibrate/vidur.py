"""Reads Vidur-format reference profiles (any device Vidur names) and maps each timed op onto our op vocabulary and work formulas.

The files (MIT licence, Microsoft; read in place from `../shared/reference-profiles/vidur/`, never copied here)
give milliseconds per op for one transformer layer on one GPU with tensor-parallel shard shapes (see their
README). Each `ReferencePoint` carries our (op, dtype), the FLOPs and bytes our formulas (`calibrate.ops`, the
simulator's) assign to that work, and the measured seconds. Duplicate rows (the same model, TP and size measured
twice) are averaged.

Mapping (one decoder layer, per GPU, T tokens, h = n_head/tp, kv = max(1, n_kv_head/tp), d = n_embd/n_head):
    attn_pre_proj   gemm bf16  [T, n_embd] x [n_embd, (h + 2 kv) d]           (fused QKV)
    attn_post_proj  gemm bf16  [T, h d] x [h d, n_embd]
    mlp_up_proj     gemm bf16  [T, n_embd] x [n_embd, 2 I/tp]  (I/tp if not gated)
    mlp_down_proj   gemm bf16  [T, I/tp] x [I/tp, n_embd]
    input_layernorm, post_attention_layernorm   elementwise: T n_embd elements, 1 read + 1 write
    add             elementwise: T n_embd, 2 reads + 1 write (residual)
    mlp_act         elementwise: T I/tp, 2 reads (gate, up) + 1 write (1 read if not gated)
    attn_rope       elementwise: T (h + kv) d, 1 read + 1 write
    layer_elementwise  the sum of the five above with `add` counted twice (a layer has two residual adds; Vidur
                    times one), against the simulator's bundle: T (4 n_embd + 2 I/tp + h d) elements, 2 reads + 1
                    write, one launch (`sim.core.cost.roofline`)
    attn_prefill    attn_prefill bf16, one sequence of q new tokens after c cached (attention_tp2 table)
    attn_decode     attn_decode bf16, b sequences of c cached tokens each
    all_reduce      allreduce: `size` bytes over `num_workers` GPUs, intra-node when they fit one node
`emb` is not mapped (Vidur does not count it in model time), nor send_recv (pipeline parallelism).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from calibrate import ops
from inferplan.errors import InputError

# Vidur's device and network names (vidur/config: DeviceSKUType, NodeSKUType) -> our conf/hardware entries.
GPU_HARDWARE = {"a100": "a100_80gb", "h100": "h100_sxm", "a40": "a40"}   # compute/<gpu>
NODE_HARDWARE = {"a100_dgx": "a100_80gb", "h100_dgx": "h100_sxm",        # network/<node>
                 "a100_pairwise_nvlink": "a100_pcie", "h100_pairwise_nvlink": "h100_pcie",
                 "a40_pairwise_nvlink": "a40"}


def hardware_name(name: str) -> str:
    """Our conf/hardware entry for a Vidur device or node name (our own names pass through)."""
    return GPU_HARDWARE.get(name) or NODE_HARDWARE.get(name) or name
ELEMENTWISE = {"input_layernorm": (1, 1), "post_attention_layernorm": (1, 1), "add": (2, 1), "mlp_act": (2, 1),
               "attn_rope": (1, 1)}        # (reads, writes) per element
GEMMS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
BUNDLE = "layer_elementwise"  # the sum of a layer's elementwise ops, priced as the simulator prices the bundle


@dataclass(frozen=True)
class ReferencePoint:
    source: str          # file, relative to the Vidur folder
    model: str           # Hugging Face id, or the node kind for collectives
    hardware: str        # our conf/hardware entry
    tp: int              # tensor-parallel degree (ranks for collectives)
    vidur_op: str
    op: str
    dtype: str
    shape: str           # our shape string (calibrate.shapes conventions)
    flops: float
    bytes: float
    measured_s: float
    link: str = ""       # collectives: "intra" or "inter" node
    tokens: int = 0      # tokens in the batch (mlp.csv rows): the key of a layer's ops


def find_root(folder: str | Path) -> Path:
    """The Vidur folder itself (holding compute/ or network/), or the `vidur/` folder inside `folder`."""
    folder = Path(folder)
    for cand in (folder, folder / "vidur", folder / "reference-profiles" / "vidur"):
        if (cand / "compute").is_dir() or (cand / "network").is_dir():
            return cand
    raise InputError(folder, "folder", "holds no Vidur profiles (no compute/ or network/ folder)",
                     "give ../shared/reference-profiles/vidur (or its parent)")


def _sample(df: pd.DataFrame, rows: int | None) -> pd.DataFrame:
    """Every k-th row so that at most `rows` remain (a slice spread over the whole table, for tests)."""
    if rows is None or len(df) <= rows:
        return df
    return df.iloc[:: -(-len(df) // rows)]


def _read(path: Path, sample_rows: int | None, needed: tuple[str, ...]) -> pd.DataFrame:
    df = _sample(pd.read_csv(path), sample_rows)
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise InputError(path, missing[0], "column missing (not a Vidur-format table)",
                         "give a table written by Vidur's profiler (data/profiling layout)")
    return df


def mlp_points(path: Path, root: Path, sample_rows: int | None = None) -> list[ReferencePoint]:
    """Every mapped non-attention op of one `compute/<gpu>/<model>/mlp.csv`."""
    gpu = path.relative_to(root).parts[1]
    model = "/".join(path.relative_to(root).parts[2:-1])
    hardware = GPU_HARDWARE.get(gpu)
    if hardware is None:
        return []
    df = _read(path, sample_rows, ("num_tokens", "n_embd", "n_head", "num_tensor_parallel_workers"))
    keys = ["n_head", "n_kv_head", "n_embd", "n_expanded_embd", "use_gated_mlp", "num_tokens",
            "num_tensor_parallel_workers"]
    df = df.groupby(keys, as_index=False).mean(numeric_only=True)  # duplicate measurements averaged
    src = str(path.relative_to(root))
    points = []
    for r in df.to_dict("records"):
        tp, t, e = int(r["num_tensor_parallel_workers"]), int(r["num_tokens"]), int(r["n_embd"])
        heads = int(r["n_head"])
        d = e // heads
        h, kv = heads // tp, max(1, int(r["n_kv_head"]) // tp)
        inter = int(r["n_expanded_embd"]) // tp
        gated = bool(r["use_gated_mlp"])
        gemms = {"attn_pre_proj": (t, (h + 2 * kv) * d, e), "attn_post_proj": (t, e, h * d),
                 "mlp_up_proj": (t, (2 if gated else 1) * inter, e), "mlp_down_proj": (t, e, inter)}
        for vop, (m, n, k) in gemms.items():
            flops, bytes_ = ops.gemm_work(m, n, k, "bf16")
            points.append(ReferencePoint(src, model, hardware, tp, vop, "gemm", "bf16", f"m={m},n={n},k={k}",
                                         flops, bytes_, r[f"time_stats.{vop}.median"] * 1e-3, tokens=t))
        cols = {"input_layernorm": e, "post_attention_layernorm": e, "add": e, "mlp_act": inter,
                "attn_rope": (h + kv) * d}
        present = [v for v in cols if f"time_stats.{v}.median" in r]
        bundle_s = sum(r[f"time_stats.{v}.median"] * (2 if v == "add" else 1) for v in present) * 1e-3
        flops, bytes_ = ops.elementwise_work(t * (4 * e + 2 * inter + h * d))
        points.append(ReferencePoint(src, model, hardware, tp, BUNDLE, "elementwise", "bf16",
                                     f"t={t},h={e},i={inter},r={h * d}", flops, bytes_, bundle_s, tokens=t))
        for vop, width in cols.items():
            if f"time_stats.{vop}.median" not in r:  # e.g. phi-2 has no post-attention norm (parallel block)
                continue
            reads, writes = ELEMENTWISE[vop]
            if vop == "mlp_act" and not gated:
                reads = 1
            flops, bytes_ = ops.elementwise_work(t * width, reads, writes)
            points.append(ReferencePoint(src, model, hardware, tp, vop, "elementwise", "bf16",
                                         f"t={t},cols={width},r={reads},w={writes}", flops, bytes_,
                                         r[f"time_stats.{vop}.median"] * 1e-3, tokens=t))
    return points


def attention_points(path: Path, root: Path, sample_rows: int | None = None) -> list[ReferencePoint]:
    """Prefill and decode kernel times of an attention table (old format: one table per model and TP)."""
    gpu = path.relative_to(root).parts[1]
    model = "/".join(path.relative_to(root).parts[2:-1])
    hardware = GPU_HARDWARE.get(gpu)
    if hardware is None:
        return []
    df = _read(path, sample_rows, ("n_q_head", "batch_size", "kv_cache_size", "is_prefill"))
    keys = ["n_embd", "n_q_head", "n_kv_head", "num_tensor_parallel_workers", "batch_size", "prefill_chunk_size",
            "kv_cache_size", "is_prefill"]
    df = df.groupby(keys, as_index=False).mean(numeric_only=True)
    src = str(path.relative_to(root))
    points = []
    for r in df.to_dict("records"):
        tp = int(r["num_tensor_parallel_workers"])
        h, kv = int(r["n_q_head"]) // tp, max(1, int(r["n_kv_head"]) // tp)
        d = int(r["n_embd"]) // int(r["n_q_head"])
        b, c = int(r["batch_size"]), int(r["kv_cache_size"])
        if r["is_prefill"]:
            q = int(r["prefill_chunk_size"])
            flops, bytes_ = ops.attn_prefill_work(b * q * (q + 1) / 2, b * q * c, b * q, b * (c + q), h, kv, d, 2.0)
            points.append(ReferencePoint(src, model, hardware, tp, "attn_prefill", "attn_prefill", "bf16",
                                         f"b={b},q={q},c={c},h={h},kvh={kv},dqk={d},dv={d}", flops, bytes_,
                                         r["time_stats.attn_prefill.median"] * 1e-3))
        else:
            flops, bytes_ = ops.attn_decode_work(b, b * c, h, kv, d, 2.0)
            points.append(ReferencePoint(src, model, hardware, tp, "attn_decode", "attn_decode", "bf16",
                                         f"b={b},c={c},h={h},kvh={kv},d={d}", flops, bytes_,
                                         r["time_stats.attn_decode.median"] * 1e-3))
    return points


def allreduce_points(path: Path, root: Path, sample_rows: int | None = None) -> list[ReferencePoint]:
    """NCCL all-reduce times of one `network/<node>/all_reduce.csv` (rank 0's view)."""
    node = path.relative_to(root).parts[1]
    hardware = NODE_HARDWARE.get(node)
    if hardware is None:
        return []
    df = _read(path, sample_rows, ("num_workers", "devices_per_node", "size"))
    df = df.groupby(["num_workers", "devices_per_node", "size"], as_index=False).mean(numeric_only=True)
    src = str(path.relative_to(root))
    points = []
    for r in df.to_dict("records"):
        p, per_node, size = int(r["num_workers"]), int(r["devices_per_node"]), int(r["size"])
        link = "intra" if p <= per_node else "inter"
        points.append(ReferencePoint(src, node, hardware, p, f"all_reduce ({link})", "allreduce", "bf16",
                                     f"bytes={size},ranks={p},per_node={per_node}", 0.0, float(size),
                                     r["time_stats.all_reduce.median"] * 1e-3, link))
    return points


def load_reference(folder: str | Path, sample_rows: int | None = None) -> tuple[list[ReferencePoint], list[str]]:
    """All mapped points under a Vidur folder, and notes on what was not mapped."""
    root = find_root(folder)
    points: list[ReferencePoint] = []
    notes = []
    for path in sorted(root.glob("compute/*/**/mlp.csv")):
        pts = mlp_points(path, root, sample_rows)
        points += pts
        if not pts:
            notes.append(f"{path.relative_to(root)}: no hardware entry for this GPU (known: "
                         f"{', '.join(GPU_HARDWARE)})")
    for path in sorted(root.glob("compute/*/**/attention*.csv")):
        pts = attention_points(path, root, sample_rows)
        points += pts
        if not pts:
            notes.append(f"{path.relative_to(root)}: no hardware entry for this GPU")
    for path in sorted(root.glob("network/*/all_reduce.csv")):
        pts = allreduce_points(path, root, sample_rows)
        points += pts
        if not pts:
            notes.append(f"{path.relative_to(root)}: no hardware entry for this node kind (known: "
                         f"{', '.join(NODE_HARDWARE)})")
    notes.append("not mapped: emb (not in Vidur's model time), attn input/output reshapes, send_recv (pipeline)")
    if not points:
        found = sorted({str(p.relative_to(root)) for p in root.glob("compute/*/**/*.csv")}
                       | {str(p.relative_to(root)) for p in root.glob("network/*/*.csv")})
        problem = ("no mlp.csv, attention*.csv or all_reduce.csv found" if not found else
                   f"none of {', '.join(found[:4])} is under a known device or node name")
        raise InputError(root, "files", problem, "lay the folder out as Vidur's data/profiling, with compute/<gpu> "
                         f"in {', '.join(GPU_HARDWARE)} and network/<node> in {', '.join(NODE_HARDWARE)}")
    return points, notes
