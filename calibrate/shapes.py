"""The ops a model needs and the shapes to time them at, mirroring how the simulator prices an iteration.

`model_shapes(model, grid, ...)` walks one decoder layer the way `sim.core.cost.roofline.LayeredCostModel` does (QKV/O
or MLA projections, gated MLP or MoE experts, prefill and decode attention, the layer's elementwise passes, the LM
head, tensor-parallel collectives) and returns one `OpShape` per distinct (op, dtype, shape) at every point of a
`Grid`. FLOPs and bytes come from `calibrate.ops`, the formulas the simulator prices with, so a curve fitted on
these points is read back on the same axis. Shapes are per device: TP shards heads and hidden dims, EP experts.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from calibrate import ops
from inferplan.errors import InputError
from inferplan.specs import HardwareSpec, ModelSpec

# Tokens per iteration: log-spaced 1 ... 16,384 (ratio sqrt(2) steps of 1, 1.5, 2, 3, 4, ...), which contains the
# batch sizes schedulers form (powers of two and the 48/96/192/384 steps of CUDA-graph capture lists).
LOG_TOKENS: tuple[int, ...] = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024,
                               1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384)
SCHEDULER_BATCHES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512)


@dataclass(frozen=True)
class Grid:
    """Where to sample each op. Points whose datasheet roofline exceeds `max_roofline_s`, or whose operands exceed
    `max_operand_bytes`, are dropped (they keep CPU runs short and inside memory)."""

    name: str
    tokens: tuple[int, ...]                      # tokens per step: M of projection GEMMs, elementwise rows
    sampled: tuple[int, ...]                     # sequences sampling a token per step: LM-head rows
    prefill: tuple[tuple[int, int, int], ...]    # (sequences, new tokens each, cached tokens each)
    decode_batch: tuple[int, ...]                # decoding sequences per step
    decode_context: tuple[int, ...]              # cached tokens per decoding sequence
    max_roofline_s: float = math.inf
    max_operand_bytes: float = math.inf


GRIDS: dict[str, Grid] = {
    "full": Grid(
        name="full", tokens=tuple(sorted(set(LOG_TOKENS) | set(SCHEDULER_BATCHES))),
        sampled=SCHEDULER_BATCHES + (768, 1024),
        prefill=tuple((1, q, 0) for q in (16, 64, 256, 1024, 2048, 4096, 8192, 16384))
        + ((1, 512, 1024), (1, 512, 4096), (1, 512, 16384), (1, 2048, 2048), (1, 2048, 8192), (1, 2048, 30720),
           (4, 256, 0), (8, 1024, 0), (16, 128, 0), (4, 512, 3584)),
        decode_batch=(1, 4, 16, 32, 64, 128, 256, 512),
        decode_context=(256, 1024, 4096, 16384, 65536),
        max_operand_bytes=24e9),
    "cpu": Grid(
        name="cpu", tokens=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048),
        sampled=(1, 2, 4, 8, 16, 32, 64),
        prefill=((1, 16, 0), (1, 64, 0), (1, 256, 0), (1, 1024, 0), (1, 2048, 0), (1, 256, 1024), (4, 128, 0)),
        decode_batch=(1, 4, 16, 64), decode_context=(256, 1024, 4096),
        max_roofline_s=0.02, max_operand_bytes=2.5e9),
    "tiny": Grid(
        name="tiny", tokens=(1, 4, 16, 64), sampled=(1, 4),
        prefill=((1, 16, 0), (1, 64, 0), (2, 16, 32)), decode_batch=(1, 4), decode_context=(32, 128),
        max_roofline_s=2e-3, max_operand_bytes=64e6),
}


def grid_for(name: str, hw: HardwareSpec) -> Grid:
    """The grid called `name`; `auto` picks `cpu` on CPU hardware and `full` elsewhere."""
    if name == "auto":
        name = "cpu" if hw.kind == "cpu" else "full"
    if name not in GRIDS:
        raise InputError("conf/calibrate.yaml", "grid", f"unknown grid {name!r}",
                         f"use one of: auto, {', '.join(GRIDS)}")
    return GRIDS[name]


@dataclass(frozen=True)
class OpShape:
    """One op at one shape: what is timed. `dims` are the op's shape parameters, in a fixed order per op."""

    op: str
    dtype: str
    dims: tuple[tuple[str, int], ...]
    flops: float
    bytes: float
    layers: tuple[str, ...] = field(default=(), compare=False)

    @property
    def shape(self) -> str:
        """The shape as a stable string, e.g. `m=64,n=6144,k=4096` (a column of measurements.parquet)."""
        return ",".join(f"{k}={v}" for k, v in self.dims)

    @property
    def key(self) -> tuple[str, str, str]:
        return self.op, self.dtype, self.shape

    def dim(self, name: str) -> int:
        return dict(self.dims)[name]


@dataclass(frozen=True)
class Parallel:
    """Tensor- and expert-parallel degrees of one instance; shapes are those of one device. With ep > 1 each of the
    ep expert groups splits its experts over `moe_tp` = tp / ep devices (1 where ep >= tp: whole experts, as under
    attention DP), the simulator's layout (sim/core/cost/layout.py)."""

    tp: int = 1
    ep: int = 1

    @property
    def moe_tp(self) -> int:
        return self.tp if self.ep == 1 else max(1, self.tp // self.ep)


def parse_shape(shape: str) -> dict[str, int]:
    """Inverse of `OpShape.shape`."""
    return {k: int(v) for k, v in (part.split("=") for part in shape.split(","))}


class _Collector:
    """Accumulates shapes, merging duplicates (the same op, dtype and shape needed by two layers)."""

    def __init__(self, hw: HardwareSpec, grid: Grid) -> None:
        self.hw, self.grid = hw, grid
        self.shapes: dict[tuple[str, str, str], OpShape] = {}
        self.dropped = 0

    def add(self, op: str, dtype: str, layer: str, dims: dict[str, int], work: tuple[float, float],
            operand_bytes: float) -> None:
        flops, bytes_ = work
        peak = self.hw.peak_for(ops.check_dtype(dtype)["compute"])
        if (ops.roofline_s(flops, bytes_, peak, self.hw.mem_bandwidth_bytes_per_s) > self.grid.max_roofline_s
                or operand_bytes > self.grid.max_operand_bytes):
            self.dropped += 1
            return
        s = OpShape(op, dtype, tuple((k, int(v)) for k, v in dims.items()), float(flops), float(bytes_), (layer,))
        old = self.shapes.get(s.key)
        if old is not None:
            if layer not in old.layers:
                self.shapes[s.key] = OpShape(op, dtype, old.dims, old.flops, old.bytes, old.layers + (layer,))
            return
        self.shapes[s.key] = s


def _shard(path: str, value: int, parts: int, what: str) -> int:
    if value % parts:
        raise InputError(path, what, f"{value} is not divisible by the parallel degree {parts}",
                         "choose a tp/ep that divides it")
    return value // parts


def _gemm(c: _Collector, layer: str, dtype: str, m: int, n: int, k: int, heads: int = 0) -> None:
    """A dense GEMM [m,k]x[k,n]; `heads` > 0 marks a per-head batched GEMM (MLA absorbed) of n/heads columns each."""
    dims = {"m": m, "n": n, "k": k} | ({"heads": heads} if heads else {})
    fmt = ops.check_dtype(dtype)
    c.add("gemm", dtype, layer, dims, ops.gemm_work(m, n, k, dtype),
          n * k * fmt["weight_bytes"] + m * k * fmt["act_bytes"])


def _gemm_family(c: _Collector, m: ModelSpec, par: Parallel, dtypes: tuple[str, ...], ops_wanted: set[str]) -> None:
    src, tp, H = m.source, par.tp, m.hidden_size
    heads = _shard(src, m.num_heads, tp, "attention.num_heads")
    gate = 2 if m.ffn_kind == "gated" else 1
    for t in c.grid.tokens:
        if "gemm" in ops_wanted:
            for dt in dtypes:
                if m.attention_kind == "gqa":
                    kv = max(1, m.num_kv_heads // tp)
                    _gemm(c, "qkv_proj", dt, t, (heads + 2 * kv) * m.head_dim, H)
                    _gemm(c, "o_proj", dt, t, H, heads * m.head_dim)
                else:
                    nope, rope, v, rank = m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim, m.kv_lora_rank
                    if m.q_lora_rank:
                        _gemm(c, "q_a_proj", dt, t, m.q_lora_rank, H)
                        _gemm(c, "q_b_proj", dt, t, heads * (nope + rope), m.q_lora_rank)
                    else:
                        _gemm(c, "q_proj", dt, t, heads * (nope + rope), H)
                    _gemm(c, "kv_a_proj", dt, t, rank + rope, H)
                    _gemm(c, "o_proj", dt, t, H, heads * v)
                    _gemm(c, "kv_b_proj", dt, t, heads * (nope + v), rank)  # prefill: latent -> K_nope, V
                if m.moe is None or m.first_dense_layers:
                    inter = _shard(src, m.intermediate_size, tp, "ffn.intermediate_size")
                    _gemm(c, "mlp_up", dt, t, gate * inter, H)
                    _gemm(c, "mlp_down", dt, t, H, inter)
                if m.moe is not None and m.moe.shared_experts:
                    si = _shard(src, m.moe.expert_intermediate_size, tp, "ffn.moe.expert_intermediate_size")
                    si *= m.moe.shared_experts
                    _gemm(c, "shared_expert_up", dt, t, gate * si, H)
                    _gemm(c, "shared_expert_down", dt, t, H, si)
            if m.moe is not None:
                _gemm(c, "router", "bf16", t, m.moe.num_experts, H)
        if "moe_gemm" in ops_wanted and m.moe is not None:
            _moe(c, m, par, t, dtypes)
    if "gemm" in ops_wanted:
        for b in c.grid.sampled:
            _gemm(c, "lm_head", "bf16", b, math.ceil(m.vocab_size / tp), H)  # vocab-parallel LM head
            if m.attention_kind == "mla":  # decode absorbs W_UK into q and W_UV into o: per-head batched GEMMs
                rank = m.kv_lora_rank
                _gemm(c, "mla_absorb_q", "bf16", b, heads * rank, m.qk_nope_head_dim, heads=heads)
                _gemm(c, "mla_absorb_o", "bf16", b, heads * m.v_head_dim, rank, heads=heads)


def active_experts(tokens: int, num_experts: int, top_k: int) -> int:
    """Expected distinct experts hit when `tokens` tokens each pick `top_k` of `num_experts` uniformly, rounded
    (the simulator's formula), at least top_k and at most num_experts."""
    expected = num_experts * (1.0 - (1.0 - top_k / num_experts) ** tokens)
    return max(min(top_k, num_experts), min(num_experts, round(expected)))


def _moe(c: _Collector, m: ModelSpec, par: Parallel, tokens: int, dtypes: tuple[str, ...]) -> None:
    e = m.moe
    assert e is not None
    experts = _shard(m.source, e.num_experts, par.ep, "ffn.moe.num_experts")
    inter = _shard(m.source, e.expert_intermediate_size, par.moe_tp, "ffn.moe.expert_intermediate_size")
    routed = max(1, round(tokens * e.top_k / par.ep))  # rows this rank's experts receive
    active = min(experts, routed, active_experts(tokens, e.num_experts, e.top_k))
    gate = 2 if m.ffn_kind == "gated" else 1
    for dt in dtypes:
        fmt = ops.check_dtype(dt)
        for layer, n, k in (("expert_up", gate * inter, m.hidden_size), ("expert_down", m.hidden_size, inter)):
            c.add("moe_gemm", dt, layer, {"t": routed, "e": active, "n": n, "k": k},
                  ops.moe_gemm_work(routed, active, n, k, dt),
                  active * n * k * fmt["weight_bytes"] + routed * k * fmt["act_bytes"])


def _attention(c: _Collector, m: ModelSpec, par: Parallel, ops_wanted: set[str]) -> None:
    heads = m.num_heads // par.tp
    max_ctx = m.max_context_tokens
    if m.attention_kind == "gqa":
        kvh, dqk, dv = max(1, m.num_kv_heads // par.tp), m.head_dim, m.head_dim
    else:  # prefill runs non-absorbed: per-head K = [nope, rope], V = v_head_dim, every head its own K/V
        kvh, dqk, dv = heads, m.qk_nope_head_dim + m.qk_rope_head_dim, m.v_head_dim
    if "attn_prefill" in ops_wanted:
        for b, q, ctx in c.grid.prefill:
            if q + ctx > max_ctx:
                continue
            work = ops.attn_prefill_work(b * q * (q + 1) / 2, b * q * ctx, b * q, b * (ctx + q), heads, kvh,
                                         (dqk + dv) // 2, 2.0)
            c.add("attn_prefill", "bf16", "attention", {"b": b, "q": q, "c": ctx, "h": heads, "kvh": kvh,
                                                        "dqk": dqk, "dv": dv},
                  work, 2.0 * b * (ctx + q) * kvh * (dqk + dv))
    for b in c.grid.decode_batch:
        for ctx in c.grid.decode_context:
            if ctx > max_ctx:
                continue
            if m.attention_kind == "gqa" and "attn_decode" in ops_wanted:
                c.add("attn_decode", "bf16", "attention", {"b": b, "c": ctx, "h": heads, "kvh": kvh, "d": dqk},
                      ops.attn_decode_work(b, b * ctx, heads, kvh, dqk, 2.0), 2.0 * b * ctx * kvh * dqk * 2)
            if m.attention_kind == "mla" and "attn_mla_decode" in ops_wanted:
                r, rope = m.kv_lora_rank, m.qk_rope_head_dim
                c.add("attn_mla_decode", "bf16", "attention", {"b": b, "c": ctx, "h": heads, "r": r, "rope": rope},
                      ops.attn_mla_decode_work(b, b * ctx, heads, r, rope, 2.0), 2.0 * b * ctx * (r + rope))


def elementwise_dims(m: ModelSpec, par: Parallel, tokens: int) -> dict[str, int]:
    """One layer's elementwise passes as the simulator counts them: rows `t`, hidden `h` (two RMSNorms and two
    residual adds), `i` activation columns (SwiGLU over the MLP or the routed experts' rows) and `r` rotary columns."""
    inter = m.intermediate_size if m.moe is None else m.moe.expert_intermediate_size * m.moe.top_k
    return {"t": tokens, "h": m.hidden_size, "i": inter // par.tp, "r": m.num_heads * m.head_dim // par.tp}


def elementwise_elements(dims: dict[str, int]) -> int:
    """Elements the simulator's `elementwise_work` is priced on: t * (4h + 2i + r)."""
    return dims["t"] * (4 * dims["h"] + 2 * dims["i"] + dims["r"])


def _elementwise(c: _Collector, m: ModelSpec, par: Parallel) -> None:
    for t in c.grid.tokens:
        dims = elementwise_dims(m, par, t)
        work = ops.elementwise_work(elementwise_elements(dims))
        c.add("elementwise", "bf16", "layer_elementwise", dims, work, work[1])


def _collectives(c: _Collector, m: ModelSpec, par: Parallel, ops_wanted: set[str]) -> None:
    for t in c.grid.tokens:
        if par.tp > 1 and "allreduce" in ops_wanted:
            nbytes = t * m.hidden_size * 2
            c.add("allreduce", "bf16", "tp_allreduce", {"bytes": nbytes, "ranks": par.tp}, (0.0, float(nbytes)),
                  nbytes)
        if par.ep > 1 and m.moe is not None and "all_to_all" in ops_wanted:
            nbytes = t * m.moe.top_k * m.hidden_size * 2
            c.add("all_to_all", "bf16", "ep_dispatch", {"bytes": nbytes, "ranks": par.ep}, (0.0, float(nbytes)),
                  nbytes)


def model_shapes(model: ModelSpec, hw: HardwareSpec, grid: Grid, *, parallel: Parallel = Parallel(),
                 dtypes: tuple[str, ...] = ("bf16",), ops_wanted: tuple[str, ...] | None = None
                 ) -> tuple[list[OpShape], int]:
    """Every distinct op shape `model` needs on one device of `hw` over `grid`; also the count of points dropped
    by the grid's limits. `dtypes` are the weight formats of projection, MLP and expert GEMMs; attention,
    elementwise, router, absorbed-MLA and LM-head ops are bf16 (as the simulator prices them)."""
    wanted = set(ops.OPS if ops_wanted is None else ops_wanted)
    for dt in dtypes:
        ops.check_dtype(dt)
    c = _Collector(hw, grid)
    _gemm_family(c, model, parallel, tuple(dtypes), wanted)
    _attention(c, model, parallel, wanted)
    if "elementwise" in wanted:
        _elementwise(c, model, parallel)
    _collectives(c, model, parallel, wanted)
    return list(c.shapes.values()), c.dropped
