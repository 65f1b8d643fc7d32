"""The kept step costs the simulator reads (sim/core/cost/tables.py): a run read from a table's strided slice, summed
and split into parts, equals stepping through step_cost; context values equal their pricing wherever the window
moves, and stay bounded."""
from __future__ import annotations

import numpy as np
import pytest

from sim.core.cost.base import PARTS
from sim.core.cost.constant import SyntheticCostModel
from tests.cost.test_decode_run import CASES
from tests.cost.toys import decode, model


# gqa: one part varies (decode attention); eager_launch_bound: the overhead varies too; moe_ep_overlap_dedup: the
# hidden communication varies with the context.
@pytest.mark.parametrize("name", ["gqa", "eager_launch_bound", "moe_ep_overlap_dedup", "measured_profile"])
def test_a_run_split_into_parts_equals_its_steps_summed(name):
    kw = dict(CASES[name])
    cost = model(kw.pop("m"), **kw)
    first, steps = decode(8, 300), 150
    table, i0, stride = cost.decode_steps(first, steps)
    busy, parts, hidden = 0.0, dict.fromkeys(PARTS, 0.0), 0.0
    for j in range(steps):
        one = cost.step_cost(first._replace(decode_ctx_sum=first.decode_ctx_sum + 8 * j))
        assert table.times[i0 + j * stride] == one.total_s, (name, j)
        busy += one.total_s
        hidden += one.hidden_s
        for k in PARTS:
            parts[k] += one.parts[k]
    for n in (1, 37, steps):  # a run cut short reads the first n steps
        got, got_hidden = table.run_parts(i0, stride, n, busy if n == steps else
                                          sum(table.times[i0 + j * stride] for j in range(n)))
        if n == steps:
            assert got == pytest.approx([parts[k] for k in PARTS], rel=1e-9, abs=1e-15), name
            assert got_hidden == pytest.approx(hidden, rel=1e-9, abs=1e-15), name
        assert sum(got) == pytest.approx(sum(table.times[i0 + j * stride] for j in range(n)), rel=1e-12)
        assert all(v >= 0 for v in got)


def test_a_constant_model_run_is_its_step_repeated():
    """The synthetic model keeps its steps in the same step cache: a run's entries are all the one step's time."""
    cost = SyntheticCostModel(0.02, 1e-4)
    b = decode(3, 90)
    table, i0, stride = cost.decode_steps(b, 500)
    assert {table.times[i0 + j * stride] for j in range(500)} == {cost.step_cost(b).total_s}
    assert table.times[i0] == pytest.approx(0.02 + 3e-4)
    parts, hidden = table.run_parts(i0, stride, 500, 500 * table.times[i0])
    assert parts[PARTS.index("overhead")] == pytest.approx(500 * (0.02 + 3e-4)) and hidden == 0.0


def test_every_step_cost_lists_its_parts_in_parts_order():
    """The simulator accounts parts as a vector in PARTS order (the StepCost contract), whichever path priced
    the step: context table, exact shape, mixed form, or the synthetic model."""
    from tests.cost.toys import prefill
    cost = model(CASES["gqa"]["m"])
    p, d = prefill(1, 300, 0), decode(4, 200)
    mixed = p._replace(decode_seqs=d.decode_seqs, decode_ctx_sum=d.decode_ctx_sum, sampled_seqs=p.sampled_seqs + 4)
    shapes = [d, p, mixed, mixed._replace(decode_ctx_sum=d.decode_ctx_sum + 40)]  # the last: from the kept form
    costs = [cost.step_cost(b) for b in shapes] + [SyntheticCostModel(0.01).step_cost(d)]
    for one in costs:
        assert list(one.parts) == list(PARTS)


@pytest.mark.parametrize("make", ["layered", "synthetic"])
def test_the_one_cache_stays_within_its_bound_and_eviction_only_reprices(make):
    """Many decode, prefill and mixed shapes through a cache of 4,096 floats: its tables hold at most half of
    them, each per-shape memo at most its share of the other half, and every price equals an unbounded model's."""
    from sim.core.cost.tables import PER_SHAPE
    from tests.cost.toys import prefill

    def build():
        return model(CASES["gqa"]["m"]) if make == "layered" else SyntheticCostModel(0.01, 1e-5)
    small, free = build(), build()
    small.steps.max_values = 4096
    limit = (4096 >> 1) // PER_SHAPE
    for i in range(1, 400):
        d = decode(1 + i % 37, 50 * i)
        p = prefill(1 + i % 3, 10 + 7 * i, i % 5 * 100)
        mixed = p._replace(decode_seqs=d.decode_seqs, decode_ctx_sum=d.decode_ctx_sum,
                           sampled_seqs=p.sampled_seqs + d.decode_seqs)
        for b in (d, p, mixed):
            assert small.step_cost(b) == free.step_cost(b)
        table, i0, stride = small.decode_steps(d, 20)
        assert table.times[i0 + 19 * stride] == free.step_cost(d._replace(
            decode_ctx_sum=d.decode_ctx_sum + 19 * d.decode_seqs)).total_s
        cache = small.steps
        assert cache.entries <= 4096 // 2
        assert sum(t.hi - t.lo for ws in cache.tables.values() for t in ws) == cache.entries
        assert max(len(cache.exact), len(cache.layers), len(cache.ops)) <= limit
    assert len(cache.tables) < 37 and len(cache.exact) < 399  # (both kinds were evicted along the way)
