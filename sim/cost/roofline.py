"""Iteration cost composed layer by layer from priced ops (dense GQA or MLA attention; MLP or MoE).

For each iteration: the projections and MLP as GEMMs over all new tokens, attention split into prefill and
decode parts, elementwise passes, tensor-parallel all-reduces, the LM head over the sampled rows, and a fixed
per-iteration host overhead (scheduling, sampling, launches). Each op is priced by `OpPricer`; the parts are
summed into the named buckets of `sim.cost.base.PARTS`.
"""
from __future__ import annotations

import numpy as np

from calibrate import ops
from inferplan.specs import HardwareSpec, ModelSpec
from sim.cost.base import PARTS, BatchShape, StepCost
from sim.cost.pricer import OpPricer


class LayeredCostModel:
    """Prices an iteration of one instance of `model` on `tp` devices of `hw`.

    `weights_dtype` applies to projection/MLP/expert GEMMs; attention reads KV in `kv_dtype`; activations and
    elementwise ops are bf16. `link_efficiency` scales the datasheet link bandwidth for collectives.
    """

    def __init__(self, model: ModelSpec, hw: HardwareSpec, pricer: OpPricer, *, tp: int = 1,
                 weights_dtype: str = "bf16", kv_dtype: str = "bf16", step_overhead_s: float = 0.0,
                 link_efficiency: float = 1.0) -> None:
        if tp < 1:
            raise ValueError("tp must be >= 1")
        self.m, self.hw, self.pricer, self.tp = model, hw, pricer, tp
        self.wd, self.kvd = weights_dtype, kv_dtype
        self.kv_elem_bytes = 1.0 if kv_dtype in ("fp8", "fp8_block") else ops.check_dtype(kv_dtype)["act_bytes"]
        self.step_overhead_s = float(step_overhead_s)
        intra = tp <= hw.devices_per_node
        self.link_bytes_per_s = (hw.intra_node_bandwidth_bytes_per_s if intra else hw.inter_node_bandwidth_bytes_per_s) * link_efficiency
        self.link_latency_s = hw.intra_node_latency_s if intra else hw.inter_node_latency_s
        self._cache: dict[BatchShape, StepCost] = {}

    @property
    def kind(self) -> str:
        return self.pricer.kind

    def describe(self) -> dict:
        p = self.pricer
        return {"kind": p.kind, "profile": None if p.profile is None else p.profile.path,
                "hardware": self.hw.name,
                "measured_ops": sorted(f"{o}/{d}" for o, d in p.measured),
                "analytical_ops": sorted(f"{o}/{d}" for o, d in p.analytical)}

    # -- op helpers -------------------------------------------------------------------------------------------
    def _gemm(self, m_tokens: float, n: float, k: float, dtype: str | None = None) -> float:
        if m_tokens <= 0:
            return 0.0
        dtype = dtype or self.wd
        return self.pricer.time_s("gemm", dtype, *ops.gemm_work(m_tokens, n, k, dtype))

    def _allreduce(self, tokens: float) -> float:
        if self.tp <= 1 or tokens <= 0:
            return 0.0
        scale = self.pricer.efficiency_scale.get("allreduce", 1.0)
        return ops.allreduce_s(tokens * self.m.hidden_size * 2.0, self.tp, self.link_bytes_per_s * scale,
                               self.link_latency_s)

    # -- per-layer parts --------------------------------------------------------------------------------------
    def _attention_layer(self, b: BatchShape) -> tuple[float, float]:
        """(projection GEMM seconds, attention kernel seconds) of one layer."""
        m, tp, T = self.m, self.tp, b.num_tokens
        h = m.num_heads / tp
        attn = 0.0
        if m.attention_kind == "gqa":
            kv = max(1.0, m.num_kv_heads / tp)
            d = m.head_dim
            proj = self._gemm(T, (h + 2 * kv) * d, m.hidden_size) + self._gemm(T, m.hidden_size, h * d)
            if b.prefill_tokens:
                attn += self.pricer.time_s("attn_prefill", "bf16", *ops.attn_prefill_work(
                    b.prefill_q_sq_sum, b.prefill_q_ctx_sum, b.prefill_tokens, b.prefill_kv_tokens,
                    int(round(h)), int(round(kv)), d, self.kv_elem_bytes))
            if b.decode_seqs:
                attn += self._decode_attention(b.decode_seqs, b.decode_ctx_sum)
            return proj, attn
        # MLA: low-rank Q and KV projections; prefill up-projects the latent cache (non-absorbed), decode
        # absorbs the up-projections into the query and output (two per-head batched GEMMs).
        rank, rope, nope, v = m.kv_lora_rank, m.qk_rope_head_dim, m.qk_nope_head_dim, m.v_head_dim
        q_proj = (self._gemm(T, m.q_lora_rank, m.hidden_size) + self._gemm(T, h * (nope + rope), m.q_lora_rank)
                  if m.q_lora_rank else self._gemm(T, h * (nope + rope), m.hidden_size))
        proj = q_proj + self._gemm(T, rank + rope, m.hidden_size) + self._gemm(T, m.hidden_size, h * v)
        if b.prefill_tokens:
            proj += self._gemm(b.prefill_kv_tokens, h * (nope + v), rank)
            attn += self.pricer.time_s("attn_prefill", "bf16", *ops.attn_prefill_work(
                b.prefill_q_sq_sum, b.prefill_q_ctx_sum, b.prefill_tokens, b.prefill_kv_tokens,
                int(round(h)), int(round(h)), (nope + rope + v) // 2, 2.0))
        if b.decode_seqs:
            proj += self._gemm(b.decode_seqs, h * rank, nope, "bf16") + self._gemm(b.decode_seqs, h * v, rank, "bf16")
            attn += self._decode_attention(b.decode_seqs, b.decode_ctx_sum)
        return proj, attn

    def _decode_attention(self, seqs: int, ctx_sum, vectorized: bool = False):
        """One layer's decode attention for `seqs` sequences with `ctx_sum` cached tokens in all (scalar, or an
        array of context sums priced elementwise with the same arithmetic)."""
        m, tp = self.m, self.tp
        h = int(round(m.num_heads / tp))
        price = self.pricer.time_s_array if vectorized else self.pricer.time_s
        if m.attention_kind == "gqa":
            kv = int(round(max(1.0, m.num_kv_heads / tp)))
            return price("attn_decode", self.kvd if self.kvd != "fp8_block" else "fp8",
                         *ops.attn_decode_work(seqs, ctx_sum, h, kv, m.head_dim, self.kv_elem_bytes))
        return price("attn_mla_decode", "bf16", *ops.attn_mla_decode_work(
            seqs, ctx_sum, h, m.kv_lora_rank, m.qk_rope_head_dim, self.kv_elem_bytes))

    def _ffn_layer(self, T: float, moe: bool) -> tuple[float, float]:
        """(dense GEMM seconds, MoE GEMM seconds) of one layer's feed-forward block."""
        m, tp = self.m, self.tp
        gate = 2 if m.ffn_kind == "gated" else 1
        if not moe:
            inter = m.intermediate_size / tp
            return self._gemm(T, gate * inter, m.hidden_size) + self._gemm(T, m.hidden_size, inter), 0.0
        e = m.moe
        inter = e.expert_intermediate_size / tp
        dense = self._gemm(T, e.num_experts, m.hidden_size, "bf16")  # router
        if e.shared_experts:
            si = inter * e.shared_experts
            dense += self._gemm(T, gate * si, m.hidden_size) + self._gemm(T, m.hidden_size, si)
        routed = T * e.top_k
        # Expected number of distinct experts hit by T tokens choosing top_k of E uniformly.
        active = e.num_experts * (1.0 - (1.0 - e.top_k / e.num_experts) ** T)
        moe_s = (self.pricer.time_s("moe_gemm", self.wd, *ops.moe_gemm_work(routed, active, gate * inter, m.hidden_size, self.wd))
                 + self.pricer.time_s("moe_gemm", self.wd, *ops.moe_gemm_work(routed, active, m.hidden_size, inter, self.wd)))
        return dense, moe_s

    def _elementwise_layer(self, T: float) -> float:
        m, tp = self.m, self.tp
        inter = (m.intermediate_size if m.moe is None else m.moe.expert_intermediate_size * m.moe.top_k) / tp
        elements = T * (4 * m.hidden_size + 2 * inter + m.num_heads * m.head_dim / tp)
        return self.pricer.time_s("elementwise", "bf16", *ops.elementwise_work(elements))

    # -- the iteration ----------------------------------------------------------------------------------------
    def decode_run(self, b: BatchShape, steps: int) -> tuple[np.ndarray, dict[str, np.ndarray | float]]:
        """Step times of `steps` consecutive decode-only iterations of the same sequences, the first of shape
        `b`, each later one with every context one token longer; and the parts per step (arrays or constants).
        Element j equals `step_cost(shape_j).total_s` (same operations in the same order)."""
        first = self.step_cost(b)
        ctx = b.decode_ctx_sum + b.decode_seqs * np.arange(steps, dtype=np.float64)
        attention = self._decode_attention(b.decode_seqs, ctx, vectorized=True) * self.m.num_layers
        parts: dict[str, np.ndarray | float] = dict(first.parts)
        parts["attention"] = attention
        total = attention
        for name in PARTS[1:]:
            total = total + parts[name]
        return total, parts

    def step_cost(self, b: BatchShape) -> StepCost:
        cached = self._cache.get(b)
        if cached is not None:
            return cached
        m, T = self.m, b.num_tokens
        parts = dict.fromkeys(PARTS, 0.0)
        proj, attn = self._attention_layer(b)
        elem = self._elementwise_layer(T)
        comm = 2 * self._allreduce(T)
        dense_layers = m.num_layers - m.num_moe_layers
        ffn_dense, _ = self._ffn_layer(T, moe=False)
        parts["attention"] = attn * m.num_layers
        parts["dense_gemm"] = proj * m.num_layers + ffn_dense * dense_layers
        if m.num_moe_layers:
            moe_dense, moe_s = self._ffn_layer(T, moe=True)
            parts["dense_gemm"] += moe_dense * m.num_moe_layers
            parts["moe_gemm"] = moe_s * m.num_moe_layers
        parts["elementwise"] = elem * m.num_layers
        parts["communication"] = comm * m.num_layers
        parts["dense_gemm"] += self._gemm(b.sampled_seqs, m.vocab_size / self.tp, m.hidden_size, "bf16")
        parts["overhead"] = self.step_overhead_s
        cost = StepCost(total_s=sum(parts.values()), parts=parts)
        if len(self._cache) < 200_000:
            self._cache[b] = cost
        return cost
