"""A routed-expert block split by TP where the MoE table measured EP splits only (TensorRT-LLM's MXFP4 block on
Hopper) is priced as the measured EP block over the same GPUs; a table that measured the TP split prices it
itself. The database's own TP-versus-EP
measurements back the rule (`calibrate.aic.moe_splits`). docs/cost-model.md, "A TP split the MoE tables lack".
Every price here is the measured balanced block less what the same table says the experts that random routing
leaves unloaded took (`_saved_s`, computed by hand: docs/cost-model.md, "Balanced tables, random routing")."""
from __future__ import annotations

import numpy as np
import pytest

from calibrate.aic.moe_splits import summary, tp_over_ep, PROFILES
from calibrate.profile import load_profile, write_grid_profile
from calibrate.ops import check_dtype
from inferplan.specs import load_hardware, load_model
from tests.cost.toys import decode, model

HIDDEN, INTER, EXPERTS, TOPK = 2880, 2880, 128, 4   # gpt-oss-120b's expert block
TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
LAWS = {(1, 1): (100e-6, 0.5e-6), (1, 8): (70e-6, 0.1e-6), (8, 1): (40e-6, 0.1e-6)}  # (tp, ep) -> floor, per token


EXPERT_BYTES = 3 * HIDDEN * INTER * check_dtype("mxfp4")["weight_bytes"]  # gate, up and down of one expert
H200_BW = load_hardware("h200").mem_bandwidth_bytes_per_s


def _block_s(tp: int, ep: int, tokens: float, laws: dict = LAWS) -> float:
    """The synthetic table's block: `floor + per_token x tokens` at its measured token counts (TOKENS), and between
    two of them as the grid reads it (log latency linear in log tokens)."""
    floor, per_token = laws[(tp, ep)]
    at = lambda t: floor + per_token * t  # noqa: E731
    if tokens in TOKENS or not TOKENS[0] < tokens < TOKENS[-1]:
        return at(tokens)
    hi = next(t for t in TOKENS if t > tokens)
    lo = TOKENS[TOKENS.index(hi) - 1]
    w = np.log(tokens / lo) / np.log(hi / lo)
    return float(np.exp((1 - w) * np.log(at(lo)) + w * np.log(at(hi))))


def _hit_bytes(table_tp: int, table_ep: int, tokens: float, pool_tp: int, pool_ep: int) -> tuple[float, float]:
    """(the weight bytes the balanced table's rank loaded: min(E, tokens x k) / table_ep distinct experts, 1/table_tp
    of each; the bytes the pool's device loads under random routing: E (1 - (1 - k/E)^tokens) shares of 1/pool_tp
    (no EP), or, under EP, slots (1 - (1 - 1/slots)^rows) whole experts of its slots = E / ep with
    rows = tokens x k / ep)."""
    measured = min(EXPERTS, tokens * TOPK) / table_ep * EXPERT_BYTES / table_tp
    if pool_ep > 1:
        slots = EXPERTS / pool_ep
        hit = slots * (1 - (1 - 1 / slots) ** (tokens * TOPK / pool_ep)) * EXPERT_BYTES
    else:
        hit = EXPERTS * (1 - (1 - TOPK / EXPERTS) ** tokens) * EXPERT_BYTES / pool_tp
    return measured, hit


def _saved_s(table_tp: int, table_ep: int, tokens: float, pool_tp: int, pool_ep: int, laws: dict = LAWS) -> float:
    """The table's block at min(tokens, E / k) less its block at the token count whose distinct experts carry the
    hit bytes."""
    measured, hit = _hit_bytes(table_tp, table_ep, tokens, pool_tp, pool_ep)
    if hit >= measured:
        return 0.0
    all_hit = min(tokens, EXPERTS / TOPK)
    t_eq = min(all_hit, min(EXPERTS, tokens * TOPK) / TOPK * hit / measured)
    return max(0.0, _block_s(table_tp, table_ep, all_hit, laws) - _block_s(table_tp, table_ep, t_eq, laws))


def _priced_s(table_tp: int, table_ep: int, tokens: float, pool_tp: int, pool_ep: int = 1, laws: dict = LAWS) -> float:
    """The measured block less the saving, never below the loaded experts' bytes at the HBM bandwidth nor above the
    block."""
    block = _block_s(table_tp, table_ep, tokens, laws)
    loaded = _hit_bytes(table_tp, table_ep, tokens, pool_tp, pool_ep)[1] / H200_BW
    return min(block, max(block - _saved_s(table_tp, table_ep, tokens, pool_tp, pool_ep, laws), loaded))


def _profile(tmp_path, splits: list[tuple[int, int]], laws: dict = LAWS):
    """An H200 grid profile holding gpt-oss's MXFP4 expert block at the (tp, ep) splits named."""
    rows = [(tp, ep, t) for tp, ep in splits for t in TOKENS]
    n = len(rows)
    nan = np.full(n, np.nan)
    col = lambda v: np.full(n, v, dtype=float)  # noqa: E731
    cols = {"family": ["moe"] * n, "op": ["moe_gemm"] * n, "dtype": ["mxfp4"] * n, "compute": [""] * n,
            "variant": ["balanced"] * n, "kernel": ["synthetic"] * n, "version": ["1.0"] * n,
            **{c: nan for c in ("m", "n", "k", "batch", "seq", "ctx", "heads", "kv_heads", "head_dim", "gpus",
                                "bytes")},
            "tokens": np.array([t for _, _, t in rows], dtype=float), "hidden": col(HIDDEN), "inter": col(INTER),
            "topk": col(TOPK), "experts": col(EXPERTS), "tp": np.array([tp for tp, _, _ in rows], dtype=float),
            "ep": np.array([ep for _, ep, _ in rows], dtype=float),
            "latency_s": np.array([_block_s(tp, ep, t, laws) for tp, ep, t in rows])}
    hw = load_hardware("h200")
    meta = {"hardware": "h200", "device": "NVIDIA H200 (synthetic)", "date": "2026-01-01",
            "peaks": {"flops_per_s": hw.peak_flops_per_s, "mem_bytes_per_s": hw.mem_bandwidth_bytes_per_s,
                      "link_bytes_per_s": hw.intra_node_bandwidth_bytes_per_s},
            "provenance": {"moe": {"framework": "trtllm", "version": "1.0", "rows": n}}}
    name = "_".join(f"tp{tp}ep{ep}" for tp, ep in splits)
    return load_profile(write_grid_profile(tmp_path / f"{name}.parquet", cols, meta), expected_hardware="h200")


def _pool(profile, tp: int, ep: int = 1, **experts):
    return model(load_model("gpt_oss_120b"), hw=load_hardware("h200"), tp=tp, profile=profile,
                 deployment={"ep": ep, "weights": {"experts": "mxfp4"}, **({"experts": experts} if experts else {})})


def test_an_ep_block_is_asked_for_the_tokens_its_whole_group_routes(tmp_path):
    """The tables' tokens are the EP group's (each rank computes tokens x top-k / ep rows): a TP 8 EP 8 decode of 8
    sequences, perfectly balanced, is the EP 8 block at 8 tokens; with the statistical busiest-rank fluctuation of
    random routing the busiest rank's rows make it more."""
    profile = _profile(tmp_path, [(1, 1), (1, 8)])
    flat = _pool(profile, tp=8, ep=8, statistical_imbalance=False)
    assert flat.step_cost(decode(8, 1000)).parts["moe_gemm"] == pytest.approx(36 * _priced_s(1, 8, 8, 8, 8),
                                                                             rel=1e-5)
    # random routing: the busiest of 8 ranks gets 4 (1 + sqrt(2 ln 8 / 4)) rows, asked as 2x that many group tokens;
    # of its 16 experts it hits 16 (1 - (15/16)^rows), the table's rank hit min(16, rows)
    rows = 4 * (1 + np.sqrt(2 * np.log(8) / 4))
    tokens = rows * 8 / TOPK
    hit = 16 * (1 - (15 / 16) ** rows)
    t_eq = tokens * hit / min(16.0, rows)  # the table's rank loads min(16, rows) experts at `tokens`
    block = _block_s(1, 8, tokens)
    saved = block - _block_s(1, 8, t_eq)
    random = _pool(profile, tp=8, ep=8)
    assert random.step_cost(decode(8, 1000)).parts["moe_gemm"] == pytest.approx(
        36 * max(block - saved, hit * EXPERT_BYTES / H200_BW), rel=1e-5)


def test_a_tp_split_the_table_lacks_is_priced_as_its_ep_split(tmp_path):
    profile = _profile(tmp_path, [(1, 1), (1, 8)])
    tp8 = _pool(profile, tp=8)
    # every one of the 36 layers' expert blocks: the measured EP 8 block at the rank's 8 tokens
    assert tp8.step_cost(decode(8, 1000)).parts["moe_gemm"] == pytest.approx(36 * _priced_s(1, 8, 8, 8), rel=1e-5)
    assert "EP 8" in tp8.describe()["experts"]["moe_tp_split"]
    # the EP 8 pool itself prices the same table (its tokens per rank) and says nothing about a TP split
    ep8 = _pool(profile, tp=8, ep=8)
    assert "moe_tp_split" not in ep8.describe()["experts"]


def test_a_measured_tp_split_is_priced_from_its_own_rows(tmp_path):
    profile = _profile(tmp_path, [(1, 1), (1, 8), (8, 1)])
    tp8 = _pool(profile, tp=8)
    assert tp8.step_cost(decode(8, 1000)).parts["moe_gemm"] == pytest.approx(36 * _priced_s(8, 1, 8, 8), rel=1e-5)
    assert "moe_tp_split" not in tp8.describe()["experts"]


def test_tp1_pools_are_untouched(tmp_path):
    profile = _profile(tmp_path, [(1, 1), (1, 8)])
    tp1 = _pool(profile, tp=1)
    assert tp1.step_cost(decode(8, 1000)).parts["moe_gemm"] == pytest.approx(36 * _priced_s(1, 1, 8, 1), rel=1e-5)


def test_random_routing_leaves_the_weights_of_the_experts_it_misses_unloaded(tmp_path):
    """At 32 tokens the balanced table's TP 1 block hit all 128 experts once; random routing hits
    128 (1 - (1 - 4/128)^32) = 81.6 of them, what the same table's block at 81.6 / 4 = 20.4 tokens loaded: the
    price is that block (the table's own time per expert, not an assumed bandwidth). Prefill-sized batches hit every
    expert either way: the measured block as it is."""
    laws = {(1, 1): (60e-6, 10e-6), (1, 8): (70e-6, 1e-6)}  # weight-bound up to 32 tokens, as the tables are
    tp1 = _pool(_profile(tmp_path, [(1, 1), (1, 8)], laws), tp=1)
    hit = EXPERTS * (1 - (1 - TOPK / EXPERTS) ** 32)
    assert hit == pytest.approx(81.6, abs=0.1)
    per_layer = tp1.step_cost(decode(32, 1000)).parts["moe_gemm"] / 36
    assert per_layer == pytest.approx(_block_s(1, 1, hit / TOPK, laws), rel=1e-5)
    assert per_layer == pytest.approx(60e-6 + 10e-6 * hit / TOPK, rel=0.02)  # (the grid's reading between 16, 32)
    assert per_layer < 0.75 * _block_s(1, 1, 32, laws)
    big = tp1.step_cost(decode(1024, 1000)).parts["moe_gemm"] / 36
    assert big == pytest.approx(_block_s(1, 1, 1024, laws), rel=1e-5)
    # a measured block faster than its own weights' bytes allow is never priced up
    fast = _pool(_profile(tmp_path, [(1, 1), (1, 8)]), tp=1).step_cost(decode(32, 1000)).parts["moe_gemm"] / 36
    assert fast == pytest.approx(_block_s(1, 1, 32), rel=1e-5)


def test_the_shipped_tables_measure_tp_and_ep_splits_alike():
    """Where the shipped profiles measured a block both ways, the TP g block's latency over the EP g block's has a
    median near 1 at g = 2-8 in every token range (what the rule above rests on)."""
    ratios = tp_over_ep(sorted(PROFILES.glob("*/*.parquet")))
    assert len(ratios) > 10_000
    s = summary(ratios[ratios.g.isin([2, 4, 8])])
    assert s["median"].between(0.8, 1.1).all(), s
