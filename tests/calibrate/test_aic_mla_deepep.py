"""MLA attention (and decode's absorbed products) and DeepEP dispatch / combine from AIConfigurator's tables: conversion (names, units, which rows
are kept and why), the grid at measured points (the model and the simulator's lookup), and whether a family the
profile lacks is in the database at all. A small synthetic database with the real layout and columns."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from calibrate.aic.convert import convert
from calibrate.aic.crossval import cross_validate
from calibrate.aic.db import AicDb
from calibrate.aic.grid import MLA_PREFILL_DIM
from calibrate.aic.lookup import GridLookup
from calibrate.import_aic import main, peaks_of
from calibrate.profile import load_profile
from inferplan.paths import shared_root
from tests.calibrate.test_import_aic import BW, DEVICE, FLOOR_MS, FLOPS, _rows, _write, write_db

HEADS, BATCHES = (16, 32, 128), (1, 4, 16)
SEQS = (16, 256, 4096)


def _mla_prefill_ms(b, s, h):
    return FLOOR_MS + 4.0 * h * MLA_PREFILL_DIM * b * s * (s + 1) / 2 / (0.5 * FLOPS) * 1e3


def _mla_decode_ms(b, ctx, h):
    return FLOOR_MS + (b * ctx * 576 * 2.0 + b * h * 1152 * 2.0) / (0.6 * BW) * 1e3


def _deepep_us(tokens, nodes, phase, ll=False):
    width = 1.0 if phase == "dispatch" else 2.0
    rate = 150e9 if nodes == 1 else 40e9
    return (8.0 if ll else 25.0) + tokens * 8 * 7168 * width / rate * 1e6


def write_mla_deepep_db(root: Path) -> Path:
    """`write_db`'s database plus vLLM MLA attention-core tables, SGLang DeepEP tables of two versions (the newer
    one node, the older 2-4 nodes and a node-1 row the newer one re-measured), SM counts beside the default, and a
    row collected on another GPU."""
    systems = write_db(root)
    data = systems / "data" / "h100_sxm"
    ctx = [{"mla_dtype": "bfloat16", "kv_cache_dtype": kv, "num_heads": h, "batch_size": b, "isl": s, "tp_size": 1,
            "step": 0, "latency": _mla_prefill_ms(b, s, h)} for kv in ("bfloat16", "fp8") for h in HEADS
           for b in BATCHES for s in SEQS]
    gen = [{"mla_dtype": "bfloat16", "kv_cache_dtype": "bfloat16", "num_heads": h, "batch_size": b, "isl": 1,
            "tp_size": 1, "step": s - 1, "latency": _mla_decode_ms(b, s, h)} for h in HEADS for b in BATCHES
           for s in SEQS]
    mla = data / "mla" / "vllm" / "0.24.0"
    _write(mla, "context_mla_perf", _rows("VLLM", "0.24.0", "mla_context", "FLASHMLA", ctx), "vllm", "0.24.0")
    _rows("VLLM", "0.24.0", "mla_generation", "FLASHMLA", gen).to_parquet(mla / "generation_mla_perf.parquet")
    bmm = pd.concat([_rows("VLLM", "0.24.0", op, "vllm_torch_bmm",
                           [{"bmm_dtype": "bfloat16", "num_tokens": t, "num_heads": h,
                             "latency": FLOOR_MS + h * 2.0 * t * 512 * 128 / (0.3 * FLOPS) * 1e3}
                            for t in (1, 8, 64, 512, 4096) for h in HEADS]) for op in ("mla_gen_pre", "mla_gen_post")])
    _write(data / "mla_bmm" / "vllm" / "0.24.0", "mla_bmm_perf", bmm, "vllm", "0.24.0")

    def normal(nodes, sms, tokens, scale=1.0):
        return {"node_num": nodes, "hidden_size": 7168, "num_token": tokens, "num_topk": 8, "num_experts": 256,
                "dispatch_sms": sms, "combine_sms": sms, "dispatch_notify_us": 0.0, "combine_notify_us": 0.0,
                "dispatch_transmit_us": _deepep_us(tokens, nodes, "dispatch") * scale,
                "combine_transmit_us": _deepep_us(tokens, nodes, "combine") * scale}

    def ll(nodes, tokens):
        return {"node_num": nodes, "hidden_size": 7168, "num_token": tokens, "num_topk": 8, "num_experts": 256,
                "dispatch_avg_t_us": _deepep_us(tokens, nodes, "dispatch", True),
                "combine_avg_t_us": _deepep_us(tokens, nodes, "combine", True)}

    tokens = (1, 16, 256, 4096)
    new = [normal(1, sms, t) for sms in (4, 20) for t in tokens]
    old = [normal(n, 20, t) for n in (2, 4) for t in tokens] + [normal(1, 20, 16, scale=3.0)]
    comm_new, comm_old = data / "comm" / "sglang" / "0.5.12", data / "comm" / "sglang" / "0.5.6.post2"
    _write(comm_new, "wideep_deepep_normal_perf", _rows("sglang", "0.5.12", "normal", "deepep", new), "wideep_sglang",
           "0.5.12")
    _rows("sglang", "0.5.12", "ll", "deepep", [ll(1, t) for t in tokens]).to_parquet(
        comm_new / "wideep_deepep_ll_perf.parquet")
    old_rows = _rows("sglang", "0.5.0", "normal", "deepep", old)
    other = _rows("sglang", "0.5.0", "normal", "deepep", [normal(8, 20, 16)]).assign(device="NVIDIA H200")
    _write(comm_old, "wideep_deepep_normal_perf", pd.concat([old_rows, other], ignore_index=True), "wideep_sglang",
           "0.5.6.post2")
    _rows("sglang", "0.5.0", "ll", "deepep", [ll(n, t) for n in (2, 4) for t in tokens]).to_parquet(
        comm_old / "wideep_deepep_ll_perf.parquet")
    return systems


@pytest.fixture(scope="module")
def db_root(tmp_path_factory) -> Path:
    return write_mla_deepep_db(tmp_path_factory.mktemp("aic_mla"))


@pytest.fixture(scope="module")
def grid(db_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("out") / "h100_sxm.parquet"
    assert main([str(db_root), "--hardware", "h100_sxm", "--out", str(out)]) == 0
    return load_profile(out, expected_hardware="h100_sxm").grid


def test_mla_rows_keep_heads_per_device_and_decode_contexts(db_root):
    cols, prov = convert(AicDb(db_root), "h100_sxm")
    pre, dec = cols["family"] == "mla_prefill", cols["family"] == "mla_decode"
    assert set(cols["op"][pre]) == {"attn_mla_prefill"} and set(cols["op"][dec]) == {"attn_mla_decode"}
    assert set(cols["dtype"][pre]) == {"bf16", "fp8"} and set(cols["compute"][pre]) == {"bf16"}
    assert set(cols["heads"][pre]) == set(map(float, HEADS)) and set(cols["seq"][pre]) == set(map(float, SEQS))
    assert set(cols["ctx"][dec]) == set(map(float, SEQS))  # isl + step
    p = prov["families"]["mla_prefill"]
    assert (p["framework"], p["version"], p["rows"], p["kernels"]) == \
        ("vllm", "0.24.0", 2 * 27, {"bf16": {"FLASHMLA": 27}, "fp8": {"FLASHMLA": 27}})
    bmm = cols["family"] == "mla_bmm"
    assert dict(zip(*np.unique(cols["op"][bmm].astype(str), return_counts=True))) == \
        {"mla_bmm_post": 15, "mla_bmm_pre": 15}
    assert set(cols["heads"][bmm]) == set(map(float, HEADS)) and set(cols["dtype"][bmm]) == {"bf16"}


def test_deepep_rows_phases_units_sms_nodes_and_versions(db_root):
    cols, prov = convert(AicDb(db_root), "h100_sxm")
    normal = cols["family"] == "deepep_normal"
    assert dict(zip(*np.unique(cols["op"][normal].astype(str), return_counts=True))) == \
        {"deepep_combine": 12, "deepep_dispatch": 12}  # 4 token counts x 1, 2, 4 nodes
    dispatch = normal & (cols["op"] == "deepep_dispatch")
    assert set(cols["dtype"][dispatch]) == {"fp8_block"} and set(cols["gpus"][normal]) == {8.0, 16.0, 32.0}
    one = np.flatnonzero(dispatch & (cols["gpus"] == 8.0) & (cols["tokens"] == 16))[0]
    assert cols["latency_s"][one] == pytest.approx(_deepep_us(16, 1, "dispatch") * 1e-6)  # the newer version's
    p = prov["families"]["deepep_normal"]
    assert p["framework"] == "sglang" and p["version"] == "0.5.12"
    assert p["measured_versions"] == {"0.5.12": 8, "0.5.6.post2": 16}
    assert p["skipped"] == {"SM count other than DeepEP's default 20": 4,
                            "measured on another GPU: NVIDIA H200": 1,
                            "donor row at a shape measured by the version itself": 2}
    assert p["device"] == [DEVICE]
    ll = cols["family"] == "deepep_ll"
    assert set(cols["gpus"][ll]) == {8.0, 16.0, 32.0} and ll.sum() == 2 * 12


def test_grid_and_lookup_are_the_table_at_measured_points(db_root, grid):
    cols, _ = convert(AicDb(db_root), "h100_sxm")
    lookup = GridLookup(grid)
    for i in np.flatnonzero(np.isin(cols["family"], ["mla_prefill", "mla_decode", "mla_bmm", "deepep_normal",
                                                     "deepep_ll"])):
        f, want = cols["family"][i], float(np.float32(cols["latency_s"][i]))
        if f == "mla_prefill":
            shape = dict(batch=cols["batch"][i], seq=cols["seq"][i], heads=cols["heads"][i], dtype=cols["dtype"][i])
        elif f == "mla_decode":
            shape = dict(batch=cols["batch"][i], ctx=cols["ctx"][i], heads=cols["heads"][i], dtype=cols["dtype"][i])
        elif f == "mla_bmm":
            shape = dict(tokens=cols["tokens"][i], heads=cols["heads"][i], dtype=cols["dtype"][i])
        else:
            shape = dict(tokens=cols["tokens"][i], hidden=7168, topk=8, experts=256, gpus=cols["gpus"][i],
                         kernel="normal" if f == "deepep_normal" else "low_latency", dtype=cols["dtype"][i])
        op = cols["op"][i]
        assert grid.latency_s(op, **shape) == pytest.approx(want, rel=1e-6), (op, shape)
        assert lookup.latency_s(op, **shape) == pytest.approx(want, rel=1e-6), (op, shape)
    # between measured token counts: between their times; EP ranks as measured
    lo, hi, mid = (grid.latency_s("deepep_dispatch", tokens=t, hidden=7168, topk=8, experts=256, gpus=16)
                   for t in (16, 256, 64))
    assert lo < mid < hi
    assert GridLookup(grid).gpu_counts("deepep_dispatch", kernel="normal", dtype="fp8_block") == [8, 16, 32]
    with pytest.raises(KeyError, match="DeepEP kernel"):
        grid.latency_s("deepep_combine", tokens=1, hidden=7168, topk=8, experts=256, gpus=8, kernel="x")


def test_a_family_the_profile_lacks_says_whether_the_database_has_it(db_root, tmp_path):
    _, prov = convert(AicDb(db_root), "h100_sxm", "sglang")  # MLA measured in vLLM only
    assert prov["families"]["mla_prefill"]["in_database"] is True
    assert "deepep_normal" in prov["families"] and "missing" not in prov["families"]["deepep_normal"]
    _, bare = convert(AicDb(write_db(tmp_path)), "h100_sxm")  # no MLA, no DeepEP table at all
    for family in ("mla_prefill", "mla_decode", "mla_bmm", "deepep_normal", "deepep_ll"):
        assert bare["families"][family]["in_database"] is False


REAL = shared_root() / "aic-perf-db" / "systems"


@pytest.mark.shared_trace
@pytest.mark.skipif(not REAL.is_dir(), reason=f"{REAL} is absent (set INFERPLAN_SHARED_ROOT or add ../shared)")
def test_real_h200_deepep_formats_nodes_and_held_out_error():
    """The real H200 tables: DeepEP's low-latency bandwidth columns say what each phase moved (combine BF16: tokens x
    top-k x hidden x 2 bytes; dispatch FP8 with block scales and a small header), the normal kernels reach 8 nodes
    (EP 64), and MLA and DeepEP meet their held-out targets."""
    ll = pd.read_parquet(REAL / "data" / "h200_sxm" / "comm" / "sglang" / "0.5.12" / "wideep_deepep_ll_perf.parquet")
    copies = ll["num_token"] * ll["num_topk"] * ll["hidden_size"]
    combine = ll["combine_avg_t_us"] * 1e-6 * ll["combine_bandwidth_gbps"] * 1e9 / copies
    dispatch = ll["dispatch_avg_t_us"] * 1e-6 * ll["dispatch_bandwidth_gbps"] * 1e9 / copies
    assert np.median(combine) == pytest.approx(2.0, rel=0.01)
    assert np.median(dispatch) == pytest.approx(1.0 + 4.0 / 128, rel=0.02)
    cols, prov = convert(AicDb(REAL), "h200")
    normal = cols["family"] == "deepep_normal"
    assert set(cols["gpus"][normal]) == {8.0, 16.0, 32.0, 64.0}
    assert prov["families"]["deepep_normal"]["device"] == ["NVIDIA H200"]
    peaks, _ = peaks_of("h200")
    for family, target in (("mla_prefill", 0.05), ("mla_decode", 0.05), ("deepep_normal", 0.10), ("deepep_ll", 0.10)):
        rows = cols["family"] == family
        err = cross_validate(family, {k: v[rows] for k, v in cols.items()}, peaks)
        assert np.median(np.abs(err)) < target, family
