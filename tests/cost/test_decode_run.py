"""A run of decode steps priced at once equals step_cost of each step exactly, for every deployment option, and
every iteration's parts sum to its total."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from calibrate.profile import EfficiencyCurve, Profile
from inferplan.specs import MoESpec
from sim.core.cost.base import PARTS
from tests.cost.toys import GQA, MLA, MOE, decode, model, prefill

EP_MOE = dataclasses.replace(MOE, moe=MoESpec(num_experts=16, top_k=4, expert_intermediate_size=512,
                                              shared_experts=1), mtp_modules=1)
MLA_MTP = dataclasses.replace(MLA, num_layers=3, mtp_modules=1)
EP = {"dp": 16, "ep": 16}


def _profile() -> Profile:
    """Multi-knot measured curves (efficiency varying with size), so that the interpolation path is exercised."""
    knots = (1e-7, 1e-5, 1e-3)
    curve = EfficiencyCurve(knots, (0.2, 0.55, 0.8), 3e-6)
    ops = [("gemm", "bf16"), ("attn_decode", "bf16"), ("attn_decode", "fp8"), ("attn_mla_decode", "bf16"),
           ("moe_gemm", "bf16"), ("elementwise", "bf16"), ("attn_decode", "fp8_block")]
    return Profile("measured.parquet", "toy", {"bf16": 1e12, "fp8": 2e12}, 1e11, {k: curve for k in ops})


CASES = {
    "gqa": dict(m=GQA),
    "tp2_fp8_kv": dict(m=GQA, tp=2, kv_dtype="fp8"),
    "dp3_odd": dict(m=GQA, deployment={"dp": 3}),
    "int4_ffn": dict(m=GQA, deployment={"weights": {"ffn": "int4_wo", "attention": "int8"}}),
    "pp2_bubble": dict(m=dataclasses.replace(GQA, num_layers=3), deployment={"pp": 2, "pp_bubble": True}),
    "pp3_micro4": dict(m=dataclasses.replace(GQA, num_layers=5), deployment={"pp": 3, "pp_micro_batches": 4}),
    "moe_ep_stat": dict(m=EP_MOE, deployment=EP),
    "moe_ep_overlap_dedup": dict(m=EP_MOE, deployment=EP | {"communication": {
        "overlap": "two_micro_batches", "node_dedup": True, "dispatch_dtype": "fp8_block"}}),
    "moe_zipf_redundant": dict(m=EP_MOE, deployment=EP | {"experts": {"zipf_s": 1.0, "redundant": 16}}),
    "moe_cold": dict(m=MOE, deployment={"experts": {"cold_fraction": 0.5}}),
    "mtp_ep_overlap": dict(m=EP_MOE, deployment=EP | {"mtp": {"draft_tokens": 2, "acceptance": [0.8, 0.6]},
                                                      "communication": {"overlap": "two_micro_batches"}}),
    "mla_sparse_mtp": dict(m=MLA_MTP, deployment={"sparse_attention": {"top_k_tokens": 300},
                                                  "mtp": {"draft_tokens": 1, "acceptance": [0.9]}}),
    "gqa_sparse_fp8": dict(m=GQA, kv_dtype="fp8", deployment={"sparse_attention": {"top_k_tokens": 256}}),
    # The CPU outpaces the GPU early in the run and falls behind later: max() switches inside the run.
    "eager_launch_bound": dict(m=GQA, step_overhead_s=0.0,
                               deployment={"host": {"cuda_graphs": False, "kernel_launch_host_s": 5e-4}}),
    "measured_profile": dict(m=MLA_MTP, profile=_profile(), launch_s=3e-6,
                             deployment={"mtp": {"draft_tokens": 1, "acceptance": [0.85]}}),
    "measured_gqa_dp": dict(m=GQA, profile=_profile(), deployment={"dp": 2}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_decode_run_equals_step_cost_elementwise(name):
    kw = dict(CASES[name])
    cost = model(kw.pop("m"), **kw)
    first = decode(32, 180)
    steps = 400
    totals, parts = cost.decode_run(first, steps)
    assert totals.shape == (steps,) and np.all(totals > 0)
    for j in range(steps):
        b = first._replace(decode_ctx_sum=first.decode_ctx_sum + 32 * j)
        one = cost.step_cost(b)
        direct_total, direct_parts, _ = cost._price(b, float(b.decode_ctx_sum))  # bypassing the tables
        assert totals[j] == one.total_s == float(direct_total), (name, j)
        for k in PARTS:
            assert parts[k][j] == one.parts[k] == float(direct_parts[k]), (name, j, k)
        assert sum(one.parts[k] for k in PARTS) == pytest.approx(one.total_s, rel=1e-14, abs=0)
        assert all(v >= 0 for v in one.parts.values())
    assert totals[-1] >= totals[0]  # contexts grew (a launch-bound run stays flat)


def test_eager_case_crosses_from_launch_bound_to_gpu_bound():
    kw = dict(CASES["eager_launch_bound"])
    cost = model(kw.pop("m"), **kw)
    _, parts = cost.decode_run(decode(32, 180), 400, ctx_sums=32 * np.linspace(181, 200_000, 400))
    assert parts["overhead"][0] > 0 and parts["overhead"][-1] == 0


def test_decode_run_with_given_contexts():
    """With MTP a step adds more than one token per sequence: the scheduler passes each step's context sum."""
    cost = model(EP_MOE, deployment=EP | {"mtp": {"draft_tokens": 1, "acceptance": [0.85]}})
    first = decode(16, 100)
    ctx = first.decode_ctx_sum + np.array([0, 27, 61, 90])
    totals, _, hidden = cost.decode_run(first, 4, ctx_sums=ctx, with_hidden=True)
    for j in range(4):
        one = cost.step_cost(first._replace(decode_ctx_sum=int(ctx[j])))
        assert totals[j] == one.total_s and hidden[j] == one.hidden_s
    with pytest.raises(ValueError, match="3 entries for 4 steps"):
        cost.decode_run(first, 4, ctx_sums=ctx[:3])


@pytest.mark.parametrize("name", sorted(CASES))
def test_mixed_steps_equal_the_full_composition_whatever_was_kept_before(name):
    """A mixed step (prefill chunks + decodes) is composed in full from the kept layer parts and op times: bit
    for bit the composition of a fresh model, in every part, whichever shapes and contexts came first."""
    kw = dict(CASES[name])
    m = kw.pop("m")
    cost = model(m, **kw)
    p, d = prefill(2, 700, 100), decode(24, 500)
    base = p._replace(decode_seqs=d.decode_seqs, decode_ctx_sum=d.decode_ctx_sum,
                      sampled_seqs=p.sampled_seqs + d.sampled_seqs)
    for ctx in (base.decode_ctx_sum, 30, 24 * 4_000, 24 * 150_000, base.decode_ctx_sum + 7):
        b = base._replace(decode_ctx_sum=ctx)
        got = cost.step_cost(b)
        fresh = model(m, **kw)
        total, parts, hidden = fresh._price(b, float(ctx))
        assert got.total_s == float(total) and got.hidden_s == float(hidden), (name, ctx)
        assert got.parts == {k: float(parts[k]) for k in PARTS}, (name, ctx)
    assert cost.steps.ops and cost.steps.layers  # (what later shapes share was kept)


def test_context_tables_extend_both_ways_and_stay_within_their_budget():
    """Runs read from tables that are extended above and below and evicted least recently used first still
    equal step_cost element by element; the tables never hold more than half of KEPT_VALUES floats in all."""
    cost = model(GQA, deployment={"host": {"cuda_graphs": False, "kernel_launch_host_s": 5e-4}})
    kept = cost.steps
    kept.max_values = 40_000
    runs = [(8, 2_000, 50), (8, 1_900, 20), (8, 2_300, 100), (8, 20_000, 50), (8, 100, 40), (8, 9_000, 300), (3, 50, 10), (8, 30_000, 20), (5, 4_000, 100),
            (8, 100, 5), (64, 64 * 300, 30)]
    spans = []
    for seqs, ctx_each, steps in runs:
        first = decode(seqs, ctx_each)
        totals, parts = cost.decode_run(first, steps)
        for j in range(steps):
            one = cost.step_cost(first._replace(decode_ctx_sum=first.decode_ctx_sum + seqs * j))
            assert totals[j] == one.total_s and parts["overhead"][j] == one.parts["overhead"], (seqs, ctx_each, j)
        assert kept.entries == sum(t.hi - t.lo for w in kept.tables.values() for t in w) <= 20_000
        t = kept.tables[(0, 0, 0, 0, 0, seqs, seqs)][0]  # (the window just used comes first)
        spans.append((t.lo, t.hi))
    assert spans[1][0] < spans[0][0] and spans[1][1] == spans[0][1]  # extended below
    assert spans[2][0] == spans[1][0] and spans[2][1] > spans[1][1]  # then above
    order = [key[5] for key in kept.tables]
    assert order == [3, 5, 8, 64][-len(order):] and order[-2:] == [8, 64]  # least recently used first (and gone first)
    kept.max_values = 12_000
    totals, _ = cost.decode_run(decode(2, 1_000), 30)
    assert totals[-1] == cost.step_cost(decode(2, 1_029)).total_s
    assert [key[5] for key in kept.tables][-1] == 2 and 3 not in [key[5] for key in kept.tables]
    assert kept.entries == sum(t.hi - t.lo for w in kept.tables.values() for t in w) <= 6_000


def test_a_shape_met_at_far_apart_contexts_keeps_a_window_at_each():
    """Instances sharing a pool's model decode the same shape at their own context sums: going back and forth
    between them reprices nothing once each region has its window, and every step still equals stepping."""
    cost = model(GQA)
    priced = []
    price = cost.steps.price_contexts
    cost.steps.price_contexts = lambda b, ctx: (priced.append(len(ctx)), price(b, ctx))[1]
    regions = [8 * 1_000, 8 * 40_000, 8 * 90_000]
    for _ in range(3):
        for ctx in regions:
            first = decode(8, ctx // 8)
            totals, _ = cost.decode_run(first, 20)
            assert totals[-1] == cost.step_cost(first._replace(decode_ctx_sum=first.decode_ctx_sum + 8 * 19)).total_s
    assert len(priced) == len(regions)  # one window priced per region, then only read
    assert len(cost.steps.tables[(0, 0, 0, 0, 0, 8, 8)]) == len(regions)
