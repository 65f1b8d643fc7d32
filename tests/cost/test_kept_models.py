"""Cost models kept across runs in one process (`sim.core.cost.factory`): a run on a kept model writes what it
writes on a fresh one, because a step's cost depends on its shape alone."""
from __future__ import annotations

from pathlib import Path

from sim.core.cost import factory
from tests.cost.toys import GQA, decode, model, prefill
from tests.golden.cases import fingerprint, run_case

SMOKE = ["scenario=smoke", "metrics.progress=false", "++scenario.traffic.num_requests=200"]


def test_a_run_on_a_kept_model_writes_what_a_fresh_model_writes(tmp_path: Path):
    factory.forget_kept_models()
    fresh = fingerprint(run_case([*SMOKE, "batching=chunked_prefill"], tmp_path / "fresh"))
    kept_model = factory._kept.models()[0]
    # Other traffic on the same model: other shapes and contexts are priced and kept first.
    run_case([*SMOKE, "batching=continuous", "scenario.traffic.rate_per_s=40", "seed=7"], tmp_path / "other")
    again = fingerprint(run_case([*SMOKE, "batching=chunked_prefill"], tmp_path / "again"))
    assert factory._kept.models()[0] is kept_model  # (the same model served all three runs)
    assert again == fresh


def test_mixed_step_cost_does_not_depend_on_the_contexts_met_before():
    """The mixed form is referenced at context sum 0, so the first context a shape is met at leaves no trace."""
    p, d = prefill(2, 700, 100), decode(24, 500)
    mixed = p._replace(decode_seqs=d.decode_seqs, decode_ctx_sum=d.decode_ctx_sum,
                       sampled_seqs=p.sampled_seqs + d.sampled_seqs)
    one, other = model(GQA), model(GQA)
    for ctx in (24 * 9_000, 24 * 100, 31):
        other.step_cost(mixed._replace(decode_ctx_sum=ctx))
    for ctx in (mixed.decode_ctx_sum, 24 * 3_000, 7):
        b = mixed._replace(decode_ctx_sum=ctx)
        assert one.step_cost(b) == other.step_cost(b)


def test_kept_models_are_bounded_and_keyed_by_content(tmp_path: Path):
    """Runs of the same pool content share one model; other content gets its own, at most KEPT_MODELS in all."""
    factory.forget_kept_models()
    run_case([*SMOKE, "scenario.pools.main.instances=1"], tmp_path / "a")
    run_case([*SMOKE, "scenario.pools.main.instances=3"], tmp_path / "b")  # (instances: not the model's content)
    assert len(factory._kept) == 1
    for i, hw in enumerate(["h200", "a100_80gb", "h100_pcie", "l40s", "h800"]):
        run_case([*SMOKE, f"scenario.pools.main.hardware={hw}"], tmp_path / f"hw{i}")
    assert len(factory._kept) == factory.KEPT_MODELS
    factory.forget_kept_models()


def test_a_measured_grid_model_is_kept_by_its_loaded_grid(tmp_path: Path):
    """A pool priced from a measured grid profile is kept too (its grid compares as the one object loaded from the
    file), and a run on the kept model writes what a fresh one writes, the provenance of what priced each op
    included."""
    measured = [*SMOKE, "cost.profile=measured", "scenario.pools.main.hardware=h100_sxm", "batching=chunked_prefill"]
    factory.forget_kept_models()
    fresh = fingerprint(run_case(measured, tmp_path / "fresh"))
    assert len(factory._kept) == 1
    kept_model = factory._kept.models()[0]
    assert kept_model.pricer.grid is not None
    run_case([*measured, "scenario.traffic.rate_per_s=40", "seed=7"], tmp_path / "other")
    again = fingerprint(run_case(measured, tmp_path / "again"))
    assert factory._kept.models() == [kept_model] and again == fresh
    factory.forget_kept_models()
