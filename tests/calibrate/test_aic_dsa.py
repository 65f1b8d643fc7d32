"""A sparse-attention (DSA) model's attention module from AIConfigurator's tables: which rows are imported (the
models whose config facts we hold, another checkpoint of one of them, the path the engine runs at each prompt
length), the grid at measured points, and a GLM-5 layer priced from the shipped H200 SGLang profile: the module in
place of the projections, indexer and MLA kernel priced one by one. A small synthetic database for the import."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from calibrate.aic.convert import convert
from calibrate.aic.db import AicDb
from calibrate.aic.grid_model import GridModel
from calibrate.aic.lookup import GridLookup
from calibrate.import_aic import main
from calibrate.profile import load_profile
from tests.calibrate.test_import_aic import FLOOR_MS, _rows, _write, write_db

GLM, HEADS, BATCHES = "zai-org/GLM-5", (8, 16), (1, 4)


def _prefill_ms(b, s, h, dense):
    return FLOOR_MS + 0.4 + (1e-4 if dense else 6e-4) * b * s * (1 + h / 64)


def _decode_ms(b, ctx, h):
    return FLOOR_MS + 0.05 + 1e-6 * b * ctx * (1 + h / 64)


def write_dsa_db(root: Path) -> Path:
    """`write_db`'s database plus SGLang 0.5.14 DSA module tables: GLM-5 (bf16 projections) and its FP8 checkpoint
    (fp8_block), the dense-MHA path (Hopper's and Blackwell's kernel names) at prompts up to 2,048 tokens and the
    indexer path at every length, and DeepSeek-V3.2 rows (no config facts here)."""
    systems = write_db(root)
    folder = systems / "data" / "h100_sxm" / "sparse_attention" / "sglang" / "0.5.14"
    ctx, gen = [], []
    for model, gemm in ((GLM, "bfloat16"), ("zai-org/GLM-5-FP8", "fp8_block"), ("deepseek-ai/DeepSeek-V3.2",
                                                                                  "fp8_block")):
        dense_kernel = "sglang_dsa_dense_mha_fa3" if gemm == "bfloat16" else "sglang_dsa_dense_mha_trtllm_ragged"
        for kernel, seqs in ((dense_kernel, (16, 256, 2048)),
                             ("sglang_dsa_indexer_flashmla_sparse", (16, 256, 2048, 8192))):
            dense = "dense" in kernel
            ctx += [dict(model=model, kernel_source=kernel, mla_dtype="bfloat16", kv_cache_dtype="bfloat16",
                         gemm_type=gemm, num_heads=h, batch_size=b, isl=s, tp_size=1, step=0,
                         latency=_prefill_ms(b, s, h, dense)) for h in HEADS for b in BATCHES for s in seqs]
        gen += [dict(model=model, kernel_source="sglang_dsa_indexer_fa3", mla_dtype="bfloat16",
                     kv_cache_dtype="bfloat16", gemm_type=gemm, num_heads=h, batch_size=b, isl=1, tp_size=1,
                     step=c, latency=_decode_ms(b, c, h)) for h in HEADS for b in BATCHES for c in (1, 1024, 8192)]

    def table(op, rows):
        df = pd.DataFrame(rows)
        kernels = df.pop("kernel_source")
        return _rows("SGLang", "0.5.14", op, "", df.to_dict("records")).assign(kernel_source=kernels.to_numpy())

    _write(folder, "dsa_context_module_perf", table("dsa_context_module", ctx), "sglang", "0.5.14")
    table("dsa_generation_module", gen).to_parquet(folder / "dsa_generation_module_perf.parquet", index=False)
    return systems


@pytest.fixture(scope="module")
def db_root(tmp_path_factory) -> Path:
    return write_dsa_db(tmp_path_factory.mktemp("aic_dsa"))


def test_dsa_rows_known_models_checkpoints_and_the_engines_path(db_root):
    cols, prov = convert(AicDb(db_root), "h100_sxm", "sglang")
    pre = cols["family"] == "dsa_prefill"
    assert set(cols["variant"][pre]) == {GLM}  # the FP8 checkpoint is GLM-5 in fp8_block; DeepSeek-V3.2 left out
    assert set(cols["compute"][pre]) == {"bf16", "fp8_block"} and set(cols["op"][pre]) == {"dsa_module_prefill"}
    for seq, kernels in ((2048, {"sglang_dsa_dense_mha_fa3", "sglang_dsa_dense_mha_trtllm_ragged"}),
                         (8192, {"sglang_dsa_indexer_flashmla_sparse"})):
        at = pre & (cols["seq"] == seq)
        assert set(cols["kernel"][at]) == kernels
        i = np.flatnonzero(at & (cols["batch"] == 4) & (cols["heads"] == 16))[0]
        assert cols["latency_s"][i] == pytest.approx(_prefill_ms(4, seq, 16, seq <= 2048) * 1e-3)
    skipped = prov["families"]["dsa_prefill"]["skipped"]
    assert skipped["sparse path at a prompt length the engine runs dense"] == 2 * len(HEADS) * len(BATCHES) * 3
    assert any("DeepSeek-V3.2" in k for k in skipped)
    dec = cols["family"] == "dsa_decode"
    assert sorted(set(cols["ctx"][dec])) == [1, 1024, 8192] and set(cols["variant"][dec]) == {GLM}


def test_dsa_grid_and_lookup_are_the_table_at_measured_points(db_root, tmp_path):
    out = tmp_path / "h100_sxm.parquet"
    assert main([str(db_root), "--hardware", "h100_sxm", "--engine", "sglang", "--out", str(out)]) == 0
    grid: GridModel = load_profile(out, expected_hardware="h100_sxm").grid
    cols, _ = convert(AicDb(db_root), "h100_sxm", "sglang")
    lookup = GridLookup(grid)
    for i in np.flatnonzero(np.isin(cols["family"], ["dsa_prefill", "dsa_decode"])):
        length = {"seq": cols["seq"][i]} if cols["family"][i] == "dsa_prefill" else {"ctx": cols["ctx"][i]}
        shape = dict(batch=cols["batch"][i], heads=cols["heads"][i], variant=GLM, dtype=cols["dtype"][i],
                     compute=cols["compute"][i], **length)
        want = float(np.float32(cols["latency_s"][i]))
        assert grid.latency_s(cols["op"][i], **shape) == pytest.approx(want, rel=1e-6)
        assert lookup.latency_s(cols["op"][i], **shape) == pytest.approx(want, rel=1e-6)
    assert not grid.covers("dsa_module_prefill", dtype="bf16", compute="bf16", variant="deepseek-ai/DeepSeek-V3.2")
    # between measured prompt lengths: between their times
    lo, mid, hi = (grid.latency_s("dsa_module_prefill", batch=1, seq=s, heads=8, variant=GLM, compute="bf16")
                   for s in (2048, 4096, 8192))
    assert lo < mid < hi


def test_glm5_layer_prices_the_measured_module_in_place_of_its_ops():
    """The shipped H200 SGLang profile holds GLM-5's module (SGLang 0.5.14): a GLM-5-FP8 row's attention is the
    module, TP 8 = 8 heads per device, times the 78 layers; no attention op falls back to the roofline."""
    from sim.compose import compose_config
    from sim.config import load_run_config
    from sim.core.cost.base import BatchShape, one_prompt
    from sim.core.pricing import pool_steps
    from sim.validate.silicon.simulate_row import overrides
    from sim.validate.silicon.support import plan_row
    from tests.validate.test_silicon_metrics import ROW

    row = dataclasses.replace(ROW, model_path="zhipuai/GLM-5", engine="sglang", engine_version="glm5-hopper",
                              system="h200_sxm", moe_quant_mode="fp8_block", tp=8, moe_tp=8)
    plan = plan_row(row)
    cost = pool_steps(load_run_config(compose_config(overrides(plan))), "main")._cost
    assert cost.layers.dsa == (GLM, "bf16", "fp8_block")
    grid = cost.pricer.grid
    layers = 78
    prefill = cost.step_cost(one_prompt(8192))
    module = grid.latency_s("dsa_module_prefill", batch=1, seq=8192, heads=8, variant=GLM, dtype="bf16",
                            compute="fp8_block")
    assert prefill.parts["attention"] == pytest.approx(layers * module, rel=1e-6)
    decode = cost.step_cost(BatchShape(0, 0, 0, 0, 0, 16, 16 * 2049, 16))
    module = grid.latency_s("dsa_module_decode", batch=16, ctx=2049, heads=8, variant=GLM, dtype="bf16",
                            compute="fp8_block")
    assert decode.parts["attention"] == pytest.approx(layers * module, rel=1e-6)
    assert ("dsa_module_prefill", "bf16") in cost.pricer.measured
    assert not any(k.startswith(("attn_prefill", "attn_mla")) for k in cost.pricer.fallback)
