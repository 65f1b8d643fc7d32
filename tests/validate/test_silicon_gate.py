"""The fidelity gate: the matrix of the fixed subset in `sim/validate/data/silicon_baseline.json`, recomputed from
the shipped rows (no ../shared), must not be worse than the baseline by more than 2 points overall (TTFT or TPOT
median |error|) or 10 points in any partition, and every baseline row must still simulate."""
from __future__ import annotations

import copy

import pytest

from sim.validate.silicon.gate import PARTITION_POINTS, choose_subset, compute, load_baseline, regressions


@pytest.fixture(scope="module")
def baseline():
    return load_baseline()


def test_matrix_of_the_baseline_subset_is_no_worse(baseline):
    current = compute(baseline["ids"], jobs=2)
    assert regressions(current, baseline) == []
    assert current["overall"]["rows"] == len(baseline["ids"])


def test_baseline_covers_every_partition_of_the_shipped_h100_h200_matrix(baseline):
    rows = sum(p["rows"] for p in baseline["partitions"].values())
    assert len(baseline["ids"]) == baseline["overall"]["rows"] == rows
    assert len(baseline["partitions"]) >= 20


def test_regressions_flag_worse_errors_beyond_the_tolerances(baseline):
    worse = copy.deepcopy(baseline)
    worse["overall"]["ttft_median_abs_pct"] += 2.5
    part = next(iter(worse["partitions"]))
    worse["partitions"][part]["tpot_median_abs_pct"] += PARTITION_POINTS + 0.5
    found = regressions(worse, baseline)
    assert len(found) == 2
    assert found[0].startswith("overall: TTFT median |error|") and found[1].startswith(f"{part}: TPOT median |error|")
    slightly = copy.deepcopy(baseline)
    slightly["overall"]["tpot_median_abs_pct"] += 1.9  # within 2 points
    assert regressions(slightly, baseline) == []
    lost = copy.deepcopy(baseline)
    lost["failed"] = {"some_row": "failed: InputError: ..."}
    lost["partitions"][part]["rows"] -= 1
    assert any("no longer simulates" in p for p in regressions(lost, baseline))
    assert any(p.startswith(f"{part}: ") and "rows simulated" in p for p in regressions(lost, baseline))


def test_choose_subset_covers_every_partition_and_both_ends_of_its_load_where_cheap():
    def rec(i, clients_band, wall, shape="1024x1024"):
        return {"id": f"r{i}", "status": "simulated", "system": "h100_sxm", "engine": "vllm", "model": "M",
                "shape": shape, "band": clients_band, "wall_s": wall}
    recs = [rec(1, "1-4", 0.5), rec(2, "1-4", 0.2), rec(3, "5-32", 0.1), rec(4, ">128", 0.9), rec(5, ">128", 3.0),
            rec(6, "33-128", 2.5, shape="8192x1024"), rec(7, ">128", 4.0, shape="8192x1024"),
            {**rec(8, "1-4", 0.1), "status": "failed"}]
    # r3: quickest of its partition; r2, r4: quickest of its lowest and highest band (<= 1 s); r6: the other
    # partition's quickest row, however slow (its highest band's r7 is too slow to add).
    assert choose_subset(recs) == ["r3", "r2", "r4", "r6"]
