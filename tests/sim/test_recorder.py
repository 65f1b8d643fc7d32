"""The request recorder: columns that stay zero cost no memory until a request needs them, and read the same."""
from __future__ import annotations

import numpy as np

from scenarios.workload import Workload
from sim.core.instance.request_state import SimRequest
from sim.core.metrics import RequestRecorder


def _recorded(n: int, changes: dict[int, dict]) -> tuple[RequestRecorder, dict]:
    wl = Workload.from_columns(np.arange(n, dtype=np.float64), np.full(n, 8), np.full(n, 3))
    rec = RequestRecorder(wl, ["main", "decode"])
    for i in range(n):
        req = SimRequest(i, float(i), 8, 3)
        req.status, req.finish_s, req.first_token_s, req.pool, req.instance = "completed", i + 2.0, i + 1.0, "main", 0
        for k, v in changes.get(i, {}).items():
            setattr(req, k, v)
        rec.on_arrival(req)
        rec.record(req)
    return rec, rec.columns()


def test_zero_columns_are_allocated_only_when_a_request_needs_them():
    rec, cols = _recorded(1000, {})
    assert rec.cached_tokens is None and rec.preemptions is None and rec.fallback is None and rec.prefill_pool is None
    for name in ("cached_tokens", "preemptions"):
        assert cols[name].shape == (1000,) and not cols[name].any() and cols[name].strides == (0,)
    assert cols["fallback"].dtype == np.bool_ and not cols["fallback"].any()
    assert cols["prefill_pool"].tolist() == [""] * 1000
    assert (cols["cached_tokens"].dtype, cols["preemptions"].dtype) == (np.int64, np.int32)


def test_a_written_zero_column_reads_as_before():
    rec, cols = _recorded(5, {1: {"cached_tokens": 512, "preemptions": 2},
                              3: {"fallback": True, "prefill_pool": "decode"}})
    assert cols["cached_tokens"].tolist() == [0, 512, 0, 0, 0]
    assert cols["preemptions"].tolist() == [0, 2, 0, 0, 0]
    assert cols["fallback"].tolist() == [False, False, False, True, False]
    assert cols["prefill_pool"].tolist() == ["", "", "", "decode", ""]
    assert cols["tpot_s"].tolist() == [0.5] * 5  # (finish - first) / (3 - 1)
