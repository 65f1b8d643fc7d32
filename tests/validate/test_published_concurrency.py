"""`sim.validate.published` maps a fixed-concurrency row (`max_concurrency`, or `--max-concurrency` in the flags)
to closed-loop clients; a tiny synthetic table (written here, in the shipped table's columns)."""
from __future__ import annotations

import csv

import numpy as np
import pytest

from inferplan.errors import InputError
from sim.validate.published import CSV_PATH, build_setup, concurrency, read_rows, simulate_setup


def _table(tmp_path, **cols):
    header = next(csv.reader(CSV_PATH.open()))
    row = dict.fromkeys(header, "")
    row.update(id="T01", engine="vLLM", engine_version="0.8.5", model="meta-llama/Llama-3.1-8B-Instruct", tp="1",
               flags="vllm serve --max_model_len 4096", dataset="random", input_len="128", output_len="16",
               num_prompts="8", request_rate="inf", notes="basis=system")
    row.update(cols)
    path = tmp_path / "t.csv"
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, header)
        w.writeheader()
        w.writerow(row)
    return path


def test_max_concurrency_runs_as_closed_loop_clients(tmp_path):
    (row,) = read_rows(_table(tmp_path, max_concurrency="2"))
    setup = build_setup(row, tmp_path)
    assert setup.clients == 2 and any("2 closed-loop clients" in a for a in setup.assumptions)
    r = simulate_setup(setup).requests
    assert (r["status"] == "completed").all()
    arrival, finish = np.sort(r["arrival_s"]), r["finish_s"]
    # Two sent at t = 0; every later request is sent exactly when an earlier one ends (no think time), so at
    # most two are ever in flight.
    assert list(arrival[:2]) == [0.0, 0.0] and arrival[2] > 0.0
    assert all(np.isclose(finish, t).any() for t in arrival[2:])
    for t in arrival:
        assert int(np.sum((r["arrival_s"] <= t) & (r["finish_s"] > t))) <= 2


def test_concurrency_read_from_flags_or_column_and_checked(tmp_path):
    base = {"id": "T", "flags": "", "notes": ""}
    assert concurrency({**base, "max_concurrency": "4"}) == 4
    assert concurrency({**base, "notes": "client=vllm bench serve --max-concurrency 16 --num-prompts 80"}) == 16
    assert concurrency({**base, "flags": "--max-concurrency=8"}) == 8
    assert concurrency(base) is None and concurrency({**base, "max_concurrency": "inf"}) is None
    with pytest.raises(InputError, match="max_concurrency"):
        concurrency({**base, "max_concurrency": "2.5"})
    (row,) = read_rows(_table(tmp_path))
    assert build_setup(row, tmp_path).clients is None  # open loop: every request at t = 0 (rate inf)
