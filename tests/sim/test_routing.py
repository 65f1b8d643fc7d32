"""Routing picks: the least-loaded instance with ties to the lowest index, whatever order the candidates come in;
and requests enter at their workload rows across the chunks the cluster reads them in."""
from __future__ import annotations

import numpy as np
import pytest
import simpy

from scenarios.workload import Workload
from sim.core.cluster import ARRIVAL_CHUNK
from sim.core.cost.constant import SyntheticCostModel
from sim.core.instance.batching.presets import CONTINUOUS
from sim.core.instance.instance import Instance
from sim.core.instance.kv_cache import BlockManager
from sim.core.router import make_router
from sim.core.router.base import least_loaded
from sim.simulate import simulate
from tests.sim.helpers import run_config


def _instances(outstanding: list[int]) -> list[Instance]:
    env = simpy.Environment()
    out = []
    for i, n in enumerate(outstanding):
        kv = BlockManager(1000, 16)
        inst = Instance(env, "main", i, CONTINUOUS(kv), kv, SyntheticCostModel(0.01), on_finish=lambda r: None)
        inst.outstanding = n
        out.append(inst)
    return out


@pytest.mark.parametrize("loads, picked", [([3, 1, 2, 1], 1), ([0, 0, 0], 0), ([5, 4, 4, 9, 4], 1), ([7], 0)])
def test_least_loaded_takes_the_fewest_outstanding_then_the_lowest_index(loads, picked):
    insts = _instances(loads)
    assert least_loaded(insts).index == picked
    assert least_loaded(insts[::-1]).index == picked  # the order of the candidates does not matter
    assert make_router("least_outstanding", {}).route(None, insts[::-1]).index == picked


def test_requests_enter_with_their_own_rows_across_arrival_chunks():
    """One instance, requests far apart (no queueing), steps of 10 ms whatever the batch: each request takes
    exactly output_tokens iterations, so a row read from the wrong chunk position would show in its latency."""
    n = 2 * ARRIVAL_CHUNK + 123
    rng = np.random.default_rng(3)
    output = rng.integers(1, 40, n)
    wl = Workload.from_columns(np.arange(n) * 1.0, rng.integers(1, 50, n), output)
    res = simulate(run_config("scenario.pools.main.instances=1", "cost=constant", "cost.step_time_s=0.01",
                              "cost.per_token_s=0", "scenario.frontend_overhead_s=0"), wl)
    r = res.requests
    assert (r["status"] == "completed").all()
    np.testing.assert_allclose(r["e2e_s"], output * 0.01, rtol=1e-9)
    np.testing.assert_array_equal(r["output_tokens"], output)
