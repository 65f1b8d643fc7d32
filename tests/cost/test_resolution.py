"""Op resolution is build-time (`sim.core.cost.pricer`): building a cost model resolves every curve, form and
measured grid slice its pool's steps use, so pricing steps afterwards (decode, prefill, mixed, runs; any size or
context) resolves nothing new and the pricer holds no prices: the step cache is the one memo of prices."""
from __future__ import annotations

import pytest

from sim.core.cost import factory
from tests.cost.test_decode_run import CASES
from tests.cost.test_measured_pricing import _pricing
from tests.cost.toys import decode, model, prefill

RESOLUTIONS = ("_resolved", "_forms", "_peaks", "measured", "analytical", "_covered", "_gemm_grid", "_gemm_curves",
               "_curves", "fallback", "absent")


def resolved(cost) -> dict[str, set]:
    return {k: set(getattr(cost.pricer, k)) for k in RESOLUTIONS}


def price_many(cost) -> None:
    p, d = prefill(3, 900, 2000), decode(5, 900)
    for b in (decode(1, 10), decode(64, 64 * 3000), prefill(1, 4000, 0), prefill(1, 7, 0), p,
              p._replace(decode_seqs=d.decode_seqs, decode_ctx_sum=d.decode_ctx_sum, sampled_seqs=8)):
        cost.step_cost(b)
        if b.decode_seqs and not b.prefill_seqs:
            cost.decode_steps(b, 40)


@pytest.mark.parametrize("name", sorted(CASES))
def test_pricing_steps_resolves_nothing_after_the_build(name):
    kw = dict(CASES[name])
    cost = model(kw.pop("m"), **kw)
    built = resolved(cost)
    price_many(cost)
    assert resolved(cost) == built


@pytest.mark.parametrize("model_name, hardware, pool", [
    ("llama3_70b", "h100_sxm", {}),
    ("deepseek_v3", "h200", {"weights_dtype": "fp8_block"}),
])
def test_a_grid_priced_pool_resolves_nothing_after_the_build(model_name, hardware, pool):
    factory.forget_kept_models()
    cost = _pricing(model_name, hardware, 8, **pool).cost
    built = resolved(cost)
    assert cost.pricer.grid is not None and built["measured"]
    price_many(cost)
    assert resolved(cost) == built
    factory.forget_kept_models()
