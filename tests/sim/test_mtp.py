"""Speculative decoding / multi-token prediction in the scheduler: accepted drafts emit extra tokens per step."""
from __future__ import annotations

import numpy as np

from scenarios.workload import Workload
from sim.simulate import simulate

from tests.sim.helpers import run_config


import pytest

TOY_MTP = """name: toy_mtp
num_layers: 8
hidden_size: 2048
vocab_size: 32000
attention: {kind: gqa, num_heads: 16, num_kv_heads: 4, head_dim: 128}
ffn: {kind: gated, intermediate_size: 5632}
mtp_modules: 1
max_context_tokens: 4096
"""


@pytest.fixture
def model(tmp_path):
    """A small dense model that declares one multi-token-prediction module (as DeepSeek-V3's config does)."""
    path = tmp_path / "toy_mtp.yaml"
    path.write_text(TOY_MTP)
    return f"scenario.pools.main.model={path}"


def one_request(model, *overrides):
    wl = Workload.from_columns([0.0], [200], [41])
    return simulate(run_config("scenario.pools.main.instances=1", "batching.token_budget=4096", model, *overrides), wl)


def test_always_accepted_draft_halves_the_decode_steps(model):
    # 41 output tokens: 1 from the prefill, then 40 from decodes. With one draft always accepted, each decode
    # emits 2 tokens: 20 decode steps instead of 40.
    base = one_request(model)
    mtp = one_request(model, "+scenario.pools.main.deployment={mtp: {draft_tokens: 1, acceptance: [1.0]}}")
    assert base.summary["pools"]["main"]["iterations"] == 41
    assert mtp.summary["pools"]["main"]["iterations"] == 21
    assert mtp.requests["status"][0] == "completed"
    # A verify step costs more than a plain decode (draft module + two query tokens) but there are half as many.
    assert mtp.requests["e2e_s"][0] < base.requests["e2e_s"][0]


def test_never_accepted_draft_costs_time_and_saves_no_step(model):
    base = one_request(model)
    mtp = one_request(model, "+scenario.pools.main.deployment={mtp: {draft_tokens: 1, acceptance: [0.0]}}")
    assert mtp.summary["pools"]["main"]["iterations"] == base.summary["pools"]["main"]["iterations"]
    assert mtp.requests["e2e_s"][0] > base.requests["e2e_s"][0]


def test_partial_acceptance_is_seeded_and_between_the_bounds(model):
    wl = Workload.from_columns(np.arange(20) * 0.05, np.full(20, 100), np.full(20, 60))
    over = ["scenario.pools.main.instances=1", "batching.token_budget=4096", model, "+scenario.pools.main.deployment={mtp: {draft_tokens: 1, acceptance: [0.85]}}"]
    a, b = simulate(run_config(*over), wl), simulate(run_config(*over), wl)
    np.testing.assert_array_equal(a.requests["finish_s"], b.requests["finish_s"])
    assert all(v == "ok" for v in a.summary["invariants"].values())
    assert (a.requests["status"] == "completed").all()
    # One request alone: 40 decode tokens at 1.85 tokens per step take about 22 steps, never fewer than 20 nor
    # more than 40 (+1 prefill).
    one = one_request(model, "+scenario.pools.main.deployment={mtp: {draft_tokens: 1, acceptance: [0.85]}}")
    assert 21 <= one.summary["pools"]["main"]["iterations"] < 41


def test_drafts_are_accepted_only_behind_accepted_drafts(model):
    """Two drafts accepted with probabilities 0.5 and 0.9: the second counts only when the first was accepted,
    so a decode step emits 1 + 0.5 + 0.5 x 0.9 = 1.95 tokens on average (2.4 if they were independent). Over
    3,000 decode tokens the per-step mean has a standard error of about 1.3%; the bound is 5%."""
    wl = Workload.from_columns([0.0], [200], [3001])
    res = simulate(run_config("scenario.pools.main.instances=1", "batching.token_budget=4096", model,
                              "+scenario.pools.main.deployment={mtp: {draft_tokens: 2, acceptance: [0.5, 0.9]}}"), wl)
    decode_steps = res.summary["pools"]["main"]["iterations"] - 1
    assert 3000 / decode_steps == pytest.approx(1.95, rel=0.05)
