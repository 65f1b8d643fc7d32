"""`calibrate.aic.lookup.GridLookup`: the shipped grids' prices, sliced along the arguments a pricer varies, equal
`GridModel.latency_s` at random shapes (in range, below and beyond the measured axes), and a float query equals the
same element of an array query bit for bit (what the simulator's decode tables rely on)."""
from __future__ import annotations

import numpy as np
import pytest

from calibrate.aic.lookup import GridLookup
from calibrate.profile import load_profile
from sim.core.cost.factory import default_grid

# Relative tolerance: the lookup recovers each knot's log(latency / reference) from the grid's latency and
# multiplies back, and interpolates in a different (but exactly equivalent) order: a few ulps, never more.
REL = 1e-12


@pytest.fixture(scope="module", params=["h100_sxm", "b200"])
def grid(request):
    return load_profile(default_grid(request.param)).grid


def _shapes(rng):
    for _ in range(60):
        yield "gemm", dict(dtype=str(rng.choice(["bf16", "fp8_block"])), m=float(rng.integers(1, 40_000)),
                           n=float(rng.choice([1280, 7168, 8192, 16032])), k=float(rng.choice([1024, 3584, 8192])))
        yield "attn_prefill", dict(batch=float(rng.uniform(1, 400)), seq=float(rng.uniform(1, 40_000)),
                                   heads=int(rng.choice([4, 8, 16])), kv_heads=int(rng.choice([1, 2])), head_dim=128,
                                   dtype=str(rng.choice(["bf16", "fp8"])))
        yield "attn_decode", dict(batch=float(rng.uniform(0.5, 4000)), ctx=rng.uniform(1, 300_000, 7),
                                  heads=int(rng.choice([8, 16, 64])), kv_heads=int(rng.choice([1, 8])), head_dim=128,
                                  dtype=str(rng.choice(["bf16", "fp8"])))
        yield "moe_gemm", dict(dtype="fp8_block", tokens=float(rng.uniform(0.5, 40_000)), hidden=7168, inter=2048,
                               topk=8, experts=256, tp=int(rng.choice([1, 8])), ep=1)
        yield "allreduce", dict(bytes=float(rng.uniform(1, 4e9)), gpus=int(rng.choice([2, 4, 8])),
                                impl=str(rng.choice(["custom", "nccl"])))
        yield "all_to_all", dict(bytes=float(rng.uniform(1, 4e9)), gpus=8, dtype="int8")


def test_lookup_equals_the_grid_model(grid):
    lookup = GridLookup(grid)
    for op, shape in _shapes(np.random.default_rng(7)):
        want = np.asarray(grid.latency_s(op, **shape))
        got = np.asarray(lookup.latency_s(op, **shape))
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=REL, atol=0, err_msg=f"{op} {shape}")


def test_a_float_query_is_bit_for_bit_the_element_of_an_array_query(grid):
    lookup = GridLookup(grid)
    ctx = np.random.default_rng(3).uniform(1, 200_000, 300)
    for batch in (0.7, 7.0, 300.0):
        kw = dict(batch=batch, heads=8, kv_heads=1, head_dim=128, dtype="bf16")
        many = lookup.latency_s("attn_decode", ctx=ctx, **kw)
        one = np.array([lookup.latency_s("attn_decode", ctx=float(c), **kw) for c in ctx])
        assert (many == one).all()


def test_no_work_is_free_and_errors_are_the_grid_models(grid):
    lookup = GridLookup(grid)
    assert lookup.latency_s("gemm", dtype="bf16", m=0.0, n=8192, k=8192) == 0.0
    assert lookup.latency_s("allreduce", bytes=1e6, gpus=1) == 0.0
    assert list(lookup.latency_s("attn_decode", batch=4.0, ctx=np.array([0.0, 100.0]), heads=8, kv_heads=1,
                                 head_dim=128, dtype="bf16") > 0) == [False, True]
    with pytest.raises(KeyError, match="no measurements for fp4"):
        lookup.latency_s("gemm", dtype="fp4", m=16.0, n=1024, k=1024)
    with pytest.raises(TypeError, match="missing"):
        lookup.latency_s("gemm", dtype="bf16", m=16.0, n=1024)
