"""Toy hardware, models and pricers with round numbers, so that expected times can be written out by hand."""
from __future__ import annotations

from inferplan.specs import HardwareSpec, ModelSpec, MoESpec
from sim.core.cost.base import BatchShape
from sim.core.cost.deployment import parse_deployment
from sim.core.cost.pricer import OpPricer
from sim.core.cost.roofline import LayeredCostModel

PEAK_BF16, PEAK_FP8, BW = 1e12, 2e12, 1e11  # FLOP/s, FLOP/s, bytes/s
INTRA_BW, INTER_BW, HOST_BW = 1e10, 1e9, 5e8
# Efficiencies chosen distinct, so that a part priced under the wrong op shows up.
EFF = {"gemm": 0.5, "moe_gemm": 0.25, "attn_prefill": 0.4, "attn_decode": 0.8, "attn_mla_decode": 0.6,
       "elementwise": 1.0}

TOY_HW = HardwareSpec(
    name="toy", kind="gpu", memory_bytes=10e9, mem_bandwidth_bytes_per_s=BW,
    peak_flops_per_s={"bf16": PEAK_BF16, "fp8": PEAK_FP8, "int8": PEAK_FP8, "fp32": PEAK_BF16 / 4},
    devices_per_node=8, intra_node_bandwidth_bytes_per_s=INTRA_BW, intra_node_latency_s=1e-6,
    inter_node_bandwidth_bytes_per_s=INTER_BW, inter_node_latency_s=5e-6, host_link_bandwidth_bytes_per_s=HOST_BW,
    power_w=100, idle_power_w=10, usd_per_hour=1.0)

GQA = ModelSpec(name="toy_gqa", num_layers=1, hidden_size=1024, vocab_size=1000, attention_kind="gqa", num_heads=8,
                num_kv_heads=2, head_dim=128, intermediate_size=4096)
MLA = ModelSpec(name="toy_mla", num_layers=1, hidden_size=1024, vocab_size=1000, attention_kind="mla", num_heads=8,
                num_kv_heads=1, head_dim=96, intermediate_size=2048, q_lora_rank=256, kv_lora_rank=128,
                qk_nope_head_dim=64, qk_rope_head_dim=32, v_head_dim=64)
MOE = ModelSpec(name="toy_moe", num_layers=1, hidden_size=1024, vocab_size=1000, attention_kind="gqa", num_heads=8,
                num_kv_heads=2, head_dim=128, intermediate_size=4096,
                moe=MoESpec(num_experts=4, top_k=2, expert_intermediate_size=512, shared_experts=1))


def pricer(eff: dict | None = None, launch_s: float = 0.0, profile=None) -> OpPricer:
    return OpPricer(TOY_HW, eff or EFF, launch_s, profile)


def model(m: ModelSpec = GQA, *, tp: int = 1, weights_dtype: str = "bf16", kv_dtype: str = "bf16",
          step_overhead_s: float = 1e-3, deployment: dict | None = None, hw: HardwareSpec = TOY_HW,
          eff: dict | None = None, launch_s: float = 0.0, profile=None) -> LayeredCostModel:
    dep = parse_deployment(deployment, tp=tp, weights_dtype=weights_dtype, where="test pool")
    return LayeredCostModel(m, hw, OpPricer(hw, eff or EFF, launch_s, profile), tp=tp, weights_dtype=weights_dtype,
                            kv_dtype=kv_dtype, step_overhead_s=step_overhead_s, link_efficiency=1.0, deployment=dep)


def roof(flops: float, bytes_: float, eff: float, peak: float = PEAK_BF16) -> float:
    """Hand pricing with no launch overhead: the roofline over the toy peaks, divided by the efficiency."""
    return max(flops / peak, bytes_ / BW) / eff


def gemm(m: float, n: float, k: float, wb: float = 2.0, ab: float = 2.0, peak: float = PEAK_BF16) -> float:
    """C[m,n] = A[m,k] W[k,n]: weights once, activations in, bf16 out."""
    return roof(2 * m * n * k, n * k * wb + m * k * ab + m * n * 2, EFF["gemm"], peak)


def prefill(n_seqs: int, q: int, c: int = 0) -> BatchShape:
    """`n_seqs` prefill chunks of q new tokens after c cached tokens, each sampling (the last chunk)."""
    return BatchShape(prefill_seqs=n_seqs, prefill_tokens=n_seqs * q, prefill_q_ctx_sum=n_seqs * q * c,
                      prefill_q_sq_sum=n_seqs * q * (q + 1) // 2, prefill_kv_tokens=n_seqs * (c + q),
                      sampled_seqs=n_seqs)


def decode(n_seqs: int, ctx_each: int) -> BatchShape:
    """`n_seqs` decodes whose contexts (before the step) are `ctx_each` tokens."""
    return BatchShape(decode_seqs=n_seqs, decode_ctx_sum=n_seqs * (ctx_each + 1), sampled_seqs=n_seqs)
