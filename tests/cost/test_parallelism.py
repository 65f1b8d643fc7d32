"""TP, DP attention, EP all-to-all, imbalance, two-micro-batch overlap and pipeline stages, against hand arithmetic."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from inferplan.specs import MoESpec
from sim.core.cost.experts import placement_imbalance
from tests.cost.toys import EFF, GQA, INTER_BW, INTRA_BW, MOE, TOY_HW, decode, gemm, model, prefill, roof

OVERHEAD = 1e-3
H = 1024
EP_MOE = dataclasses.replace(MOE, moe=MoESpec(num_experts=16, top_k=4, expert_intermediate_size=512))


def test_doubling_tp_halves_compute_bound_gemms_and_adds_the_allreduce():
    T = 8192
    one, two = (model(GQA, tp=tp).step_cost(prefill(1, T)) for tp in (1, 2))
    lm1, lm2 = gemm(1, 1000, H), gemm(1, 500, H)  # the one sampled row's LM head is memory-bound
    assert two.parts["dense_gemm"] - lm2 == pytest.approx((one.parts["dense_gemm"] - lm1) / 2, rel=1e-12)
    # Two ring all-reduces of T x H bf16 per layer: 2 (p-1)/p of the buffer over NVLink plus 2 (p-1) hops.
    allreduce = 2 * (2 - 1) / 2 * T * H * 2 / INTRA_BW + 2 * (2 - 1) * 1e-6
    assert one.parts["communication"] == 0.0
    assert two.parts["communication"] == pytest.approx(2 * allreduce, rel=1e-12)


def test_tp_beyond_a_node_uses_the_network():
    T = 64
    cost = model(dataclasses.replace(GQA, num_heads=16, num_kv_heads=16), tp=16).step_cost(prefill(1, T))
    allreduce = 2 * 15 / 16 * T * H * 2 / INTER_BW + 2 * 15 * 5e-6
    assert cost.parts["communication"] == pytest.approx(2 * allreduce, rel=1e-12)


def test_dp_attention_prices_the_busiest_rank():
    dp4 = model(GQA, deployment={"dp": 4})
    one = model(GQA)
    # 8 decodes over 4 ranks: 2 each, like one rank with 2; 5 decodes: the busiest rank has 2 (of mean context).
    assert dp4.step_cost(decode(8, 300)).total_s == pytest.approx(one.step_cost(decode(2, 300)).total_s, rel=1e-12)
    assert dp4.step_cost(decode(5, 300)).total_s == pytest.approx(one.step_cost(decode(2, 300)).total_s, rel=1e-12)
    # One long prompt cannot be split over ranks: DP does not help it.
    assert dp4.step_cost(prefill(1, 2000)).total_s == pytest.approx(one.step_cost(prefill(1, 2000)).total_s, rel=1e-12)


def _ep_model(dp: int, **options):
    dep = {"dp": dp, "ep": dp, "experts": {"statistical_imbalance": False}}
    for key, value in options.items():
        dep.setdefault(key, {}).update(value) if isinstance(value, dict) else dep.update({key: value})
    return model(EP_MOE, deployment=dep)


def test_ep_all_to_all_over_two_nodes_by_hand():
    # 64 decodes on 16 ranks: 4 tokens per rank send 16 rows; each device's expert receives 64 x 4 / 16 = 16 rows.
    row = H * 2
    flat = max(16 * (1 - 8 / 16) * row / INTER_BW, 16 * 7 / 16 * row / INTRA_BW) + 5e-6
    cost = _ep_model(16).step_cost(decode(64, 100))
    assert cost.parts["communication"] == pytest.approx(2 * flat, rel=1e-12)  # dispatch + combine, bf16
    # DeepEP-style dedup: a token crosses to the other node once if any of its 4 experts is there (1 - 0.5^4).
    dedup = max(4 * (1 - 0.5 ** 4) * row / INTER_BW, 16 * 7 / 8 * row / INTRA_BW) + 5e-6
    cost = _ep_model(16, communication={"node_dedup": True}).step_cost(decode(64, 100))
    assert cost.parts["communication"] == pytest.approx(2 * dedup, rel=1e-12)
    # With a fast network the NVLink forwarding inside the node binds: all rows but the device's own eighth.
    fast_net = dataclasses.replace(TOY_HW, inter_node_bandwidth_bytes_per_s=1e11)
    dep = {"dp": 16, "ep": 16, "experts": {"statistical_imbalance": False}, "communication": {"node_dedup": True}}
    cost = model(EP_MOE, hw=fast_net, deployment=dep).step_cost(decode(64, 100))
    assert cost.parts["communication"] == pytest.approx(2 * (16 * 7 / 8 * row / INTRA_BW + 5e-6), rel=1e-12)
    # FP8 dispatch (1 + 4/128 bytes per value) and bf16 combine.
    fp8 = max(8 * H * (1 + 4 / 128) / INTER_BW, 7 * H * (1 + 4 / 128) / INTRA_BW) + 5e-6
    cost = _ep_model(16, communication={"dispatch_dtype": "fp8_block"}).step_cost(decode(64, 100))
    assert cost.parts["communication"] == pytest.approx(fp8 + flat, rel=1e-12)


def test_ep_inside_a_node_uses_nvlink_only():
    cost = _ep_model(8).step_cost(decode(32, 100))  # 4 tokens per rank, 16 rows each way
    assert cost.parts["communication"] == pytest.approx(2 * (7 / 8 * 16 * H * 2 / INTRA_BW + 1e-6), rel=1e-12)


def test_ep_over_the_tp_group_moves_no_tokens():
    """One DP rank (ep = tp): every device already holds every token after the attention all-reduce, so the layer
    pays the TP model's two all-reduces and no dispatch or combine; the experts' rows stay those of EP."""
    dep = {"ep": 8, "experts": {"statistical_imbalance": False}}
    ep = model(EP_MOE, tp=8, deployment=dep).step_cost(decode(32, 100))
    tp = model(EP_MOE, tp=8).step_cost(decode(32, 100))
    assert ep.parts["communication"] == pytest.approx(tp.parts["communication"], rel=1e-12)
    assert ep.parts["communication"] > 0.0
    # The same 8 ranks as DP attention ranks move each token's rows to its experts' devices and back.
    dp = _ep_model(8).step_cost(decode(32, 100))
    assert dp.parts["communication"] == pytest.approx(2 * (7 / 8 * 16 * H * 2 / INTRA_BW + 1e-6), rel=1e-12)


def test_a_moe_tp_ep_mix_splits_each_expert_over_its_group():
    """TP 8 with the experts EP 4 x TP 2 (TensorRT-LLM's moe_ep_size 4, moe_tp_size 2): each EP group of 2 devices
    holds 16 / 4 experts, each device half of every one; a decode step of 32 tokens sends each group 32 x 4 / 4 =
    32 rows on the 256 columns of a half expert, summed by the TP all-reduce the layer already pays (no dispatch)."""
    dep = {"ep": 4, "experts": {"statistical_imbalance": False}}
    mix = model(EP_MOE, tp=8, deployment=dep)
    cost = mix.step_cost(decode(32, 100))
    rows, inter = 32.0, 256
    active = min(rows, 4 * (1 - (1 - 4 / 16) ** 32))   # 4 expert slots per group, hit by 32 tokens x top-4 of 16
    routed = (roof(2 * rows * 2 * inter * H, active * 2 * inter * H * 2 + rows * (H * 2 + 2 * inter * 2),
                   EFF["moe_gemm"])
              + roof(2 * rows * H * inter, active * H * inter * 2 + rows * (inter * 2 + H * 2), EFF["moe_gemm"]))
    assert cost.parts["moe_gemm"] == pytest.approx(routed * EP_MOE.num_moe_layers, rel=1e-12)
    tp = model(EP_MOE, tp=8).step_cost(decode(32, 100))
    assert cost.parts["communication"] == pytest.approx(tp.parts["communication"], rel=1e-12)
    # Memory: a device holds half of each of 4 experts, against a whole expert under EP 8 and 1/8 of 16 under TP.
    per_device = {ep: model(EP_MOE, tp=8, deployment={"ep": ep}).lay.expert_share_per_device * 16 for ep in (1, 4, 8)}
    assert per_device == {1: 2.0, 4: 2.0, 8: 2.0}
    assert mix.lay.moe_tp == 2 and model(EP_MOE, tp=8, deployment={"ep": 8}).lay.moe_tp == 1


def test_imbalance_sets_the_busiest_expert_rank():
    def routed(rows: float) -> float:
        active = min(rows, 1.0 - (1 - 4 / 16) ** 64)  # one expert slot per device, hit by 64 tokens x top-4 of 16
        return (roof(2 * rows * 1024 * H, active * 1024 * H * 2 + rows * (H * 2 + 1024 * 2), EFF["moe_gemm"])
                + roof(2 * rows * H * 512, active * H * 512 * 2 + rows * (512 * 2 + H * 2), EFF["moe_gemm"]))
    assert _ep_model(16).step_cost(decode(64, 100)).parts["moe_gemm"] == pytest.approx(routed(16), rel=1e-12)
    skewed = _ep_model(16, experts={"imbalance": 1.5}).step_cost(decode(64, 100))
    assert skewed.parts["moe_gemm"] == pytest.approx(routed(24), rel=1e-12)
    row = H * 2
    assert skewed.parts["communication"] == pytest.approx(
        2 * (max(24 * 0.5 * row / INTER_BW, 24 * 7 / 16 * row / INTRA_BW) + 5e-6), rel=1e-12)
    # Random routing alone: the busiest of 16 ranks with a Poisson mean of 16 rows.
    stat = model(EP_MOE, deployment={"dp": 16, "ep": 16}).step_cost(decode(64, 100))
    assert stat.parts["moe_gemm"] == pytest.approx(routed(16 * (1 + math.sqrt(2 * math.log(16) / 16))), rel=1e-12)


def test_redundant_experts_split_the_hot_expert():
    # Loads [5, 1, 1, 1] on 2 ranks of 2 slots: {5, 1} and {1, 1} -> busiest 6 of mean 4.
    assert placement_imbalance(np.array([5.0, 1, 1, 1]), 2, 0) == pytest.approx(1.5)
    # Two replicas go to the hot expert (5/2 = 2.5 still the largest per replica, then 5/3): pieces 5/3 x 3 and
    # 1 x 3 packed heaviest first on 2 ranks of 3 slots: {5/3, 5/3, 1} and {5/3, 1, 1} -> busiest 13/3 of 4.
    assert placement_imbalance(np.array([5.0, 1, 1, 1]), 2, 2) == pytest.approx(13 / 12)
    # Heaviest first onto the least loaded rank: {4, 2} and {3, 3} balance exactly.
    assert placement_imbalance(np.array([4.0, 3, 3, 2]), 2, 0) == pytest.approx(1.0)


def test_two_micro_batch_overlap_hides_communication():
    """Per layer max(2c, 2x) instead of c + x for micro-batches of half the batch, plus one fill min(c, x)."""
    half = _ep_model(16).step_cost(decode(16, 100))  # 1 token per rank: one micro-batch of the overlapped batch
    both = _ep_model(16, communication={"overlap": "two_micro_batches"}).step_cost(decode(32, 100))
    lm = gemm(1, 1000, H)
    c = sum(half.parts[p] for p in ("attention", "dense_gemm", "moe_gemm", "elementwise")) - lm
    x = half.parts["communication"]
    for part in ("attention", "dense_gemm", "moe_gemm", "elementwise"):
        assert both.parts[part] == pytest.approx(2 * half.parts[part], rel=1e-12)
    assert both.parts["communication"] == pytest.approx(max(2 * c, 2 * x) - 2 * c + min(c, x), rel=1e-12)
    assert both.hidden_s == pytest.approx(max(0.0, 2 * x - both.parts["communication"]), rel=1e-12)
    assert both.hidden_s > 0
    assert sum(both.parts.values()) == pytest.approx(both.total_s, rel=1e-15)


def test_pipeline_stages_micro_batches_and_bubble():
    two_layers = dataclasses.replace(GQA, num_layers=2)
    q = 100
    one_stage = model(GQA).step_cost(prefill(1, q))  # one layer + LM head: the last stage's slot
    send = 1e-6 + q * H * 2 / INTRA_BW
    slot = one_stage.total_s - OVERHEAD + send
    pp = model(two_layers, deployment={"pp": 2}).step_cost(prefill(2, q))
    assert pp.total_s == pytest.approx(2 * slot + OVERHEAD, rel=1e-12)
    bubble = model(two_layers, deployment={"pp": 2, "pp_bubble": True}).step_cost(prefill(2, q))
    assert bubble.total_s == pytest.approx(3 * slot + OVERHEAD, rel=1e-12)
    assert bubble.parts["communication"] == pytest.approx(3 * send, rel=1e-12)


def test_pipeline_memory_per_stage():
    from sim.core.cost.deployment import parse_deployment
    from sim.core.cost.layout import build_layout
    from sim.core.cost.memory import plan_memory
    m = dataclasses.replace(GQA, num_layers=4)
    dep = parse_deployment({"pp": 2}, tp=1, weights_dtype="bf16", where="t")
    plan = plan_memory(m, TOY_HW, dep, build_layout(m, dep, "t"), kv_dtype="bf16", block_size_tokens=16,
                       gpu_memory_utilization=0.9, token_budget=512, fixed_reserve_bytes=0.0)
    first, last = plan.per_device
    assert "embedding" in first.weight_bytes and "lm_head" not in first.weight_bytes
    assert "lm_head" in last.weight_bytes and "embedding" not in last.weight_bytes
    per_layer_kv = 2 * 2 * 128 * 2
    assert first.kv_bytes_per_token == last.kv_bytes_per_token == 2 * per_layer_kv
    assert plan.kv_bytes_per_token == 4 * per_layer_kv and plan.devices == 2
    blocks = min(int(d.free_bytes // (2 * per_layer_kv * 16)) for d in plan.per_device)
    assert plan.num_blocks == blocks
