"""A scheduled iteration's KV load and exposed host work (`sim.core.cost.host_overlap`), on a step of 10 ms of
GPU time (attention) and h = 4 ms of per-iteration host overhead."""
from __future__ import annotations

import pytest

from sim.core.cost import host_overlap
from sim.core.cost.base import PARTS, BatchShape, StepCost
from sim.core.cost.constant import SyntheticCostModel
from sim.core.cost.host_overlap import OVERLAP_ALL, OVERLAP_NONE, OVERLAP_OUTPUT, scheduled_cost
from sim.core.instance import batch

GPU_S, H_S = 0.010, 0.004


def step() -> StepCost:
    parts = dict.fromkeys(PARTS, 0.0)
    parts["attention"], parts["overhead"] = GPU_S, H_S
    return StepCost(GPU_S + H_S, parts, 0.001)


def test_nothing_added_is_the_shape_price_itself():
    cost = step()
    assert scheduled_cost(cost, 0.0, 0.0, OVERLAP_NONE, True) is cost
    assert scheduled_cost(cost, 0.0, 0.0, OVERLAP_ALL, False) is cost  # (h exposed after idle: as priced)


@pytest.mark.parametrize("overlap, back_to_back, host_s, exposed_s", [
    (OVERLAP_NONE, True, 0.003, H_S + 0.003),
    (OVERLAP_ALL, False, 0.003, H_S + 0.003),          # after idle nothing ran to hide it
    (OVERLAP_OUTPUT, False, 0.003, H_S + 0.003),
    (OVERLAP_ALL, True, 0.003, 0.0),                   # max(0, h + s - gpu)
    (OVERLAP_ALL, True, 0.008, H_S + 0.008 - GPU_S),
    (OVERLAP_OUTPUT, True, 0.003, H_S),                # h + max(0, s - gpu)
    (OVERLAP_OUTPUT, True, 0.013, H_S + 0.013 - GPU_S),
])
def test_exposed_host_work(overlap: int, back_to_back: bool, host_s: float, exposed_s: float):
    cost = scheduled_cost(step(), 0.0, host_s, overlap, back_to_back)
    assert cost.parts["overhead"] == pytest.approx(exposed_s, abs=1e-15)
    assert cost.total_s == pytest.approx(GPU_S + exposed_s, abs=1e-15)
    assert cost.hidden_s == 0.001


def test_a_kv_load_is_communication_before_the_host_work_is_exposed():
    # 5 ms of load lengthens the GPU time the host work may hide under: 15 ms > h + s = 12 ms, all hidden.
    cost = scheduled_cost(step(), 0.005, 0.008, OVERLAP_ALL, True)
    assert cost.parts["communication"] == 0.005 and cost.parts["overhead"] == 0.0
    assert cost.total_s == pytest.approx(GPU_S + 0.005)
    assert sum(cost.parts.values()) == pytest.approx(cost.total_s)


def test_a_cost_model_prices_the_scheduled_iteration_the_same_way():
    model = SyntheticCostModel(0.010, 0.001)
    b = BatchShape(decode_seqs=4, decode_ctx_sum=400, sampled_seqs=4)
    for overlap in (OVERLAP_NONE, OVERLAP_OUTPUT, OVERLAP_ALL):
        for back_to_back in (False, True):
            assert (model.step_cost(b, 0.002, 0.003, overlap, back_to_back)
                    == scheduled_cost(model.step_cost(b), 0.002, 0.003, overlap, back_to_back))


def test_the_schedulers_overlap_codes_are_the_cost_models():
    assert (batch.OVERLAP_NONE, batch.OVERLAP_OUTPUT, batch.OVERLAP_ALL) == (
        host_overlap.OVERLAP_NONE, host_overlap.OVERLAP_OUTPUT, host_overlap.OVERLAP_ALL)
