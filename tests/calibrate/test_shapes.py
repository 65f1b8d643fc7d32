"""Which ops and shapes a model needs: the layer walk mirrors the simulator's pricing, per device under TP/EP."""
from __future__ import annotations

import pytest

from calibrate import ops
from calibrate.shapes import (GRIDS, LOG_TOKENS, SCHEDULER_BATCHES, Parallel, active_experts, elementwise_dims,
                              elementwise_elements, grid_for, model_shapes, parse_shape)
from inferplan.errors import InputError
from inferplan.specs import load_hardware, load_model


@pytest.fixture(scope="module")
def h200():
    return load_hardware("h200")


def by_layer(shapes, layer):
    return [s for s in shapes if layer in s.layers]


def test_token_grid_is_log_spaced_and_holds_scheduler_batches():
    assert LOG_TOKENS[0] == 1 and LOG_TOKENS[-1] == 16384
    ratios = [b / a for a, b in zip(LOG_TOKENS, LOG_TOKENS[1:])]
    assert all(1.3 <= q <= 2.0 for q in ratios)
    assert set(SCHEDULER_BATCHES) <= set(GRIDS["full"].tokens)


def test_llama_projections_mlp_and_attention(h200):
    shapes, dropped = model_shapes(load_model("llama3_8b"), h200, GRIDS["full"], dtypes=("bf16", "fp8_block"))
    assert dropped == 0
    qkv = by_layer(shapes, "qkv_proj")
    assert {s.dim("m") for s in qkv} == set(GRIDS["full"].tokens)
    assert {(s.dim("n"), s.dim("k")) for s in qkv} == {(6144, 4096)}  # (32 + 2*8) heads x 128
    up = by_layer(shapes, "mlp_up")[0]
    assert (up.dim("n"), up.dim("k")) == (2 * 14336, 4096)
    s = next(s for s in qkv if s.dim("m") == 64 and s.dtype == "fp8_block")
    assert (s.flops, s.bytes) == ops.gemm_work(64, 6144, 4096, "fp8_block")
    decode = [s for s in shapes if s.op == "attn_decode"]
    assert decode and all(s.dim("c") <= 8192 for s in decode)  # max_context_tokens
    assert all(s.dim("kvh") == 8 and s.dim("d") == 128 for s in decode)
    assert not [s for s in shapes if s.op in ("moe_gemm", "attn_mla_decode", "allreduce")]
    assert len({s.key for s in shapes}) == len(shapes)


def test_deepseek_moe_routing_and_mla(h200):
    shapes, _ = model_shapes(load_model("deepseek_v3"), h200, GRIDS["full"], dtypes=("fp8_block",))
    moe = [s for s in shapes if s.op == "moe_gemm" and "expert_up" in s.layers]
    one = next(s for s in moe if s.dim("t") == 8)            # 1 token x top-8
    assert one.dim("e") == 8 and (one.dim("n"), one.dim("k")) == (2 * 2048, 7168)
    big = next(s for s in moe if s.dim("t") == 16384 * 8)
    assert big.dim("e") == 256
    assert active_experts(64, 256, 8) == round(256 * (1 - (1 - 8 / 256) ** 64))
    assert {s.dim("r") for s in shapes if s.op == "attn_mla_decode"} == {512}
    kv_b = by_layer(shapes, "kv_b_proj")[0]
    assert (kv_b.dim("n"), kv_b.dim("k")) == (128 * 256, 512)
    absorb = by_layer(shapes, "mla_absorb_q")[0]
    assert absorb.dtype == "bf16" and absorb.dim("heads") == 128
    prefill = [s for s in shapes if s.op == "attn_prefill"][0]
    assert (prefill.dim("dqk"), prefill.dim("dv"), prefill.dim("kvh")) == (192, 128, 128)
    assert by_layer(shapes, "mlp_up") and by_layer(shapes, "shared_expert_up") and by_layer(shapes, "router")


def test_tensor_parallel_shards_and_adds_collectives(h200):
    model = load_model("llama3_8b")
    shapes, _ = model_shapes(model, h200, GRIDS["tiny"], parallel=Parallel(tp=2))
    assert {(s.dim("n"), s.dim("k")) for s in by_layer(shapes, "qkv_proj")} == {((16 + 2 * 4) * 128, 4096)}
    ar = [s for s in shapes if s.op == "allreduce"]
    assert {s.dim("ranks") for s in ar} == {2} and {s.dim("bytes") for s in ar} == {t * 4096 * 2 for t in
                                                                                      GRIDS["tiny"].tokens}
    with pytest.raises(InputError, match="not divisible by the parallel degree 3"):
        model_shapes(model, h200, GRIDS["tiny"], parallel=Parallel(tp=3))


def test_elementwise_bundle_matches_the_simulator_formula(h200):
    model = load_model("deepseek_v3")
    dims = elementwise_dims(model, Parallel(), 10)
    assert elementwise_elements(dims) == 10 * (4 * 7168 + 2 * 2048 * 8 + 128 * 192)
    shapes, _ = model_shapes(model, h200, GRIDS["tiny"], ops_wanted=("elementwise",))
    s = next(s for s in shapes if s.dim("t") == 16)
    assert (s.flops, s.bytes) == ops.elementwise_work(elementwise_elements(parse_shape(s.shape)))


def test_grid_limits_drop_points_too_big_for_a_cpu():
    cpu = load_hardware("cpu_local")
    shapes, dropped = model_shapes(load_model("llama3_8b"), cpu, grid_for("auto", cpu))
    assert dropped > 0 and shapes
    assert all(ops.roofline_s(s.flops, s.bytes, cpu.peak_for("bf16"), cpu.mem_bandwidth_bytes_per_s) <= 0.02
               for s in shapes if s.dtype == "bf16")
    with pytest.raises(InputError, match="unknown grid 'huge'"):
        grid_for("huge", cpu)


def test_expert_shapes_follow_the_simulators_moe_tp_x_ep_split():
    """EP 2 inside TP 4: each device holds half of each of its group's experts (the simulator's moe_tp = tp / ep);
    EP = TP: whole experts; no EP: every expert split over TP (the down projection's k: the expert's columns)."""
    model = load_model("gpt_oss_120b")
    inter = model.moe.expert_intermediate_size
    def down_k(par):
        shapes, _ = model_shapes(model, load_hardware("h200"), GRIDS["tiny"], parallel=par)
        return {dict(s.dims)["k"] for s in shapes if s.op == "moe_gemm" and "expert_down" in s.layers}
    assert down_k(Parallel(tp=4, ep=2)) == {inter // 2}
    assert down_k(Parallel(tp=4, ep=4)) == {inter}
    assert down_k(Parallel(tp=4)) == {inter // 4}
