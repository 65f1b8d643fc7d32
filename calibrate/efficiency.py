"""Shape-dependent analytical efficiencies of one GPU generation (`conf/cost/generations/<generation>.yaml`).

The scalar defaults of `conf/cost/roofline.yaml` price every op as roofline / constant efficiency. A generation
file replaces that, for the ops it covers, with forms whose parameters were fitted to published kernel tables
(`python -m calibrate.hopper_fit`, which also writes the file and its held-out errors):

* GEMM (dense, and MoE grouped over `groups` experts of `m` rows each): `launch + max(t_c, t_m)`, t_c = flops /
  (peak x e_c x wave fill) x (1 + k0 / K) (tiles of tile_m x tile_n over `sms` SMs; k0: per-tile prologue and
  epilogue in K units), t_m = bytes / (bandwidth x e_m). Grouped layouts (contiguous, masked) scale e_c.
* Prefill attention: `launch + flops / (peak x e_c x s / (s + s0))` (s: mean attended keys per query), the
  pairs among a chunk's new tokens costing `causal_factor` times a context pair (1: masked tiles skipped).
* Decode attention: `launch + max(flops / (peak x e_c), bytes / (bandwidth x e_m))` (GQA paged; MLA).
* Custom all-reduce (intra-node, below `max_bytes`): one-shot `lat + (p-1) S / B` or two-shot
  `2 lat + 2 (p-1)/p S / B`, whichever is faster, lat = a0 + a1 p; larger messages go to NCCL's ring.
* NCCL all-reduce (Ampere, measured per node type): by message size, segments `floor + 2 (p-1)/p S / (B e)`
  (B: the conf/hardware link; one segment per protocol/algorithm regime NCCL switches between), per hardware,
  link (intra / inter node) and rank count.
* EP all-to-all: DeepEP normal (bandwidth fractions of NVLink / NIC) and low-latency (latency + bytes / B).
* Elementwise kernels by kind (norm, add, act, rope): `floor + bytes / (bandwidth x e)` each; a layer runs them
  as the engines fuse them (`ElementwiseForm.layer_s`).
Every function takes floats (or numpy arrays where decode contexts vary) and is pure arithmetic.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from inferplan.config.yaml_files import read_yaml_mapping

GENERATIONS_DIR = Path(__file__).resolve().parent.parent / "conf" / "cost" / "generations"


def _ceil(x: float) -> float:
    return float(math.ceil(x - 1e-9))


@functools.lru_cache(maxsize=1 << 16)
def _wave_fill(tile_n: int, sms: int, tiles_m: float, n: float, groups: float) -> float:
    """The best N-tile choice's useful share of the SMs' tiles (`GemmForm.fill` without its M padding): a pure
    function of the tile counts, kept because a simulation prices the same few (tiles_m, n) pairs for every new
    token count (an interpreted loop of 4 choices, about a fifth of pricing a new shape)."""
    best = 0.0
    for div in (1, 2, 4, 8):
        tn = tile_n / div
        tiles = _ceil(groups) * tiles_m * _ceil(n / tn)
        waves = _ceil(tiles / sms)
        best = max(best, (n / (_ceil(n / tn) * tn)) * tiles / (waves * sms))
    return best


@dataclass(frozen=True)
class GemmForm:
    compute_eff: float
    k_overhead: float
    memory_eff: float
    launch_s: float
    tile_m: int = 128
    tile_n: int = 128
    sms: int = 132
    layout_eff: tuple = ()     # ((layout, factor on compute_eff), ...) for grouped GEMMs

    def fill(self, m: float, n: float, groups: float = 1.0) -> float:
        """Useful fraction of the tensor-core work: M padding to the tile and the last wave's idle SMs, with the
        N tile the kernel picks to fill the SMs (tile_n, /2, /4, /8: DeepGEMM-style kernels choose a narrower
        block N when few tiles would leave SMs idle)."""
        tm = 64 if m <= 64 else self.tile_m
        tiles_m = _ceil(max(m, 1.0) / tm)
        return (max(m, 1.0) / (tiles_m * tm)) * _wave_fill(self.tile_n, self.sms, tiles_m, n, groups)

    def time_s(self, m: float, n: float, k: float, flops: float, bytes_: float, peak: float, bw: float,
               groups: float = 1.0, layout: str = "", scale: float = 1.0) -> float:
        if flops <= 0 and bytes_ <= 0:
            return 0.0
        e = self.compute_eff * dict(self.layout_eff).get(layout, 1.0) if layout else self.compute_eff  # (x 1.0)
        tc = flops / (peak * e * self.fill(m, n, groups)) * (1.0 + self.k_overhead / max(k, 1.0))
        tm = bytes_ / (bw * self.memory_eff)
        return self.launch_s + max(tc, tm) / scale


@dataclass(frozen=True)
class PrefillForm:
    """launch + flops (1 + s0/s + (kappa - 1) f) / (peak e_c): per attended (query, key) pair, plus s0 pairs' worth
    per query row (Q load, softmax rescale, O write; s: mean keys a query attends), the pairs among the chunk's
    own new tokens (share f of all pairs) costing `causal_factor` (kappa) times a cached-context pair. kappa = 1:
    the kernel skips masked tiles (FA2/FA3 causal); kappa = 2: it computes the whole q x q block of the new tokens
    (Vidur's A100 table: time follows q (c + q), not q (c + (q+1)/2))."""

    compute_eff: float
    seq_half: float            # s0: attended keys per query at which half the asymptotic rate is reached
    launch_s: float
    causal_factor: float = 1.0

    def time_s(self, flops: float, bytes_: float, seq: float, peak: float, bw: float, scale: float = 1.0,
               causal_share: float = 0.0) -> float:
        """`causal_share`: the share of the attended pairs that lie among the chunks' new tokens
        (q_sq / (q_sq + q_ctx) in `calibrate.ops.attn_prefill_work`'s sums)."""
        if flops <= 0:
            return 0.0
        s = max(seq, 1.0)
        tc = flops / (peak * self.compute_eff * s / (s + self.seq_half))
        if self.causal_factor != 1.0:
            tc += (self.causal_factor - 1.0) * causal_share * flops / (peak * self.compute_eff)
        return self.launch_s + max(tc, bytes_ / bw) / scale


@dataclass(frozen=True)
class RooflineForm:
    """launch + max(flops / (peak e_c), bytes / (bw e_m)): decode attention (floats or arrays)."""

    compute_eff: float
    memory_eff: float
    launch_s: float

    def time_s(self, flops: Any, bytes_: Any, peak: float, bw: float, scale: float = 1.0) -> Any:
        if isinstance(flops, float) and isinstance(bytes_, float):  # (one step: the same IEEE operations, no numpy)
            t = max(flops / (peak * self.compute_eff), bytes_ / (bw * self.memory_eff)) / scale
            return self.launch_s + float(t) if t > 0 else self.launch_s
        t = np.maximum(flops / (peak * self.compute_eff), bytes_ / (bw * self.memory_eff)) / scale
        if isinstance(t, np.ndarray):
            return np.where(t > 0, self.launch_s + t, self.launch_s)
        return self.launch_s + float(t) if t > 0 else self.launch_s


@dataclass(frozen=True)
class AllReduceForm:
    lat_base_s: float
    lat_per_rank_s: float
    bytes_per_s: float
    max_bytes: float

    def time_s(self, nbytes: float, ranks: int) -> float:
        lat = self.lat_base_s + self.lat_per_rank_s * ranks
        one = lat + (ranks - 1) * nbytes / self.bytes_per_s
        two = 2 * lat + 2.0 * (ranks - 1) / ranks * nbytes / self.bytes_per_s
        return min(one, two)


@dataclass(frozen=True)
class NcclForm:
    """NCCL all-reduce by message size: segments ((hardware, link, ranks, max_bytes, floor_s, bus_eff), ...),
    sorted; a message takes the first segment of its (hardware, link, ranks) whose max_bytes it does not exceed."""

    segments: tuple

    def time_s(self, hardware: str, link: str, ranks: int, nbytes: float, link_bytes_per_s: float) -> float | None:
        """Seconds, or None where no segment covers this hardware / link / rank count (the ring formula applies)."""
        group = self._groups.get((hardware, link, ranks))
        if group is None:
            return None
        for max_bytes, floor_s, eff in group:
            if nbytes <= max_bytes:
                break
        return floor_s + 2.0 * (ranks - 1) / ranks * nbytes / (link_bytes_per_s * eff)

    @functools.cached_property
    def _groups(self) -> dict[tuple, tuple]:
        """The segments of each (hardware, link, ranks), in order (the last one also takes larger messages)."""
        out: dict[tuple, list] = {}
        for hw, ln, p, max_bytes, floor_s, eff in self.segments:
            out.setdefault((hw, ln, p), []).append((max_bytes, floor_s, eff))
        return {k: tuple(v) for k, v in out.items()}


@dataclass(frozen=True)
class AllToAllForm:
    normal_intra_eff: float    # DeepEP normal kernels: fraction of the NVLink datasheet bandwidth
    normal_inter_eff: float    # ... of the NIC's
    ll_latency_s: float        # DeepEP low-latency kernels: fixed part per phase
    ll_bytes_per_s: float      # ... bytes a device sends per second (RDMA)


@dataclass(frozen=True)
class ElementwiseForm:
    kinds: tuple               # ((kind, efficiency, floor_s), ...) for norm, add, act, rope

    def kernel_s(self, kind: str, bytes_: float, bw: float) -> float:
        for k, e, floor in self.kinds:
            if k == kind:
                return floor + bytes_ / (bw * e) if bytes_ > 0 else 0.0
        raise KeyError(f"no elementwise kind {kind!r}")

    def layer_s(self, tokens: float, hidden: float, rope_cols: float, act_rows: float, act_cols: float,
                bw: float, scale: float = 1.0) -> float:
        """One layer's elementwise kernels as vLLM / SGLang fuse them: two fused residual-add + RMSNorm kernels
        (read x and the residual, write both: 4 passes of tokens x hidden, bf16), rotary on Q and K (1 read +
        1 write), the gated activation (2 reads + 1 write of the MLP's rows x intermediate)."""
        if tokens <= 0:
            return 0.0
        norm = 2 * self.kernel_s("norm", 4 * tokens * hidden * 2.0 / scale, bw)
        rope = self.kernel_s("rope", 2 * tokens * rope_cols * 2.0 / scale, bw) if rope_cols else 0.0
        act = self.kernel_s("act", 3 * act_rows * act_cols * 2.0 / scale, bw) if act_rows else 0.0
        return norm + rope + act


@dataclass(frozen=True)
class Generation:
    name: str
    gemm: dict                 # compute format ("bf16", "fp8") -> GemmForm
    attn_prefill: PrefillForm | None
    attn_decode: RooflineForm | None
    attn_mla_decode: RooflineForm | None
    allreduce: AllReduceForm | None
    all_to_all: AllToAllForm | None
    source: str
    elementwise: ElementwiseForm | None = None
    nccl: NcclForm | None = None

    def gemm_form(self, compute: str, dtype: str = "") -> GemmForm | None:
        """The form of a weight format that has its own (`int4_wo`: a weight-only kernel's memory efficiency),
        else of its compute format, else bf16's."""
        return self.gemm.get(dtype) or self.gemm.get(compute) or self.gemm.get("bf16")


def _params(d: dict, key: str) -> dict:
    return {k: v["value"] if isinstance(v, dict) and "value" in v else v for k, v in (d.get(key) or {}).items()}


def load_generation(name: str | None) -> Generation | None:
    """The generation's fitted forms, or None (no file: the scalar defaults of conf/cost apply)."""
    if not name or name == "none":
        return None
    path = GENERATIONS_DIR / f"{name}.yaml"
    if not path.is_file():
        return None
    d = read_yaml_mapping(path)
    gemm = {}
    for fmt, g in (d.get("gemm") or {}).items():
        p = {k: v["value"] if isinstance(v, dict) and "value" in v else v for k, v in g.items() if k != "layout_eff_basis"}
        layouts = tuple(sorted((str(k), float(v)) for k, v in (p.pop("layout_eff", None) or {}).items()))
        gemm[str(fmt)] = GemmForm(**{k: float(v) if k not in ("tile_m", "tile_n", "sms") else int(v)
                                     for k, v in p.items()}, layout_eff=layouts)

    def make(cls, key):
        p = _params(d, key)
        return cls(**{k: float(v) for k, v in p.items()}) if p else None

    ew = d.get("elementwise") or {}
    kinds = tuple(sorted((str(k), float(_params(ew, k)["efficiency"]), float(_params(ew, k)["floor_s"]))
                         for k in ew if isinstance(ew[k], dict)))
    segs = []
    for hw, links in ((d.get("nccl_allreduce") or {}).get("segments") or {}).items():
        for link, by_ranks in links.items():
            for ranks, rows in by_ranks.items():
                for r in rows:
                    segs.append((str(hw), str(link), int(ranks), float(r["max_bytes"]), float(r["floor_s"]),
                                 float(r["bus_eff"])))
    return Generation(str(d.get("generation", name)), gemm, make(PrefillForm, "attn_prefill"),
                      make(RooflineForm, "attn_decode"), make(RooflineForm, "attn_mla_decode"),
                      make(AllReduceForm, "allreduce"), make(AllToAllForm, "all_to_all"), str(path),
                      ElementwiseForm(kinds) if kinds else None, NcclForm(tuple(sorted(segs))) if segs else None)


def hardware_generation(source: str) -> str | None:
    """The `generation:` tag of a conf/hardware file (HardwareSpec.source), None when it has none."""
    if not Path(source).is_file():
        return None
    d = read_yaml_mapping(source)
    g = d.get("generation")
    return None if g is None else str(g)
