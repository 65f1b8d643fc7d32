"""Log replay compares ITL where the log has per-token times: the pooled gaps of the kept requests against the
simulation's ITL summary. Small logs synthesised here (the layout of the vLLM V26 example in test_formats)."""
from __future__ import annotations

import copy

import numpy as np
import pytest

from sim.validate.compare import compare
from sim.validate.formats import read_measured
from sim.validate.replay import Replay

from tests.validate.test_formats import VLLM_V26_DOC, write


def test_reader_pools_the_gaps_of_the_kept_requests(tmp_path):
    # Requests 0 and 1 succeed (gaps .021 .019 .020 and .022 .020); request 2 failed and is left out.
    m = read_measured(write(tmp_path, "v.json", VLLM_V26_DOC))
    np.testing.assert_allclose(m.itl_gaps_s, [0.021, 0.019, 0.020, 0.022, 0.020])


def _replay(m, itl: dict) -> Replay:
    n = len(m)
    return Replay(send_s=m.arrival_s, ttft_s=m.ttft_s, tpot_s=m.tpot_s, e2e_s=m.e2e_s,
                  status=np.array(["completed"] * n, dtype=object), busy_fraction=np.zeros(n), running=np.ones(n),
                  result=None, itl=itl)


def test_itl_error_is_reported_beside_ttft_and_tpot(tmp_path):
    doc = copy.deepcopy(VLLM_V26_DOC)
    doc["itls"] = [[0.010, 0.020, 0.030], [0.020, 0.020], []]
    m = read_measured(write(tmp_path, "v.json", doc))
    # Pooled gaps .010 .020 .030 .020 .020: mean .020, median .020. Simulated mean .025 (+25%), p50 .018 (-10%).
    block = compare(m, _replay(m, {"p50": 0.018, "p90": 0.03, "p99": 0.03, "mean": 0.025}), with_throughput=False)
    itl = block["metrics"]["itl_s"]
    assert itl["mean"]["measured"] == pytest.approx(0.020) and itl["mean"]["error_pct"] == pytest.approx(25.0)
    assert itl["p50"]["measured"] == pytest.approx(0.020) and itl["p50"]["error_pct"] == pytest.approx(-10.0)
    assert {"ttft_s", "tpot_s", "e2e_s", "itl_s"} <= set(block["metrics"])


def test_no_itl_block_without_per_token_times(tmp_path):
    m = read_measured(write(tmp_path, "v.json", VLLM_V26_DOC)).with_(itl_gaps_s=None)  # (a table log has none)
    block = compare(m, _replay(m, {"p50": 0.02, "p90": 0.02, "p99": 0.02, "mean": 0.02}), with_throughput=False)
    assert "itl_s" not in block["metrics"]
