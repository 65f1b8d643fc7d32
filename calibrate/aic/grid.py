"""Measured shape grids and their interpolation: how a profile prices an op from the table it was measured on.

One family's rows (`FAMILIES`: GEMM, prefill and decode attention, MoE, custom all-reduce, NCCL, MLA prefill and
decode attention, DeepEP normal and low-latency dispatch / combine) are split three ways by column:

* `cat`: exact-match strings (format, MoE routing distribution, collective op). A query must name one that exists.
  GEMM's `variant` is "" or, where a format's table was split by M alignment (`gemm_variant`: chosen at import by
  cross-validation, `calibrate.aic.crossval.split_gemm_by_alignment`), `aligned16` / `unaligned16`: some engines'
  kernels (vLLM's DeepGEMM FP8 path on Blackwell) take a slower path for M not a multiple of 16, so a query is
  interpolated among the rows of its own kind.
* `combo`: a model's fixed dimensions (attention heads / KV heads / head dim; MoE hidden, intermediate, top-k,
  experts, TP, EP; a collective's GPU count; DeepEP's hidden size, top-k, experts and EP ranks). MLA has none:
  the tables measure DeepSeek-V3's MLA dimensions only (`names.MLA_DIMS`), heads per device being a dense axis. A measured combo is used as is; an unmeasured one takes the
  efficiency of the nearest measured combos (inverse squared log-distance over up to 4 of them).
* `dense`: the axes swept within a combo (GEMM m, n, k; attention batch and sequence / context length; MoE
  tokens; collective bytes; MLA batch, length and heads; DeepEP tokens per rank). Multilinear interpolation in
  log(axis).

What is interpolated is v = log(latency / reference), the log inverse efficiency over a reference time from our
own work formulas (`calibrate.ops`: the roofline over the profile's peaks for compute ops, bytes over the link for
collectives; DeepEP: the routed copies, tokens x top-k x hidden x the phase's format width, over the link), so a query between grid points follows the work's power law and a query beyond the largest grid
point keeps the efficiency of the edge (time scales with work). Below the smallest grid point a query is priced
as the smallest (a kernel does not get faster than its floor). At a measured point the result is the measured
latency. Grid cells a combo did not measure (and rows held out in cross-validation) are filled before
interpolation from their nearest measured neighbours along each axis (`_impute`). Pure numpy.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from calibrate import ops
from calibrate.aic.names import DSA_MODELS, MLA_DIMS


@dataclass(frozen=True)
class FamilySpec:
    """A family's columns by role (module doc). `axes`: the grid coordinates, each a product of dense columns
    (default: one per dense column), so that a direction of nearly constant cost can be a grid axis."""

    cat: tuple[str, ...]
    combo: tuple[str, ...]
    dense: tuple[str, ...]
    defaults: tuple[tuple[str, str], ...] = ()
    axes: tuple[tuple[str, ...], ...] = ()

    def coords(self, f: dict[str, Any]) -> list[Any]:
        """Grid coordinates (not logged) of dense values `f`."""
        axes = self.axes or tuple((c,) for c in self.dense)
        out = []
        for product in axes:
            x = f[product[0]]
            for c in product[1:]:
                x = x * f[c]
            out.append(x)
        return out


FAMILIES: dict[str, FamilySpec] = {
    "gemm": FamilySpec(("dtype", "variant"), (), ("m", "n", "k"), (("variant", ""),)),
    "attn_prefill": FamilySpec(("dtype", "compute"), ("head_dim",), ("batch", "seq", "heads", "kv_heads"),
                               (("dtype", "bf16"), ("compute", "bf16"))),
    "attn_decode": FamilySpec(("dtype", "compute"), ("kv_heads", "head_dim"), ("batch", "ctx", "heads"),
                              (("dtype", "bf16"), ("compute", "bf16"))),
    "moe": FamilySpec(("dtype", "variant"), ("hidden", "inter", "topk", "experts", "tp", "ep"), ("tokens",),
                      (("variant", "balanced"),)),
    "custom_allreduce": FamilySpec(("dtype", "variant"), ("gpus",), ("bytes",),
                                   (("dtype", "bf16"), ("variant", "graph"))),
    "nccl": FamilySpec(("op", "dtype"), ("gpus",), ("bytes",), (("dtype", "fp16"),)),
    "mla_prefill": FamilySpec(("dtype", "compute"), (), ("batch", "seq", "heads"),
                              (("dtype", "bf16"), ("compute", "bf16"))),
    "mla_decode": FamilySpec(("dtype", "compute"), (), ("batch", "ctx", "heads"),
                             (("dtype", "bf16"), ("compute", "bf16"))),
    "deepep_normal": FamilySpec(("op", "dtype"), ("hidden", "topk", "experts", "gpus"), ("tokens",)),
    "deepep_ll": FamilySpec(("op", "dtype"), ("hidden", "topk", "experts", "gpus"), ("tokens",)),
    "mla_bmm": FamilySpec(("op", "dtype"), (), ("tokens", "heads"), (("dtype", "bf16"),)),
    # Gated DeltaNet kernels: heads = value heads, kv_heads = key heads (per device), head_dim = the key and value
    # head dim (the tables measure equal ones)
    "gdn_prefill": FamilySpec(("op", "dtype"), ("heads", "kv_heads", "head_dim"), ("batch", "seq"),
                              (("dtype", "bf16"),)),
    "gdn_decode": FamilySpec(("op", "dtype"), ("heads", "kv_heads", "head_dim"), ("batch",), (("dtype", "bf16"),)),
    # the DSA attention module of one model (`variant`: names.DSA_MODELS), KV-cache format `dtype`, projections in
    # `compute`; heads per device a dense axis as MLA's
    "dsa_prefill": FamilySpec(("dtype", "compute", "variant"), (), ("batch", "seq", "heads")),
    "dsa_decode": FamilySpec(("dtype", "compute", "variant"), (), ("batch", "ctx", "heads")),
}
# The convolution's kernel taps in the GDN tables (every model measured: Qwen3.5's 4).
GDN_CONV_TOKENS = 4
# MLA prefill attention as the simulator prices it: per head, queries and keys of (nope + rope) dims and values of
# v dims, i.e. a GQA-like attention of kv_heads = heads at their mean width (`sim.core.cost.layers`).
MLA_PREFILL_DIM = (MLA_DIMS["qk_nope_head_dim"] + MLA_DIMS["qk_rope_head_dim"] + MLA_DIMS["v_head_dim"]) / 2.0
STRING_COLUMNS: tuple[str, ...] = ("family", "op", "dtype", "compute", "variant", "kernel", "version")
NUMERIC_COLUMNS: tuple[str, ...] = ("m", "n", "k", "batch", "seq", "ctx", "heads", "kv_heads", "head_dim", "tokens",
                                    "hidden", "inter", "topk", "experts", "tp", "ep", "gpus", "bytes")
NEAREST_COMBOS = 4
# Imputation weight of an axis' estimate: 1 / (log-distance between its two measured neighbours)^SPAN_POWER, so the
# axis with the closest neighbours dominates (3: least 5-fold error over 0-8 on H100, L40S and B200 attention/GEMM).
SPAN_POWER = 3
ALIGN = 16
ALIGNED, UNALIGNED = "aligned16", "unaligned16"


def gemm_variant(m: Any) -> Any:
    """The M-alignment variant of GEMM rows / queries with `m` rows (a string, or an array of them)."""
    aligned = np.round(np.asarray(m, dtype=np.float64)) % ALIGN == 0
    out = np.where(aligned, ALIGNED, UNALIGNED)
    return str(out) if out.ndim == 0 else out.astype(object)


@dataclass(frozen=True)
class Peaks:
    """The roofline a profile's reference times use: its own figures (conf/hardware datasheet at import)."""

    flops_per_s: dict[str, float]
    mem_bytes_per_s: float
    link_bytes_per_s: float

    def flops(self, dtype: str) -> float:
        compute = ops.check_dtype(dtype)["compute"]
        return self.flops_per_s.get(compute) or self.flops_per_s["bf16"]


def reference_s(family: str, cat: dict[str, str], f: dict[str, Any], peaks: Peaks) -> Any:
    """The reference time (s) of one family's shapes `f` (floats or arrays) at the exact-match keys `cat`."""
    bw = peaks.mem_bytes_per_s
    if family == "gemm":
        flops, nbytes = ops.gemm_work(f["m"], f["n"], f["k"], cat["dtype"])
        return np.maximum(flops / peaks.flops(cat["dtype"]), nbytes / bw)
    if family in ("attn_prefill", "attn_decode"):
        kv_bytes = ops.check_dtype(cat["dtype"])["act_bytes"]
        b, h, kv, d = f["batch"], f["heads"], f["kv_heads"], f["head_dim"]
        if family == "attn_prefill":
            s = f["seq"]
            flops, nbytes = ops.attn_prefill_work(b * s * (s + 1) / 2.0, 0.0, b * s, b * s, h, kv, d, kv_bytes)
        else:
            flops, nbytes = ops.attn_decode_work(b, b * f["ctx"], h, kv, d, kv_bytes)
        return np.maximum(flops / peaks.flops(cat["compute"]), nbytes / bw)
    if family == "mla_prefill":  # (the attn_prefill form with kv_heads = heads, MLA_PREFILL_DIM wide)
        kv_bytes = ops.check_dtype(cat["dtype"])["act_bytes"]
        b, s, h = f["batch"], f["seq"], f["heads"]
        flops, nbytes = ops.attn_prefill_work(b * s * (s + 1) / 2.0, 0.0, b * s, b * s, h, h, MLA_PREFILL_DIM,
                                              kv_bytes)
        return np.maximum(flops / peaks.flops(cat["compute"]), nbytes / bw)
    if family == "mla_decode":
        kv_bytes = ops.check_dtype(cat["dtype"])["act_bytes"]
        b = f["batch"]
        flops, nbytes = ops.attn_mla_decode_work(b, b * f["ctx"], f["heads"], MLA_DIMS["kv_lora_rank"],
                                                 MLA_DIMS["qk_rope_head_dim"], kv_bytes)
        return np.maximum(flops / peaks.flops(cat["compute"]), nbytes / bw)
    if family == "mla_bmm":  # heads x one GEMM: pre [tokens, nope] x [nope, rank], post [tokens, rank] x [rank, v]
        rank = MLA_DIMS["kv_lora_rank"]
        n, k = ((rank, MLA_DIMS["qk_nope_head_dim"]) if cat["op"] == "mla_bmm_pre"
                else (MLA_DIMS["v_head_dim"], rank))
        flops, nbytes = ops.gemm_work(f["tokens"], n, k, cat["dtype"])
        return f["heads"] * np.maximum(flops / peaks.flops(cat["dtype"]), nbytes / bw)
    if family in ("gdn_prefill", "gdn_decode"):  # per device heads; one sequence per batch entry
        h, kv, d = f["heads"], f["kv_heads"], f["head_dim"]
        seqs = f["batch"]
        tokens = seqs * f["seq"] if family == "gdn_prefill" else seqs
        if cat["op"] in ("gdn_conv_prefill", "gdn_conv_decode"):
            flops, nbytes = ops.gdn_conv_work(tokens, seqs, 2.0 * kv * d + h * d, GDN_CONV_TOKENS)
        elif cat["op"] == "gdn_chunk_prefill":
            flops, nbytes = ops.gdn_chunk_work(tokens, seqs, h, kv, d, d)
        else:
            flops, nbytes = ops.gdn_recurrent_work(seqs, h, kv, d, d)
        return np.maximum(flops / peaks.flops("bf16"), nbytes / bw)
    if family in ("dsa_prefill", "dsa_decode"):
        return dsa_module_work_s(family == "dsa_prefill", cat, f, peaks)
    if family in ("deepep_normal", "deepep_ll"):
        width = ops.check_dtype(cat["dtype"])["act_bytes"]
        return f["tokens"] * f["topk"] * f["hidden"] * width / peaks.link_bytes_per_s
    if family == "moe":  # one EP rank's share of the group's tokens x top-k rows
        rows = f["tokens"] * f["topk"] / f["ep"]
        active = np.minimum(f["experts"] / f["ep"], rows)
        inter = f["inter"] / f["tp"]
        f1, b1 = ops.moe_gemm_work(rows, active, 2.0 * inter, f["hidden"], cat["dtype"])
        f2, b2 = ops.moe_gemm_work(rows, active, f["hidden"], inter, cat["dtype"])
        return np.maximum((f1 + f2) / peaks.flops(cat["dtype"]), (b1 + b2) / bw)
    p = f["gpus"]  # (>= 2: one GPU moves nothing, `GridModel.latency_s` prices it 0)
    share = 2.0 * (p - 1.0) / p if family == "custom_allreduce" or cat.get("op") == "allreduce" else (p - 1.0) / p
    return share * f["bytes"] / peaks.link_bytes_per_s


def dsa_module_work_s(prefill: bool, cat: dict[str, str], f: dict[str, Any], peaks: Peaks) -> Any:
    """The DSA module's reference time: its roofline over the model's facts (`names.DSA_MODELS[variant]`), per
    device with `heads` query heads. Per token: the projections (q down and up, kv down, o_proj, the indexer's
    query, key and weight projections) and, in prefill, the latent cache's up-projection to K and V, in decode the
    absorbed per-head products; the indexer scores every causal (prefill) or cached (decode) key, the sparse kernel
    attends at most `index_topk` of them per query."""
    d = DSA_MODELS[cat["variant"]]
    fmt, kv_bytes = ops.check_dtype(cat["compute"]), ops.check_dtype(cat["dtype"])["act_bytes"]
    h, b = f["heads"], f["batch"]
    H, ql, rank, rope = d["hidden_size"], d["q_lora_rank"], d["kv_lora_rank"], d["qk_rope_head_dim"]
    nope, v, ih, idim, top = d["qk_nope_head_dim"], d["v_head_dim"], d["index_n_heads"], d["index_head_dim"], \
        d["index_topk"]
    params = H * ql + ql * h * (nope + rope) + H * (rank + rope) + h * v * H + ql * ih * idim + H * idim + H * ih
    if prefill:
        s = f["seq"]
        tokens = b * s
        scored = b * s * (s + 1.0) / 2.0
        kept = np.minimum(s, top)
        attended = b * (kept * (kept + 1.0) / 2.0 + np.maximum(s - top, 0.0) * top)
        params = params + rank * h * (nope + v)
        per_pair = 2.0 * h * (nope + rope) + 2.0 * h * v
        cache_bytes = tokens * (rank + rope + idim) * kv_bytes
    else:
        ctx = f["ctx"]
        tokens = b
        scored = b * ctx
        attended = b * np.minimum(ctx, top)
        params = params + h * (nope * rank + rank * v)
        per_pair = 2.0 * h * (rank + rope) + 2.0 * h * rank
        cache_bytes = attended * (rank + rope) * kv_bytes + scored * idim * kv_bytes
    flops = 2.0 * tokens * params + 2.0 * ih * idim * scored + per_pair * attended
    nbytes = params * fmt["weight_bytes"] + cache_bytes
    return np.maximum(flops / peaks.flops(cat["compute"]), nbytes / peaks.mem_bytes_per_s)


def _impute(values: np.ndarray, axes: list[np.ndarray]) -> np.ndarray:
    """Fill the NaN cells of `values` (log inverse efficiency over the log axes) from measured neighbours: along
    every axis, linear interpolation between the nearest measured cells on both sides (weight 1 / their distance
    ^ SPAN_POWER), or the nearest one when only one side has a measurement (1e-3 times that weight); the weighted
    mean over axes.
    Repeated until every cell is filled (a cell whose lines are all empty takes its neighbours' filled values)."""
    v = values.copy()
    for _ in range(v.ndim + 1):
        missing = np.isnan(v)
        if not missing.any() or missing.all():
            return v
        total, weight = np.zeros_like(v), np.zeros_like(v)
        for ax, x in enumerate(axes):
            lines = np.moveaxis(v, ax, -1)
            n = lines.shape[-1]
            have = ~np.isnan(lines)
            idx = np.broadcast_to(np.arange(n), lines.shape)
            prev = np.maximum.accumulate(np.where(have, idx, -1), axis=-1)
            nxt = np.flip(np.minimum.accumulate(np.flip(np.where(have, idx, n), axis=-1), axis=-1), axis=-1)
            lo, hi = np.clip(prev, 0, n - 1), np.clip(nxt, 0, n - 1)
            vlo, vhi = np.take_along_axis(lines, lo, -1), np.take_along_axis(lines, hi, -1)
            xq = np.broadcast_to(x, lines.shape)
            xlo, xhi = x[lo], x[hi]
            both = (prev >= 0) & (nxt < n)
            span = np.where(both, xhi - xlo, 1.0)
            t = np.where(both & (span > 0), (xq - xlo) / np.where(span > 0, span, 1.0), 0.0)
            est = np.where(both, vlo + t * (vhi - vlo), np.where(prev >= 0, vlo, vhi))
            dist = np.where(both, span, np.where(prev >= 0, xq - xlo, xhi - xq))
            w = np.where(both, 1.0, 1e-3) / np.maximum(dist, 1e-9) ** SPAN_POWER
            w = np.where((prev >= 0) | (nxt < n), w, 0.0)
            est = np.where(w > 0, est, 0.0)
            total += np.moveaxis(w * est, -1, ax)
            weight += np.moveaxis(w, -1, ax)
        fill = missing & (weight > 0)
        v[fill] = total[fill] / weight[fill]
    return v


class _Cell:
    """One (cat, combo)'s dense grid: log axes and the filled tensor of v = log(latency / reference). The tensor
    (averaging repeats and imputing the unmeasured cells: most of a grid's build) is made on first use: a pricer
    reads the few combos nearest its model's, not all of them."""

    __slots__ = ("axes", "_logs", "_v", "_values", "_measured")

    def __init__(self, dense: np.ndarray, v: np.ndarray) -> None:
        logs = np.log(dense)
        self.axes = [np.unique(logs[:, j]) for j in range(dense.shape[1])]
        self._logs, self._v = logs, v
        self._values: np.ndarray | None = None
        self._measured = 0

    @property
    def measured(self) -> int:
        """Grid points with a measurement."""
        self.values  # (built with the tensor)
        return self._measured

    @property
    def values(self) -> np.ndarray:
        if self._values is None:
            logs, uniq = self._logs, self.axes
            index = tuple(np.searchsorted(u, logs[:, j]) for j, u in enumerate(uniq))
            total = np.zeros(tuple(len(u) for u in uniq))
            count = np.zeros_like(total)
            np.add.at(total, index, self._v)
            np.add.at(count, index, 1.0)
            with np.errstate(invalid="ignore", divide="ignore"):
                values = np.where(count > 0, total / count, np.nan)
            self._measured = int((count > 0).sum())
            self._values = _impute(values, uniq)
        return self._values

    def value(self, dense: list[np.ndarray]) -> np.ndarray:
        """v at the (log, already clamped below) dense coordinates: multilinear over the 2^d corners."""
        shape = np.broadcast(*dense).shape
        out = np.zeros(shape)
        los, ts = [], []
        for x, axis in zip(dense, self.axes):
            n = len(axis)
            if n == 1:
                los.append(np.zeros(shape, dtype=np.intp))
                ts.append(np.zeros(shape))
                continue
            xq = np.clip(np.broadcast_to(x, shape), axis[0], axis[-1])
            i = np.clip(np.searchsorted(axis, xq, side="right") - 1, 0, n - 2)
            los.append(i)
            ts.append((xq - axis[i]) / (axis[i + 1] - axis[i]))
        d = len(self.axes)
        for corner in range(1 << d):
            w = np.ones(shape)
            idx = []
            for j in range(d):
                up = (corner >> j) & 1
                if up and len(self.axes[j]) == 1:
                    w = w * 0.0
                    idx.append(los[j])
                    continue
                w = w * (ts[j] if up else 1.0 - ts[j])
                idx.append(los[j] + up)
            out += w * self.values[tuple(idx)]
        return out


def _rows_by_key(keys: list[np.ndarray], n: int) -> dict[tuple[str, ...], np.ndarray]:
    """Row indices (ascending) of each distinct tuple of the `keys` columns' values. Rows of one key mostly sit in
    runs (profiles are written sorted by them): found by comparing neighbours, so the work is per run, not per
    row."""
    if not keys:
        return {(): np.arange(n)} if n else {}
    change = np.zeros(n, dtype=bool)
    if n:
        change[0] = True
    for col in keys:
        change[1:] |= (col[1:] != col[:-1]).astype(bool)
    starts = np.flatnonzero(change)
    ends = np.append(starts[1:], n)
    runs: dict[tuple[str, ...], list[np.ndarray]] = {}
    for a, b in zip(starts.tolist(), ends.tolist()):
        runs.setdefault(tuple(col[a] for col in keys), []).append(np.arange(a, b))
    return {k: v[0] if len(v) == 1 else np.concatenate(v) for k, v in runs.items()}


class _Groups(Mapping):
    """A family's (combos, cells) per exact-match key, each built on first use: a pricer asks for one or two of a
    family's formats (a bf16 model never builds the fp8 GEMM grids), and building one is most of a profile's
    start-up. The keys are known from the start (`in`, iteration and `len` build nothing)."""

    def __init__(self, build: Any, rows: dict[tuple[str, ...], np.ndarray]) -> None:
        self._build, self._rows = build, rows
        self._built: dict[tuple[str, ...], tuple[np.ndarray, list[_Cell]]] = {}

    def __getitem__(self, key: tuple[str, ...]) -> tuple[np.ndarray, list[_Cell]]:
        group = self._built.get(key)
        if group is None:
            group = self._built[key] = self._build(key, self._rows[key])  # (KeyError for an unknown key)
        return group

    def __contains__(self, key: object) -> bool:
        return key in self._rows

    def __iter__(self):
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)


class FamilyGrid:
    """One family's measured rows, ready to price any shape: `latency_s(cat, combo, dense)`. Each exact-match
    key's grid is built when first asked for (`groups`)."""

    def __init__(self, family: str, cols: dict[str, np.ndarray], peaks: Peaks) -> None:
        self.family, self.spec, self.peaks = family, FAMILIES[family], peaks
        spec = self.spec
        self._cols = cols
        self._lat = np.asarray(cols["latency_s"], dtype=np.float64)
        by_cat = _rows_by_key([np.asarray(cols[c], dtype=object) for c in spec.cat], len(self._lat))
        self.lows: dict[tuple[str, ...], list[float]] = {}  # per key: each dense column's smallest measured value
        dense = {c: np.asarray(cols[c], dtype=np.float64) for c in spec.dense}
        for key, r in by_cat.items():
            self.lows[key] = [float(dense[c][r].min()) for c in spec.dense]
        self.groups: Mapping[tuple[str, ...], tuple[np.ndarray, list[_Cell]]] = _Groups(self._group, by_cat)

    def _group(self, key: tuple[str, ...], r: np.ndarray) -> tuple[np.ndarray, list[_Cell]]:
        """(log combos, their cells) of one exact-match key's rows `r`."""
        spec, cols = self.spec, self._cols
        f = {c: np.asarray(cols[c], dtype=np.float64)[r] for c in spec.combo + spec.dense}
        v = np.log(self._lat[r] / reference_s(self.family, dict(zip(spec.cat, key)), f, self.peaks))
        if spec.combo:
            combos, which = np.unique(np.stack([f[c] for c in spec.combo], axis=1), axis=0, return_inverse=True)
            which = which.reshape(-1)
        else:
            combos, which = np.zeros((1, 0)), np.zeros(len(r), dtype=np.intp)
        dense = np.stack(spec.coords(f), axis=1)
        cells = [_Cell(dense[which == j], v[which == j]) for j in range(len(combos))]
        return (np.log(combos) if spec.combo else combos, cells)

    def cats(self) -> list[tuple[str, ...]]:
        return sorted(self.groups)

    def latency_s(self, cat: tuple[str, ...], combo: tuple[float, ...], dense: tuple[Any, ...]) -> Any:
        """Seconds at exact-match keys `cat`, scalar combo values and dense values (floats or arrays, > 0)."""
        group = self.groups.get(cat)
        if group is None:
            have = ", ".join("/".join(k) for k in self.cats())
            raise KeyError(f"{self.family}: no measurements for {'/'.join(cat)}; measured: {have}")
        spec = self.spec
        combos, cells = group
        scalar = all(np.ndim(x) == 0 for x in dense)
        dense_a = [np.asarray(x, dtype=np.float64) for x in dense]
        # Below a dense axis' smallest measured value the query is priced as that value (time floor).
        clamped = [np.maximum(x, lo) for x, lo in zip(dense_a, self.lows[cat])]
        f = dict(zip(spec.combo, (float(c) for c in combo)))
        f.update(zip(spec.dense, clamped))
        ref = reference_s(self.family, dict(zip(spec.cat, cat)), f, self.peaks)
        logs = [np.log(x) for x in spec.coords(f)]
        if spec.combo:
            q = np.log(np.asarray(combo, dtype=np.float64))
            dist = np.sqrt(((combos - q) ** 2).sum(axis=1))
            exact = np.flatnonzero(dist < 1e-12)
            if exact.size:
                v = cells[int(exact[0])].value(logs)
            else:
                near = np.argsort(dist, kind="stable")[:NEAREST_COMBOS]
                w = 1.0 / dist[near] ** 2
                v = sum(wi * cells[int(j)].value(logs) for wi, j in zip(w, near)) / w.sum()
        else:
            v = cells[0].value(logs)
        t = ref * np.exp(v)
        return float(t) if scalar else t
