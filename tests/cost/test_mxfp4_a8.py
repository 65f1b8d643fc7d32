"""MXFP4 weights with MXFP8 activations (`mxfp4_a8`): the format, its import from AIConfigurator's
`w4a8_mxfp4_mxfp8` MoE tables, and a Blackwell gpt-oss pool priced from such a table (a tiny synthetic profile).
docs/cost-model.md, "Sliding-window layers, attention sinks and MXFP4"."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pytest

from calibrate import ops
from calibrate.aic.convert import _normalise
from calibrate.profile import load_profile, write_grid_profile
from inferplan.specs import load_hardware, load_model
from tests.cost.toys import decode, model

# gpt-oss-120b's expert block as the tables key it: hidden and expert width 2880, 128 experts, top-4.
HIDDEN, INTER, EXPERTS, TOPK = 2880, 2880, 128, 4
TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def _block_s(tokens: float) -> float:
    """A known law for the synthetic table: a kernel floor plus a per-token cost."""
    return 30e-6 + 0.2e-6 * tokens


def test_mxfp4_a8_is_4_25_bit_weights_8_25_bit_activations_at_the_fp8_peak():
    fmt = ops.DTYPES["mxfp4_a8"]
    assert fmt["weight_bytes"] * 8 == 4.25 and fmt["act_bytes"] * 8 == 8.25
    b200 = load_hardware("b200")
    assert b200.peak_for(fmt["compute"]) == b200.peak_flops_per_s["fp8"] == b200.peak_flops_per_s["fp4"] / 2
    # the same experts' bytes as mxfp4 (same checkpoint), half the activation bytes of its bf16 inputs
    assert fmt["weight_bytes"] == ops.DTYPES["mxfp4"]["weight_bytes"]
    flops, a8 = ops.moe_gemm_work(4096, 128, INTER, HIDDEN, "mxfp4_a8")
    _, a16 = ops.moe_gemm_work(4096, 128, INTER, HIDDEN, "mxfp4")
    assert a16 - a8 == pytest.approx(4096 * HIDDEN * (2.0 - 1.0 - 1.0 / 32))


def test_w4a8_mxfp4_mxfp8_moe_rows_import_as_mxfp4_a8():
    raw = pd.DataFrame([{"moe_dtype": dt, "num_tokens": 8, "hidden_size": HIDDEN, "inter_size": INTER, "topk": TOPK,
                         "num_experts": EXPERTS, "moe_tp_size": 1, "moe_ep_size": 1, "distribution": "balanced",
                         "kernel_source": "moe_torch_flow", "source_version": "1.3.0rc23", "latency": 0.05}
                        for dt in ("w4a8_mxfp4_mxfp8", "w4a16_mxfp4", "int8_wo")])
    skipped: Counter = Counter()
    rows = _normalise("moe", raw, skipped)
    assert list(rows["dtype"]) == ["mxfp4_a8", "mxfp4"]
    assert skipped == Counter({"format int8_wo": 1})


def _profile(tmp_path, dtype: str):
    """A B200 grid profile holding one MoE table: gpt-oss's expert block in `dtype`, at TP1 / EP1."""
    n = len(TOKENS)
    nan = np.full(n, np.nan)
    cols = {"family": ["moe"] * n, "op": ["moe_gemm"] * n, "dtype": [dtype] * n, "compute": [""] * n,
            "variant": ["balanced"] * n, "kernel": ["synthetic"] * n, "version": ["1.0"] * n,
            **{c: nan for c in ("m", "n", "k", "batch", "seq", "ctx", "heads", "kv_heads", "head_dim", "gpus",
                                "bytes")},
            "tokens": np.array(TOKENS, dtype=float), "hidden": np.full(n, HIDDEN, dtype=float),
            "inter": np.full(n, INTER, dtype=float), "topk": np.full(n, TOPK, dtype=float),
            "experts": np.full(n, EXPERTS, dtype=float), "tp": np.ones(n), "ep": np.ones(n),
            "latency_s": np.array([_block_s(t) for t in TOKENS])}
    hw = load_hardware("b200")
    meta = {"hardware": "b200", "device": "NVIDIA B200 (synthetic)", "date": "2026-01-01",
            "peaks": {"flops_per_s": hw.peak_flops_per_s, "mem_bytes_per_s": hw.mem_bandwidth_bytes_per_s,
                      "link_bytes_per_s": hw.intra_node_bandwidth_bytes_per_s},
            "provenance": {"moe": {"framework": "trtllm", "version": "1.0", "rows": n}}}
    return load_profile(write_grid_profile(tmp_path / f"{dtype}.parquet", cols, meta), expected_hardware="b200")


def test_a_b200_gpt_oss_pool_prices_its_mxfp4_a8_experts_from_the_table(tmp_path):
    """Decode of 8 sequences: each of the 36 layers' expert block is the table's latency at 8 tokens; the same pool
    asking for the weight-only kernel (mxfp4) finds no such table and falls back, priced otherwise."""
    m, b200 = load_model("gpt_oss_120b"), load_hardware("b200")
    profile = _profile(tmp_path, "mxfp4_a8")
    a8 = model(m, hw=b200, profile=profile, deployment={"weights": {"experts": "mxfp4_a8"}})
    d = a8.describe()
    assert "moe_gemm/mxfp4_a8" in d["measured_ops"]
    assert a8.step_cost(decode(8, 1000)).parts["moe_gemm"] == pytest.approx(36 * _block_s(8), rel=1e-5)
    w16 = model(m, hw=b200, profile=profile, deployment={"weights": {"experts": "mxfp4"}})
    assert "moe_gemm/mxfp4" in w16.describe()["fallback"]
    assert w16.step_cost(decode(8, 1000)).parts["moe_gemm"] != pytest.approx(36 * _block_s(8), rel=1e-3)
