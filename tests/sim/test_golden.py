"""Every scenario and every policy writes what it wrote when tests/golden/outputs.json was recorded (byte-identical
Parquet, the same summary values): refactors and speed work may not change outputs unnoticed."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location("golden_cases", Path(__file__).parents[1] / "golden" / "cases.py")
cases = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(cases)
GOLDEN = json.loads(cases.GOLDEN.read_text())


def test_golden_covers_every_case():
    assert sorted(GOLDEN) == sorted(cases.CASES)


@pytest.mark.parametrize("name", sorted(cases.CASES))
def test_output_equals_golden(name, tmp_path):
    out = cases.run_case(cases.CASES[name], tmp_path / "run")
    diff = cases.differences(GOLDEN[name], cases.fingerprint(out, cases.summary_keys(GOLDEN[name])))
    assert not diff, (f"{name} changed its output; if intended, rerun `python tests/golden/cases.py --write` and "
                      "say why:\n  " + "\n  ".join(diff))


def test_a_difference_names_the_summary_value_and_the_column_that_changed():
    old = {"files": {"requests.parquet": "a"}, "columns": {"requests.parquet": {"ttft_s": {"sha256": "x", "sum": 1.5},
                                                                                "pool": {"sha256": "p"}}},
           "summary": {"latency_s": {"ttft": {"p99": 0.25}}, "seed": 0}}
    new = {"files": {"requests.parquet": "b"}, "columns": {"requests.parquet": {"ttft_s": {"sha256": "y", "sum": 2.0},
                                                                                "pool": {"sha256": "p"}}},
           "summary": {"latency_s": {"ttft": {"p99": 0.5}}, "seed": 0, "added": 1}}
    assert cases.differences(old, new) == ["requests.parquet: ttft_s (sum 1.5 -> 2.0)",
                                           "summary.latency_s.ttft.p99: 0.25 -> 0.5"]
    assert cases.differences(old, old) == []
