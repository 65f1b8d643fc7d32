"""Prices single ops: a measured profile's efficiency curve where one exists, the datasheet roofline otherwise.

`OpPricer.time_s(op, dtype, flops, bytes_)` = launch + roofline / efficiency. With a profile, roofline and
efficiency come from the profile (its own peaks, its fitted curve); without one, from the hardware datasheet and
the documented default efficiencies of `conf/cost/roofline.yaml`, or, where the hardware's generation has fitted
shape forms (`calibrate.efficiency`, e.g. Hopper), from those: GEMMs by (M, N, K) and grouped layout, prefill
attention by attended length, decode attention by its compute and memory terms; every such kernel takes at least
`launch_s` (the per-kernel floor). The pricer remembers which (op, dtype) pairs
were priced from which source, so every run can say what its numbers rest on.

Resolution is build-time: which curve, form or measured grid slice prices an (op, dtype) (and, under a grid
profile, a GEMM's (format, n, k) and an op's fixed arguments) depends on the configuration, not on the traffic.
The cost model resolves every one its pool's steps use while it is built (`LayeredCostModel.__init__` prices
one step of the pool's role), so the lookups below find them; they hold no prices (the step cache,
`sim.core.cost.tables.StepCache`, is the one memo of prices) and pricing a step resolves nothing new
(tests/cost/test_resolution.py).

A grid profile (`Profile.grid`: per-op latencies measured in a serving engine, imported from NVIDIA
AIConfigurator by `python -m calibrate.import_aic`) prices every op it covers from its measurements instead, through
`grid` (the profile's `calibrate.aic.lookup.GridLookup`: its `GridModel` sliced along the arguments that vary, so
a shape met for the first time costs microseconds; kept with the profile, shared by its pools' pricers): GEMMs
(`gemm_s`), GQA prefill and decode attention (`gqa_prefill_s`, `gqa_decode_s`), MLA prefill and decode attention
(`mla_prefill_s`, `mla_decode_s`: the attention kernel alone, its projections being GEMMs; `mla_bmm_s`: decode's
absorbed per-head products, batched over heads), the routed-expert block
(`moe_block_s`) and, through `sim.core.cost.comm.Links`, intra-node all-reduce and all-to-all and DeepEP dispatch
/ combine. What it does not cover falls back to the forms above and is listed with its reason (`fallback`). A
measured latency is divided by the op's `efficiency_scale` (1.0 by default: as measured).

Provenance (`kind`): `analytical` when nothing was priced from measurements; under a grid profile `measured` when
every fallback is of something the database does not measure at all (`absent`: elementwise kernels, pipeline
sends, multi-node collectives beyond the measured nodes, ...; listed with their reasons), `mixed` when some op the
database measures was still priced analytically (a format, model shape or family the profile did not import).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from calibrate import ops
from calibrate.aic.grid_model import decode_shape, prefill_shape
from calibrate.aic.lookup import grid_lookup
from calibrate.aic.names import ENGINE_NAMES
from calibrate.ops import check_dtype
from calibrate.profile import EfficiencyCurve, Profile
from inferplan.specs import HardwareSpec
from calibrate.efficiency import Generation
from sim.core.cost.percontext import PerContext


class OpPricer:
    def __init__(self, hw: HardwareSpec, efficiency: dict[str, float], launch_s: float,
                 profile: Profile | None = None, efficiency_scale: dict[str, float] | None = None,
                 generation: Generation | None = None) -> None:
        self.hw = hw
        self.generation = generation
        # Multipliers on the achieved efficiency per op (fitted by `sim.validate fit=true`; 1.0 = as calibrated).
        self.efficiency_scale = {k: float(v) for k, v in (efficiency_scale or {}).items()}
        for op, v in self.efficiency_scale.items():
            if not v > 0:
                raise ValueError(f"efficiency_scale.{op} must be > 0, got {v}")
        self.profile = profile
        self._efficiency = dict(efficiency)
        self._launch_s = float(launch_s)
        # Resolutions (module doc: build-time): (op, dtype) -> (curve, peak, bandwidth); (op, dtype) -> shape form.
        self._resolved: dict[tuple[str, str], tuple[EfficiencyCurve, float, float]] = {}
        self._forms: dict[tuple[str, str], Any] = {}
        self._peaks: dict[str, float] = {}  # dtype -> the datasheet peak of its compute format
        self.measured: set[tuple[str, str]] = set()
        self.analytical: set[tuple[str, str]] = set()
        # A grid profile's measured latencies (None: curves or analytical forms price everything), which of its
        # keys are covered (kept: asked for every op priced), and why each op it does not price fell back.
        self.grid: Any = grid_lookup(profile.grid) if profile is not None and profile.grid is not None else None
        self._covered: dict[tuple, bool] = {}
        self._gemm_grid: dict[str, bool] = {}  # GEMM format -> measured (the call rate's cheapest check)
        self._gemm_curves: dict[tuple, Any] = {}  # (format, n, k) -> the grid's GEMM over its rows
        self._curves: dict[tuple, Any] = {}  # (op, fixed arguments) -> the grid's op over its varying ones
        self.fallback: dict[str, str] = {}
        self.absent: set[str] = set()  # fallbacks of what the database does not measure (`kind`)

    def _resolve(self, op: str, dtype: str) -> tuple[EfficiencyCurve, float, float]:
        compute = check_dtype(dtype)["compute"]
        profile = self.profile
        curve = profile.curve(op, dtype) if profile is not None else None
        if profile is not None and curve is not None:
            peaks = profile.peak_flops_per_s
            peak = peaks.get(compute) or peaks["bf16"]
            entry = (curve, peak, profile.mem_bytes_per_s)
            self.measured.add((op, dtype))
        else:
            eff = self._efficiency.get(op)
            if eff is None:
                raise KeyError(f"no default efficiency for op {op!r} in conf/cost (have {sorted(self._efficiency)})")
            entry = (EfficiencyCurve((1.0,), (float(eff),), self._launch_s), self.hw.peak_for(compute),
                     self.hw.mem_bandwidth_bytes_per_s)
            self.analytical.add((op, dtype))
        self._resolved[(op, dtype)] = entry
        return entry

    def _peak(self, dtype: str) -> float:
        """The datasheet peak FLOP/s for `dtype`'s compute format (kept: asked for every op priced by a form)."""
        peak = self._peaks.get(dtype)
        if peak is None:
            peak = self._peaks[dtype] = self.hw.peak_for(check_dtype(dtype)["compute"])
        return peak

    def _form(self, op: str, dtype: str) -> Any:
        """The generation's shape form for (op, dtype) when no profile curve covers it, else None."""
        key = (op, dtype)
        if key in self._forms:
            return self._forms[key]
        g = self.generation
        form: Any = None
        profile = self.profile
        if g is not None and (profile is None or profile.curve(op, dtype) is None):
            compute = check_dtype(dtype)["compute"]
            if op in ("gemm", "moe_gemm"):
                form = g.gemm_form(compute, dtype)
            elif op == "attn_prefill":
                form = g.attn_prefill
            elif op == "attn_decode":
                form = g.attn_decode
            elif op == "attn_mla_decode":
                form = g.attn_mla_decode
            if form is not None:
                self.analytical.add(key)
        self._forms[key] = form
        return form

    def gemm_s(self, op: str, dtype: str, m: float, n: float, k: float, flops: float, bytes_: float,
               groups: float = 1.0, layout: str = "") -> float:
        """A (grouped) GEMM of `groups` x [m, k] x [k, n]: the generation's shape form where one applies, else
        `time_s` (profile curve or scalar default). A plain GEMM (`op` "gemm") in a format the grid profile
        measured is its measured latency."""
        if op == "gemm" and self.grid is not None:
            hit = self._gemm_grid.get(dtype)
            if hit is None:
                hit = self._gemm_grid[dtype] = self.measures("gemm", dtype, dtype=dtype)
            if hit:
                key = (dtype, n, k)
                curve = self._gemm_curves.get(key)
                if curve is None:
                    curve = self._gemm_curves[key] = self.grid.curve("gemm", dtype=dtype, n=n, k=k)
                return curve(m) / self.efficiency_scale.get(op, 1.0)
        form = self._form(op, dtype)
        if form is None:
            return self.time_s(op, dtype, flops, bytes_)
        if flops <= 0.0 and bytes_ <= 0.0:
            return 0.0
        peak = self._peak(dtype)
        t = form.time_s(m, n, k, flops, bytes_, peak, self.hw.mem_bandwidth_bytes_per_s, groups, layout,
                        self.efficiency_scale.get(op, 1.0))
        return t if t >= self._launch_s else self._launch_s

    def attn_prefill_s(self, dtype: str, flops: float, bytes_: float, seq: float, causal_share: float) -> float:
        """Prefill attention whose queries attend `seq` keys on average (the shape form's length term), a share
        `causal_share` of the pairs among the chunks' new tokens (the form's causal-block term)."""
        form = self._form("attn_prefill", dtype)
        if form is None:
            return self.time_s("attn_prefill", dtype, flops, bytes_)
        if flops <= 0.0 and bytes_ <= 0.0:
            return 0.0
        t = form.time_s(flops, bytes_, seq, self._peak(dtype),
                        self.hw.mem_bandwidth_bytes_per_s, self.efficiency_scale.get("attn_prefill", 1.0), causal_share)
        return t if t >= self._launch_s else self._launch_s

    # -- measured grids (a grid profile) ----------------------------------------------------------------------
    def measures(self, op: str, label: str, **cat: Any) -> bool:
        """Whether the grid profile prices `op` at the exact-match keys `cat` (dtype, compute, distribution, impl);
        records `op/label` as measured (the caller's fallback records it as analytical otherwise). False without a
        grid profile."""
        grid = self.grid
        if grid is None:
            return False
        key = (op, label, tuple(sorted(cat.items())))
        hit = self._covered.get(key)
        if hit is None:
            hit = self._covered[key] = bool(grid.covers(op, **cat))
            if hit:
                self.measured.add((op, label))
            else:
                family = grid_family(op)
                absent = not self.in_database(family)
                self.fall_back(op, label, "no " + " ".join(str(v) for v in cat.values()) + " measurements in "
                               "the grid profile" + (f" (the database has no {family} table for this GPU)"
                                                     if absent else ""), absent)
        return hit

    def fall_back(self, op: str, label: str, reason: str, absent: bool = False) -> None:
        """Record that `op/label` is priced analytically under a grid profile, and why (nothing without one);
        `absent`: the database measures no such op (it then does not make the pricing `mixed`: `kind`)."""
        if self.grid is not None:
            key = f"{op}/{label}"
            self.analytical.add((op, label))
            self.fallback.setdefault(key, reason)
            if absent:
                self.absent.add(key)

    def in_database(self, family: str) -> bool:
        """Whether the database the grid profile came from has `family`'s table for this GPU (in any engine's
        folder): False only where the profile's import recorded it missing from the database; a profile that
        does not say (an older import) counts as having it."""
        profile = self.profile
        if profile is None:
            return True
        fams = profile.provenance.get("provenance") or {}
        entry = fams.get(family) if isinstance(fams, dict) else None
        return not (isinstance(entry, dict) and "missing" in entry and entry.get("in_database") is False)

    def gqa_prefill_s(self, kv_dtype: str, prefill_tokens: float, q_sq: float, q_ctx: float, heads: int,
                      kv_heads: int, head_dim: int) -> float:
        """Measured GQA prefill attention of chunks with `prefill_tokens` new tokens, `q_sq` = sum q (q+1)/2 and
        `q_ctx` = sum q c attended pairs (per device heads), as equal prompts with the same tokens and pairs
        (`_prefill_s`)."""
        key = ("attn_prefill", kv_dtype, heads, kv_heads, head_dim)
        curve = self._curves.get(key)
        if curve is None:
            curve = self._curves[key] = self.grid.curve("attn_prefill", heads=heads, kv_heads=kv_heads,
                                                        head_dim=head_dim, dtype=kv_dtype)
        return _prefill_s(curve, prefill_tokens, q_sq, q_ctx) / self.efficiency_scale.get("attn_prefill", 1.0)

    def mla_prefill_s(self, kv_dtype: str, prefill_tokens: float, q_sq: float, q_ctx: float, heads: int) -> float:
        """Measured MLA prefill attention (the kernel alone, DeepSeek-V3's dimensions) of chunks as in
        `gqa_prefill_s`, `heads` per device."""
        key = ("attn_mla_prefill", kv_dtype, heads)
        curve = self._curves.get(key)
        if curve is None:
            curve = self._curves[key] = self.grid.curve("attn_mla_prefill", heads=heads, dtype=kv_dtype)
        return _prefill_s(curve, prefill_tokens, q_sq, q_ctx) / self.efficiency_scale.get("attn_prefill", 1.0)

    def mla_decode_s(self, kv_dtype: str, seqs: float, ctx: PerContext, heads: int) -> PerContext:
        """Measured MLA decode attention (absorbed weights, the kernel alone) of `seqs` sequences holding `ctx`
        cached tokens in all (a float or an array over a run's context sums), `heads` per device (draft tokens
        being verified count as heads: the kernel packs a sequence's queries with its heads)."""
        batch, per_seq = decode_shape(seqs, ctx)
        key = ("attn_mla_decode", kv_dtype, heads)
        curve = self._curves.get(key)
        if curve is None:
            curve = self._curves[key] = self.grid.curve("attn_mla_decode", heads=heads, dtype=kv_dtype)
        t: PerContext = curve(batch, per_seq)
        scale = self.efficiency_scale.get("attn_mla_decode", 1.0)
        return t if scale == 1.0 else t / scale

    def gqa_decode_s(self, kv_dtype: str, seqs: float, ctx: PerContext, heads: int, kv_heads: int,
                     head_dim: int) -> PerContext:
        """Measured GQA decode attention of `seqs` sequences holding `ctx` cached tokens in all (a float, or an
        array over a run's context sums: the same numpy operations either way, so they agree exactly)."""
        batch, per_seq = decode_shape(seqs, ctx)
        key = ("attn_decode", kv_dtype, heads, kv_heads, head_dim)
        curve = self._curves.get(key)
        if curve is None:
            curve = self._curves[key] = self.grid.curve("attn_decode", heads=heads, kv_heads=kv_heads,
                                                        head_dim=head_dim, dtype=kv_dtype)
        t: PerContext = curve(batch, per_seq)
        scale = self.efficiency_scale.get("attn_decode", 1.0)
        return t if scale == 1.0 else t / scale

    def mla_bmm_s(self, op: str, dtype: str, tokens: float, heads: int) -> float:
        """Measured MLA decode absorbed product `op` (`mla_bmm_pre`: W_UK into the query; `mla_bmm_post`: W_UV out
        of the latent output) of `tokens` decoding query tokens over `heads` per device."""
        key = (op, dtype, heads)
        curve = self._curves.get(key)
        if curve is None:
            curve = self._curves[key] = self.grid.curve(op, heads=heads, dtype=dtype)
        return curve(tokens) / self.efficiency_scale.get("gemm", 1.0)

    def dsa_module_s(self, op: str, kv_dtype: str, compute: str, variant: str, heads: int, *shape: Any) -> Any:
        """A measured sparse-attention (DSA) module (`calibrate.aic.names.DSA_FAMILIES`: projections, indexer,
        top-k, sparse MLA kernel, o_proj) of model `variant` with `heads` per device: `dsa_module_prefill` of
        chunks (prefill tokens, q_sq, q_ctx) as equal prompts (`_prefill_s`), `dsa_module_decode` of (sequences,
        cached tokens in all: a float or an array over a run's context sums)."""
        key = (op, kv_dtype, compute, variant, heads)
        curve = self._curves.get(key)
        if curve is None:
            curve = self._curves[key] = self.grid.curve(op, heads=heads, variant=variant, dtype=kv_dtype,
                                                        compute=compute)
        if op == "dsa_module_prefill":
            return _prefill_s(curve, *shape) / self.efficiency_scale.get("attn_prefill", 1.0)
        batch, per_seq = decode_shape(*shape)
        t = curve(batch, per_seq)
        scale = self.efficiency_scale.get("attn_mla_decode", 1.0)
        return t if scale == 1.0 else t / scale

    def gdn_s(self, op: str, batch: float, seq: float, heads: int, kv_heads: int, head_dim: int) -> float:
        """A measured Gated DeltaNet kernel (`calibrate.aic.grid_model`: gdn_conv_prefill, gdn_chunk_prefill over
        `batch` prompts of `seq` new tokens; gdn_conv_decode, gdn_recurrent_decode over `batch` one-token
        sequences, `seq` unused) with `heads` value heads and `kv_heads` key heads per device."""
        key = (op, heads, kv_heads, head_dim)
        curve = self._curves.get(key)
        if curve is None:
            curve = self._curves[key] = self.grid.curve(op, heads=heads, kv_heads=kv_heads, head_dim=head_dim,
                                                        dtype="bf16")
        scale = self.efficiency_scale.get("linear_attn", 1.0)
        if op.endswith("_decode"):
            return float(curve(batch)) / scale
        return float(curve(batch, seq)) / scale

    def moe_block_s(self, dtype: str, tokens: float, hidden: float, inter: float, topk: int, experts: int,
                    tp: int, ep: int, distribution: str) -> float:
        """Measured routed-expert block (up/gate GEMM, activation, down GEMM) of one EP rank receiving about
        `tokens` x `topk` rows (`tokens` per rank before dispatch; `inter` the expert's full intermediate size,
        split by `tp`)."""
        key = ("moe_gemm", dtype, hidden, inter, topk, experts, tp, ep, distribution)
        curve = self._curves.get(key)
        if curve is None:
            curve = self._curves[key] = self.grid.curve("moe_gemm", dtype=dtype, hidden=hidden, inter=inter,
                                                        topk=topk, experts=experts, tp=tp, ep=ep,
                                                        distribution=distribution)
        return curve(tokens) / self.efficiency_scale.get("moe_gemm", 1.0)

    def elementwise_layer_s(self, tokens: float, hidden: float, rope_cols: float, act_rows: float,
                            act_cols: float, elements: float) -> float:
        """A layer's elementwise kernels: the generation's per-kind kernels as engines fuse them
        (`ElementwiseForm.layer_s`) where no profile covers `elementwise`, else one bundled op of `elements`."""
        g, profile = self.generation, self.profile
        form = g.elementwise if g is not None else None
        if self.grid is not None:
            self.fall_back("elementwise", "bf16", "no elementwise kernels (norms, rotary, activation, residual) in "
                           "the AIConfigurator tables", True)
        if form is None or (profile is not None and profile.curve("elementwise", "bf16") is not None):
            return self.time_s("elementwise", "bf16", *ops.elementwise_work(elements)) if tokens > 0 else 0.0
        self.analytical.add(("elementwise", "bf16"))
        return form.layer_s(tokens, hidden, rope_cols, act_rows, act_cols, self.hw.mem_bandwidth_bytes_per_s,
                            self.efficiency_scale.get("elementwise", 1.0))

    def time_s(self, op: str, dtype: str, flops: float, bytes_: float) -> float:
        """Seconds for one launch of `op` doing `flops` and moving `bytes_` (0 when there is no work)."""
        if flops <= 0.0 and bytes_ <= 0.0:
            return 0.0
        entry = self._resolved.get((op, dtype)) or self._resolve(op, dtype)
        curve, peak, bw = entry
        scale = self.efficiency_scale.get(op, 1.0)
        if len(curve.roofline_s) == 1:
            return _one_knot_s(curve, peak, bw, scale, flops, bytes_)
        return curve.time_s(max(flops / peak, bytes_ / bw) / scale)

    def time_s_array(self, op: str, dtype: str, flops, bytes_):
        """Seconds of `op` over arrays of work, elementwise; used to price runs of decode steps. A step priced alone
        goes through here too (floats in, a float out) with the same arithmetic, so the two agree exactly: floats
        take the plain-Python path only where it is the same IEEE operations (a single-knot curve); multi-knot
        curves interpolate in numpy either way. Decode attention with a generation form: its two-term roofline
        (floats or arrays alike), floored at `launch_s`."""
        if op == "attn_decode" or op == "attn_mla_decode":
            form = self._form(op, dtype)
            if form is not None:
                t = form.time_s(flops, bytes_, self._peak(dtype),
                                self.hw.mem_bandwidth_bytes_per_s, self.efficiency_scale.get(op, 1.0))
                if isinstance(t, np.ndarray):
                    return np.maximum(t, self._launch_s)
                return t if t >= self._launch_s else self._launch_s
        entry = self._resolved.get((op, dtype)) or self._resolve(op, dtype)
        curve, peak, bw = entry
        scale = self.efficiency_scale.get(op, 1.0)
        if len(curve.roofline_s) == 1 and not isinstance(flops, np.ndarray) and not isinstance(bytes_, np.ndarray):
            return _one_knot_s(curve, peak, bw, scale, flops, bytes_)
        if not isinstance(flops, np.ndarray) and not isinstance(bytes_, np.ndarray):
            return float(self.time_s_array(op, dtype, np.array([flops], dtype=np.float64),
                                           np.array([bytes_], dtype=np.float64))[0])
        roof = np.maximum(flops / peak, bytes_ / bw) / scale
        eff: Any  # (a float, or an array over a run's steps)
        if len(curve.roofline_s) == 1:
            eff = curve.efficiency[0]
        else:
            eff = np.interp(np.log(roof), np.log(np.asarray(curve.roofline_s)), np.asarray(curve.efficiency))
        return np.where(roof > 0, curve.launch_s + roof / eff, curve.launch_s)

    @property
    def kind(self) -> str:
        """`measured`, `mixed` or `analytical` (module doc: under a grid profile a fallback of what the database
        does not measure at all leaves the pricing `measured`)."""
        if not self.measured:
            return "analytical"
        if self.grid is not None:
            for op, label in self.analytical:
                if f"{op}/{label}" not in self.absent:
                    return "mixed"
            return "measured"
        return "mixed" if self.analytical else "measured"


def _prefill_s(curve: Any, prefill_tokens: float, q_sq: float, q_ctx: float) -> float:
    """A measured prefill-attention curve (batch, seq) at chunks with `prefill_tokens` new tokens and `q_sq`, `q_ctx`
    attended pairs, as equal prompts with the same tokens and pairs (`prefill_shape`). NOTE: fewer pairs than one
    prompt of that length (a short chunk after a long cached context: batch < 1) is priced as that share of one
    prompt's time (time scales with work at the efficiency the grid measured for that attended length), at least
    the grid's smallest prompt."""
    batch, seq = prefill_shape(prefill_tokens, q_sq, q_ctx)
    if batch >= 1.0:
        return float(curve(batch, seq))
    t = batch * float(curve(1.0, seq))
    floor = float(curve(1.0, 1.0))
    return t if t >= floor else floor


def grid_family(op: str) -> str:
    """The grid family an op's measurements come from (`calibrate.aic.grid_model`'s routing, by op name)."""
    return {"attn_mla_prefill": "mla_prefill", "attn_mla_decode": "mla_decode", "moe_gemm": "moe",
            "mla_bmm_pre": "mla_bmm", "mla_bmm_post": "mla_bmm",
            "allreduce": "custom_allreduce", "all_to_all": "nccl", "deepep_dispatch": "deepep_normal",
            "deepep_combine": "deepep_normal", "gdn_conv_prefill": "gdn_prefill", "gdn_chunk_prefill": "gdn_prefill",
            "gdn_conv_decode": "gdn_decode", "gdn_recurrent_decode": "gdn_decode",
            "dsa_module_prefill": "dsa_prefill", "dsa_module_decode": "dsa_decode"}.get(op, op)


def _one_knot_s(curve: EfficiencyCurve, peak: float, bw: float, scale: float, flops: float, bytes_: float) -> float:
    """A one-knot curve (the analytical defaults) at one op's work: launch + roofline / efficiency, in plain floats
    (`EfficiencyCurve.time_s` and the array path are the same IEEE operations; this runs for every op priced)."""
    roof = max(flops / peak, bytes_ / bw) / scale
    return curve.launch_s + roof / curve.efficiency[0] if roof > 0.0 else curve.launch_s



def grid_source(meta: dict, hardware: str) -> dict:
    """Where a grid profile's measurements come from, from its metadata (`calibrate.aic` import): the database and
    commit, the engine and version(s) that measured the ops, NCCL's version, and a sentence for the run's summary."""
    src = meta.get("source") or {}
    fams = meta.get("provenance") or {}
    engine = str((meta.get("engine") or {}).get("framework") or "")
    versions = sorted({str(f.get("version")) for name, f in fams.items()
                       if isinstance(f, dict) and name != "nccl" and f.get("version")
                       and f.get("framework", engine) == engine})
    nccl = fams.get("nccl") if isinstance(fams.get("nccl"), dict) else {}
    nccl_version = str(nccl.get("version") or "") if nccl else ""
    deepep = sorted({f"{ENGINE_NAMES.get(str(f.get('framework')), str(f.get('framework')))} {v}"
                     for name, f in fams.items() if isinstance(f, dict) and name.startswith("deepep")
                     for v in (f.get("measured_versions") or {})})
    replaced = sorted(f"{fmt} {name} from {ENGINE_NAMES.get(str(r.get('from')), str(r.get('from')))} {r.get('version', '')}"
                      .rstrip() for name, f in fams.items() if isinstance(f, dict)
                      for fmt, r in (f.get("replaced") or {}).items() if isinstance(r, dict) and r.get("from"))
    name = ENGINE_NAMES.get(engine, engine)
    device = meta.get("device", hardware)
    text = (f"{src.get('name', 'AIConfigurator database')} ({src.get('repository', '?')} commit "
            f"{src.get('commit', '?')}): ops measured inside {name} {'/'.join(versions)} on {device}"
            + (f", collectives NCCL {nccl_version}" if nccl_version else "")
            + (f", DeepEP in {' and '.join(deepep)}" if deepep else "")
            + (f" ({'; '.join(replaced)}: the engine's own table measured its host path, not the kernel)"
               if replaced else ""))
    return {"database": src.get("name"), "repository": src.get("repository"), "commit": src.get("commit"),
            "system": src.get("system"), "engine": engine, "engine_versions": versions, "nccl": nccl_version,
            "deepep": deepep, "replaced": replaced, "text": text}
