"""A query/key norm over all heads of a layer (MiniMax-M2's `qk_norm_type: per_layer`) costs one all-reduce of each
token's two fp32 partial sums per layer under TP, priced like any other all-reduce; per-head norms cost none."""
from __future__ import annotations

import dataclasses

import pytest

from calibrate import ops
from inferplan.errors import InputError
from inferplan.specs import load_model
from tests.cost.toys import GQA, INTRA_BW, TOY_HW, decode, model

ACROSS = dataclasses.replace(GQA, qk_norm_across_heads=True)


def comm_s(m, tp: int, shape) -> float:
    return model(m, tp=tp).step_cost(shape).parts["communication"]


def test_across_heads_norm_adds_one_small_allreduce_per_layer_under_tp():
    shape = decode(16, 100)
    extra = comm_s(ACROSS, 4, shape) - comm_s(GQA, 4, shape)
    assert extra == pytest.approx(ops.allreduce_s(16 * 2 * 4.0, 4, INTRA_BW, TOY_HW.intra_node_latency_s))
    assert extra > 0
    assert comm_s(ACROSS, 1, shape) == comm_s(GQA, 1, shape) == 0.0   # one rank holds every head


def test_minimax_m2_5_yaml_and_config_json_say_across_heads(tmp_path):
    assert load_model("minimax_m2_5").qk_norm_across_heads
    assert not load_model("qwen3_32b").qk_norm_across_heads
    cfg = tmp_path / "config.json"
    cfg.write_text('{"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,'
                   ' "head_dim": 16, "intermediate_size": 128, "vocab_size": 100, "use_qk_norm": true,'
                   ' "qk_norm_type": "per_layer"}')
    assert load_model(str(cfg)).qk_norm_across_heads


def test_an_unknown_qk_norm_names_the_field(tmp_path):
    y = tmp_path / "m.yaml"
    y.write_text("name: m\nnum_layers: 1\nhidden_size: 64\nvocab_size: 10\nattention: {kind: gqa, num_heads: 4, "
                 "num_kv_heads: 2, head_dim: 16, qk_norm: global}\nffn: {intermediate_size: 128}\n")
    with pytest.raises(InputError, match="attention.qk_norm"):
        load_model(str(y))
