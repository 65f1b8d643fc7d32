"""The run-folder reader (sim/results/read.py): this version read, version 1 upgraded, anything else refused in one line."""
from __future__ import annotations

import json

import pytest

from inferplan.errors import InputError
from sim.results.read import read_summary, try_summary
from sim.results.schema import DONE, SCHEMA_VERSION, SUMMARY


def _folder(tmp_path, summary, done=True):
    (tmp_path / SUMMARY).write_text(json.dumps(summary))
    if done:
        (tmp_path / DONE).write_text("ok\n")
    return tmp_path


V1 = {"scenario": "smoke", "requests": {"arrived": 1}, "cost": {"usd": 2.0, "node_hours": 8.0},
      "pools": {"main": {"device_hours": 8.0}}}


def test_version_1_is_upgraded_with_its_device_hours_kept(tmp_path):
    s = read_summary(_folder(tmp_path, V1))
    assert s["schema_version"] == SCHEMA_VERSION
    assert s["cost"]["device_hours"] == 8.0 and s["cost"]["node_hours"] is None  # (devices per node unknown)
    assert s["pools"]["main"]["node_hours"] is None


@pytest.mark.parametrize("summary, done, message", [
    ({**V1, "schema_version": SCHEMA_VERSION + 1}, True, "schema_version"),
    ({"hello": 1}, True, "not an inferplan run summary"),
    ({**V1, "requests": {"arrived": "many"}}, True, "requests.arrived: is 'many', expected int"),
    ({**V1, "schema_version": SCHEMA_VERSION, "pools": {"main": {"tp": 1.5}}}, True, "pools.main.tp"),
    (V1, False, "no DONE marker"),
])
def test_other_folders_are_refused_in_one_line(tmp_path, summary, done, message):
    folder = _folder(tmp_path, summary, done)
    with pytest.raises(InputError) as info:
        read_summary(folder)
    assert message in str(info.value) and "\n" not in str(info.value)
    assert try_summary(folder) is None


def test_the_writer_refuses_a_summary_off_the_schema():
    from sim.results.schema import summary_problem

    assert summary_problem({**V1, "schema_version": SCHEMA_VERSION}) == ("status", "missing")
    assert summary_problem(V1, complete=False) is None
